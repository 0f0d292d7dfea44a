"""Vault values never leave the vault (issue 35, item 2), on real namespace hosts.

A ``!vault`` value in ``flodl_cluster_env`` (group_vars beside the inventory) and one in h2's ``flodl_env`` (its
host_vars), encrypted by ansible-vault with a password file this test makes, go through ``cluster_train`` at
``-v`` and ``-vvvv`` and through ansible-runner. The launch command records its environment (outside the
project) and prints both values, as a training program might. Neither, as itself or as the hex of the
launcher's topology, may appear in any output, task result a callback receives (what ARA stores), runner event
or artifact, or log file under the project; the launcher must still get both whole.
"""
from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

from awx_job_dir import job_dir
from conftest import ansible_bin, run_ansible
from test_launch import TWO_VARIANTS, copy_project, project_vars, worker_vars
from test_runner import _runner

SECRET = "vault-only-Pr0be-7f3a9c"
# Vaulted in h2's own host_vars: not among the play host's (h1's) variables, so the launch step learns it from
# the launch environment's result.
WORKER_SECRET = "worker-only-Qz9-5d1e"
MARK = "<vaulted value withheld>"
PROBE = "FLODL_VAULT_PROBE"

# Every task result and the set_stats data, as a callback receives them (ARA records the same objects).
DUMP_CALLBACK = textwrap.dedent('''\
    import json
    import os

    from ansible.plugins.callback import CallbackBase


    class CallbackModule(CallbackBase):
        CALLBACK_VERSION = 2.0
        CALLBACK_TYPE = "aggregate"
        CALLBACK_NAME = "dump_results"
        CALLBACK_NEEDS_ENABLED = True

        def _dump(self, kind, data):
            with open(os.environ["DUMP_RESULTS_FILE"], "a") as fh:
                fh.write(json.dumps({"kind": kind, "data": data}, default=str) + "\\n")

        def _result(self, kind, result):
            data = getattr(result, "result", None)
            self._dump(kind, data if isinstance(data, dict) else result._result)

        def v2_runner_on_ok(self, result):
            self._result("ok", result)

        def v2_runner_on_failed(self, result, ignore_errors=False):
            self._result("failed", result)

        def v2_runner_on_skipped(self, result):
            self._result("skipped", result)

        def v2_runner_on_unreachable(self, result):
            self._result("unreachable", result)

        def v2_playbook_on_stats(self, stats):
            self._dump("stats", stats.custom)
    ''')


def _forms(secret: str) -> list[str]:
    return [secret, secret.encode().hex(), secret.encode().hex().upper()]


def _leaks(text: str) -> list[str]:
    return [form for secret in (SECRET, WORKER_SECRET) for form in _forms(secret) if form in text]


def _files_with_secret(root: Path) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if any(form.encode() in data for secret in (SECRET, WORKER_SECRET) for form in _forms(secret)):
                found.append(str(path))
    return found


def _vault(text: str, password_file: Path) -> str:
    """``!vault |`` and the ciphertext's lines, indented for a value of a second-level key."""
    enc = subprocess.run([ansible_bin("ansible-vault"), "encrypt_string", "--vault-password-file",
                          str(password_file), text], capture_output=True, text=True, check=True).stdout
    assert enc.startswith("!vault |"), enc
    return "!vault |\n" + "\n".join("    " + line.strip() for line in enc.splitlines()[1:] if line.strip())


def _vaulted_vars(inventory_dir: Path, vaulted: dict[str, str]) -> None:
    """Beside the inventory: flodl_cluster_env with one ``!vault`` value for the group, flodl_env with one for h2
    (``vaulted``: each secret as ``_vault`` encrypted it, once for every inventory of the test)."""
    (inventory_dir / "group_vars").mkdir(parents=True, exist_ok=True)
    (inventory_dir / "group_vars" / "flodl_workers.yml").write_text(
        'flodl_cluster_env:\n  FLODL_DEMO_STEPS: "2"\n  FLODL_DEMO_STEP_MS: "20"\n'
        f"  {PROBE}: {vaulted[SECRET]}\n")
    (inventory_dir / "host_vars").mkdir(parents=True, exist_ok=True)
    (inventory_dir / "host_vars" / "h2.yml").write_text(f"flodl_env:\n  {PROBE}_W: {vaulted[WORKER_SECRET]}\n")


def _launch_command(record: Path) -> str:
    """Record the environment, print the value as a training program might, then the stand-in launcher."""
    show = ("import binascii, json, os; "
            "topo = json.loads(binascii.unhexlify(os.environ['FLODL_INTERNAL_FULL_CLUSTER_JSON'])); "
            f"print('probe says', topo['env']['{PROBE}'], topo['workers'][1]['env']['{PROBE}_W'], flush=True)")
    return f"python3 record_env.py {record} && python3 -c \"{show}\" && python3 standin_launcher.py --epochs 2"


def _launcher_got_it(record: Path) -> None:
    env = json.loads(record.read_text())["env"]
    topo = json.loads(bytes.fromhex(env["FLODL_INTERNAL_FULL_CLUSTER_JSON"]))
    assert topo["env"][PROBE] == SECRET
    assert topo["workers"][1]["host"] == "h2" and topo["workers"][1]["env"][f"{PROBE}_W"] == WORKER_SECRET
    record.unlink()


def test_a_vaulted_cluster_env_value_reaches_the_launcher_and_nothing_else(
        installed_collection, cluster3, netns_shared_dir, tmp_path):
    cluster = cluster3
    project = copy_project(netns_shared_dir / "proj")
    password = tmp_path / "vault-pass"
    password.write_text("correct horse battery staple\n")
    record = tmp_path / "recorded.json"
    callbacks = tmp_path / "callback_plugins"
    callbacks.mkdir()
    (callbacks / "dump_results.py").write_text(DUMP_CALLBACK)
    group = project_vars(project, cluster, flodl_launch_command=_launch_command(record))
    del group["flodl_cluster_env"]  # from the vaulted group_vars only
    host_vars = worker_vars(project, TWO_VARIANTS, {"h1": [0], "h2": [0], "h3": [0]})
    inv = cluster.write_inventory(tmp_path / "inv" / "hosts.json", group, host_vars)
    vaulted = {secret: _vault(secret, password) for secret in (SECRET, WORKER_SECRET)}
    _vaulted_vars(inv.parent, vaulted)

    for verbosity in ("-v", "-vvvv"):
        dump, log = tmp_path / f"results{verbosity}.jsonl", tmp_path / f"ansible{verbosity}.log"
        proc = run_ansible(
            installed_collection,
            ["ansible-playbook", "-i", str(inv), "--vault-password-file", str(password), verbosity,
             "flodl.cluster.cluster_train"],
            env={"ANSIBLE_CALLBACK_PLUGINS": str(callbacks), "ANSIBLE_CALLBACKS_ENABLED": "dump_results",
                 "DUMP_RESULTS_FILE": str(dump), "ANSIBLE_LOG_PATH": str(log)})
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
        assert "[h3] done" in proc.stdout  # the ranks ran
        assert f"probe says {MARK} {MARK}" in proc.stdout  # the launcher's own line, withheld as it streamed
        assert _leaks(proc.stdout + proc.stderr) == [], verbosity
        assert dump.read_text().count('"kind": "ok"') >= 6
        assert _leaks(dump.read_text()) == [], f"a callback received the value at {verbosity}"
        assert _leaks(log.read_text()) == [], f"ansible's log_path holds the value at {verbosity}"
        _launcher_got_it(record)
    assert _files_with_secret(project) == []  # launch logs (target/cluster/logs), build logs, run records

    # The same job as AWX runs it: runner events and every artifact.
    ansible_runner = _runner()
    pdd = job_dir(tmp_path / "pdd", installed_collection, tmp_path / "ansible-local")
    runner_inv = cluster.write_inventory(pdd / "inventory" / "hosts.json", group, host_vars)
    _vaulted_vars(runner_inv.parent, vaulted)
    r = ansible_runner.run(private_data_dir=str(pdd), playbook="train.yml", quiet=True,
                           cmdline=f"--vault-password-file {password}")
    stdout = r.stdout.read()
    print(f"status={r.status} rc={r.rc}\n{stdout}")
    assert r.status == "successful"
    assert any(e.get("event") == "runner_on_ok" for e in r.events)
    assert _leaks(json.dumps(list(r.events), default=str)) == []
    assert _leaks(stdout) == []
    assert _files_with_secret(pdd / "artifacts") == []
    assert _files_with_secret(project) == []
    _launcher_got_it(record)
