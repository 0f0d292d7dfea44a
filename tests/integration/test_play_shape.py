"""Issue 8's acceptance on namespace hosts: every worker is an Ansible host.

What an operator (or AWX, through ansible-runner's events) sees per worker:
its own result in the PLAY RECAP and in the runner events; ``--limit`` on a
gang playbook refused before any ssh connection (read from each host's sshd
log), honoured by preflight; Ansible's own connection settings (``-u``,
``ansible_ssh_user``, ``ansible_private_key_file``, ``--private-key``,
``-J`` in ``ansible_ssh_common_args``) used by the probe and carried into the
topology flodl's launcher reads; ``-F`` refused before contact.

ansible-runner is not installed in the test venvs, so its job events are
observed the way it observes them: through a callback plugin (written here)
that records ``v2_runner_on_ok/failed/unreachable/skipped`` per host and task.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO_ROOT, Collection, ansible_bin, run_ansible
from netns_cluster import Cluster, HostSpec
from play_output import failed_in_recap, recap, results, skipped_with_reason, task_results

DEMO = REPO_ROOT / "examples" / "demo"
PREFLIGHT_RESULT = "Preflight | Result of this worker"

EVENTS_CALLBACK = textwrap.dedent(
    '''\
    """Records runner events per host, as ansible-runner's job events carry them."""
    import json
    import os

    from ansible.plugins.callback import CallbackBase


    class CallbackModule(CallbackBase):
        CALLBACK_VERSION = 2.0
        CALLBACK_TYPE = "aggregate"
        CALLBACK_NAME = "flodl_test_events"
        CALLBACK_NEEDS_ENABLED = True

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.events = []

        def _record(self, event, result):
            host = getattr(result, "host", None) or result._host
            task = getattr(result, "task", None) or result._task
            data = getattr(result, "result", None)
            data = data if isinstance(data, dict) else result._result
            self.events.append({"event": event, "host": host.get_name(), "task": task.get_name(),
                                "run_model_use": data.get("run_model_use")})

        def v2_runner_on_ok(self, result, **kwargs):
            self._record("runner_on_ok", result)

        def v2_runner_on_failed(self, result, ignore_errors=False, **kwargs):
            self._record("runner_on_failed", result)

        def v2_runner_on_unreachable(self, result, **kwargs):
            self._record("runner_on_unreachable", result)

        def v2_runner_on_skipped(self, result, **kwargs):
            self._record("runner_on_skipped", result)

        def v2_playbook_on_stats(self, stats):
            summary = {h: stats.summarize(h) for h in sorted(stats.processed)}
            with open(os.environ["FLODL_TEST_EVENTS"], "w") as fh:
                json.dump({"events": self.events, "stats": summary}, fh)
    '''
)


# --------------------------------------------------------------------------- helpers


def _layout(shared: Path, *extra: str) -> dict[str, Path]:
    """The demo project (with its libtorch variant dirs) and a data dir on the shared filesystem."""
    proj = shared / "proj"
    shutil.copytree(DEMO, proj, ignore=shutil.ignore_patterns("target"))
    paths = {"proj": proj, "data": shared / "data"}
    for name in extra:
        paths[name] = shared / name
    for p in paths.values():
        p.mkdir(exist_ok=True)
        os.chmod(p, 0o755)
    return paths


def _vars(cluster: Cluster, paths: dict[str, Path]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    group = {
        "flodl_controller_host": cluster.controller_ip,
        "flodl_controller_path": str(paths["proj"]),
        "flodl_controller_data_path": str(paths["data"]),
        "flodl_cmd": "train",
        "flodl_launch_command": "python3 standin_launcher.py --epochs 1",
    }
    hosts = {
        h.name: {
            "flodl_path": str(paths["proj"]),
            "flodl_data_path": str(paths["data"]),
            "flodl_local_devices": [0],
            "flodl_nccl_socket_ifname": "eth0",
            "flodl_arch": "precompiled/cpu",
        }
        for h in cluster
    }
    return group, hosts


def _play(collection: Collection, inventory: Path, playbook: str, *extra: str,
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_ansible(collection, ["ansible-playbook", "-i", str(inventory), f"flodl.cluster.{playbook}", *extra],
                       env=env)


def _accepted(cluster: Cluster) -> dict[str, int]:
    """Logins per host so far, from each host's sshd log."""
    return {h.name: h.log().count("Accepted publickey for ") for h in cluster}


def _connections(cluster: Cluster) -> dict[str, int]:
    return {h.name: h.connections() for h in cluster}


def _topology(stdout: str) -> dict[str, Any]:
    """The decoded topology the launch plan prints (check mode)."""
    lines = stdout.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("  topology (FLODL_INTERNAL_FULL_CLUSTER_JSON"))
    body = []
    for ln in lines[start + 1:]:
        if not ln.startswith("    "):
            break
        body.append(ln[4:])
    return json.loads("\n".join(body))


def _ssh_of(topology: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {w["host"]: w.get("ssh", {}) for w in topology["workers"]}


def _without(hostvars: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in hostvars.items() if k not in names}


# --------------------------------------------------------------------------- per-worker results


def test_cluster_train_one_worker_failing_preflight_fails_alone(
    installed_collection, netns_cluster_factory: Callable[..., Cluster], netns_shared_dir, tmp_path
):
    paths = _layout(netns_shared_dir, "h2data")
    cluster = netns_cluster_factory(
        [HostSpec("h1"), HostSpec("h2", missing_paths=[str(paths["h2data"])]), HostSpec("h3")],
        shared_root=netns_shared_dir,
    )
    group, hosts = _vars(cluster, paths)
    hosts["h2"]["flodl_data_path"] = str(paths["h2data"])
    inv = cluster.write_inventory(tmp_path / "inv.json", group, hosts)
    plugins = tmp_path / "callbacks"
    plugins.mkdir()
    (plugins / "flodl_test_events.py").write_text(EVENTS_CALLBACK)
    events_file = tmp_path / "events.json"
    proc = _play(installed_collection, inv, "cluster_train", env={
        "ANSIBLE_CALLBACK_PLUGINS": str(plugins),
        "ANSIBLE_CALLBACKS_ENABLED": "flodl_test_events",
        "FLODL_TEST_EVENTS": str(events_file),
    })
    assert proc.returncode != 0

    # The operator's view: h2 fails with its own message, h1 and h3 are ok.
    fails = results(proc.stdout)
    assert sorted(fails) == ["h2"], fails
    assert fails["h2"]["msg"].startswith("h2: the declared data path ") and str(paths["h2data"]) in fails["h2"]["msg"]
    assert task_results(proc.stdout, PREFLIGHT_RESULT) == {"h1": "ok", "h2": "fatal", "h3": "ok"}
    counts = recap(proc.stdout)
    assert sorted(counts) == ["h1", "h2", "h3"], counts
    assert failed_in_recap(proc.stdout) == ["h2"]
    assert counts["h1"]["failed"] == 0 and counts["h3"]["failed"] == 0 and counts["h3"]["ok"] >= 1

    # No build started.
    assert "Prebuild | Build on the build host" not in proc.stdout
    assert "flodl launch plan" not in proc.stdout
    # No target dir of any host: at most the run lock the first step took, which its holder removes as the run ends.
    deadline = time.monotonic() + 10
    while (paths["proj"] / "target/cluster/run.lock").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sorted(p.name for p in paths["proj"].glob("target/cluster/*")) == []
    assert (paths["proj"] / "target/cluster").is_dir()

    # ansible-runner's view: the same, per worker by name.
    recorded = json.loads(events_file.read_text())
    per_worker = {e["host"]: e["event"] for e in recorded["events"] if e["task"].endswith(PREFLIGHT_RESULT)}
    assert per_worker == {"h1": "runner_on_ok", "h2": "runner_on_failed", "h3": "runner_on_ok"}, recorded
    assert not any("Prebuild" in e["task"] or "Launch" in e["task"] for e in recorded["events"]), recorded
    stats = recorded["stats"]
    assert sorted(stats) == ["h1", "h2", "h3"]
    assert stats["h2"]["failures"] == 1 and stats["h1"]["failures"] == 0 and stats["h3"]["failures"] == 0


def test_a_run_refused_as_a_whole_fails_every_worker_in_the_recap(
    installed_collection, cluster3, netns_shared_dir, tmp_path
):
    """A problem of the run itself fails each worker's own report: PLAY RECAP lists every worker, failed, not
    only the one the run-once step ran on (cluster_train: no flodl_controller_path; the launch playbook: a
    reserved cluster variable, refused by its validation step and carried on by the launch's steps)."""
    cluster = cluster3
    paths = _layout(netns_shared_dir)
    group, hosts = _vars(cluster, paths)
    cases = [("cluster_train", PREFLIGHT_RESULT, _without(group, "flodl_controller_path"), "flodl_controller_path"),
             ("launch", "Launch | Result of this worker", dict(group, flodl_cluster_env={"CUDA_VISIBLE_DEVICES": "0"}),
              'key "CUDA_VISIBLE_DEVICES" is reserved')]
    for playbook, report, variables, expect in cases:
        inv = cluster.write_inventory(tmp_path / f"inv-{playbook}.json", variables, hosts)
        proc = _play(installed_collection, inv, playbook)
        assert proc.returncode != 0, proc.stdout
        assert failed_in_recap(proc.stdout) == ["h1", "h2", "h3"], (playbook, proc.stdout[-3000:])
        assert task_results(proc.stdout, report) == {"h1": "fatal", "h2": "fatal", "h3": "fatal"}
        fails = results(proc.stdout)
        assert sorted(fails) == ["h1", "h2", "h3"], fails
        for found in fails.values():
            assert expect in found["msg"] and "no host was contacted" in found["msg"], found["msg"]
        assert "flodl launch: running" not in proc.stdout
    assert _connections(cluster) == {"h1": 0, "h2": 0, "h3": 0}


# --------------------------------------------------------------------------- --limit


def test_limit_refused_by_cluster_train_before_any_ssh_and_honoured_by_preflight(
    installed_collection, cluster3, netns_shared_dir, tmp_path
):
    cluster = cluster3
    paths = _layout(netns_shared_dir)
    group, hosts = _vars(cluster, paths)
    inv = cluster.write_inventory(tmp_path / "inv.json", group, hosts)

    proc = _play(installed_collection, inv, "cluster_train", "--limit", "h1")
    assert proc.returncode != 0
    fails = results(proc.stdout)
    assert len(fails) == 1, fails
    msg = str(next(iter(fails.values()))["msg"])
    assert "this play runs on 1 of 3 workers; missing h2, h3" in msg, msg
    assert "--limit" in msg
    assert _connections(cluster) == {"h1": 0, "h2": 0, "h3": 0}
    assert "flodl preflight" not in proc.stdout

    proc = _play(installed_collection, inv, "preflight", "--limit", "h1")
    assert proc.returncode == 0, proc.stdout
    assert "flodl preflight (1 worker(s) of the play" in proc.stdout
    assert task_results(proc.stdout, PREFLIGHT_RESULT) == {"h1": "ok"}
    assert sorted(recap(proc.stdout)) == ["h1"]
    assert _connections(cluster) == {"h1": 1, "h2": 0, "h3": 0}
    assert _accepted(cluster) == {"h1": 1, "h2": 0, "h3": 0}


# --------------------------------------------------------------------------- Ansible's connection settings


def test_user_and_key_from_ansible_settings_reach_probe_and_topology(
    installed_collection, netns_cluster_factory: Callable[..., Cluster], netns_shared_dir, tmp_path
):
    """h1: ansible_ssh_user + ansible_private_key_file; h2, h3: only ``-u`` and ``--private-key``.

    The hosts let ``flodltest`` and root log in with the key; the controller runs as root, so a login
    as ``flodltest`` proves the setting was used, and without the key no login works at all.
    """
    paths = _layout(netns_shared_dir)
    cluster = netns_cluster_factory(["h1", "h2", "h3"], user="flodltest", shared_root=netns_shared_dir)
    group, hosts = _vars(cluster, paths)
    data = cluster.inventory(group, hosts)
    workers = data["all"]["children"]["flodl_workers"]["hosts"]
    for name in workers:
        workers[name] = _without(workers[name], "ansible_user", "ansible_ssh_private_key_file")
    workers["h1"].update(ansible_ssh_user="flodltest", ansible_private_key_file=str(cluster.key_path))
    inv = tmp_path / "inv.json"
    inv.write_text(json.dumps(data, indent=2))

    plugins = tmp_path / "callbacks"
    plugins.mkdir()
    (plugins / "flodl_test_events.py").write_text(EVENTS_CALLBACK)
    events_file = tmp_path / "events.json"
    proc = _play(installed_collection, inv, "cluster_train", "--check",
                 "-u", "flodltest", "--private-key", str(cluster.key_path), env={
                     "ANSIBLE_CALLBACK_PLUGINS": str(plugins), "ANSIBLE_CALLBACKS_ENABLED": "flodl_test_events",
                     "FLODL_TEST_EVENTS": str(events_file)})
    assert proc.returncode == 0, proc.stdout
    # One run model: the preflight step validated the run and resolved each worker's connection once; the
    # prebuild and launch steps took its model as it is.
    used = {e["task"].split(" : ")[-1]: e["run_model_use"] for e in json.loads(events_file.read_text())["events"]
            if e["run_model_use"]}
    assert used["Preflight | Probe every worker in one parallel round trip"] == {
        "source": "built", "validations": 1, "connections_resolved": 3}, used
    assert used["Prebuild | Build on the build host (docker compose or cargo)"]["source"] == "flodl_preflight_run", used
    assert used["Launch | Prepare the launcher environment"]["source"] == "flodl_preflight_run", used
    assert sum(u["validations"] for u in used.values()) == 1 and len(used) == 3, used
    assert sum(u["connections_resolved"] for u in used.values()) == 3, used
    assert task_results(proc.stdout, PREFLIGHT_RESULT) == {"h1": "ok", "h2": "ok", "h3": "ok"}
    # The probe logged in as flodltest, once per host.
    for h in cluster:
        assert h.log().count("Accepted publickey for flodltest ") == 1, h.log()
        assert "Accepted publickey for root " not in h.log()
    # The launcher's topology carries the same user and key.
    ssh = _ssh_of(_topology(proc.stdout))
    for h in cluster:
        assert ssh[h.name]["target"] == h.ip
        assert ssh[h.name]["user"] == "flodltest", ssh[h.name]
        assert ssh[h.name]["identity_file"] == str(cluster.key_path), ssh[h.name]


def test_jump_host_from_ssh_common_args(
    installed_collection, netns_cluster_factory: Callable[..., Cluster], netns_shared_dir, tmp_path
):
    """h2 is reached with ``-J root@<h1>``: its sshd sees the connection come from h1, h1 logs the hop.

    ssh runs the jump leg as a separate ``ssh -W``, which reads only ssh_config: its key comes from a private
    ~/.ssh/config, mounted for this ansible-playbook only. Its host-key settings are the worker's own ``-o``
    options (the harness's UserKnownHostsFile and StrictHostKeyChecking), which the collection passes on to
    the leg (issue 38: without them the leg failed with only ``Connection closed by UNKNOWN port 65535``).
    """
    paths = _layout(netns_shared_dir)
    cluster = netns_cluster_factory(["h1", "h2"], shared_root=netns_shared_dir)
    group, hosts = _vars(cluster, paths)
    jump = f"root@{cluster['h1'].ip}"
    hosts["h2"]["ansible_ssh_common_args"] = cluster.hostvars("h2")["ansible_ssh_common_args"] + f" -J {jump}"
    inv = cluster.write_inventory(tmp_path / "inv.json", group, hosts)

    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host {cluster['h1'].ip}\n  IdentityFile {cluster.key_path}\n  IdentitiesOnly yes\n  BatchMode yes\n"
    )
    scratch = tmp_path / "root-overlay"
    scratch.mkdir()
    # In a private mount namespace: /root as it is, plus .ssh/config (an overlay on a tmpfs); nothing
    # outside this ansible-playbook sees it.
    script = (
        'set -e; mount -t tmpfs tmpfs "$0"; mkdir -p "$0/upper/.ssh" "$0/work"; chmod 700 "$0/upper/.ssh"; '
        'cp "$1" "$0/upper/.ssh/config"; chmod 600 "$0/upper/.ssh/config"; '
        'mount -t overlay overlay -o "lowerdir=/root,upperdir=$0/upper,workdir=$0/work" /root; '
        'shift; exec "$@"'
    )
    argv = [ansible_bin("ansible-playbook"), "-i", str(inv), "flodl.cluster.cluster_train", "--check"]
    wrapped = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(scratch), str(config),
               *argv]
    proc = subprocess.run(wrapped, env=installed_collection.env(), capture_output=True, text=True,
                          timeout=600, check=False)
    print(f"$ {' '.join(wrapped)}\n--- rc={proc.returncode}\n{proc.stdout}\n--- stderr\n{proc.stderr}")
    assert proc.returncode == 0, proc.stdout
    assert task_results(proc.stdout, PREFLIGHT_RESULT) == {"h1": "ok", "h2": "ok"}

    h1_log, h2_log = cluster["h1"].log(), cluster["h2"].log()
    # h1: its own probe plus the jump leg, both logins from the controller; only the probe runs a
    # command there, the jump leg is a forwarding-only login (sshd logs no session for it).
    assert h1_log.count(f"Accepted publickey for root from {cluster.controller_ip} ") == 2, h1_log
    assert h1_log.count("Starting session: command for root") == 1, h1_log
    # h2: reached once, from h1's address (through the jump), never straight from the controller.
    assert h2_log.count(f"Connection from {cluster['h1'].ip} ") == 1, h2_log
    assert f"Connection from {cluster.controller_ip} " not in h2_log, h2_log

    ssh = _ssh_of(_topology(proc.stdout))
    # The launcher's ssh takes the same leg: the jump as the ProxyCommand ssh runs for it, with the options.
    leg = (f"ProxyCommand=ssh -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -l root "
           f"-W '[%h]:%p' -- {cluster['h1'].ip}")
    assert leg in ssh["h2"]["options"], ssh["h2"]
    assert not any(o.startswith(("ProxyJump=", "ProxyCommand=")) for o in ssh["h1"].get("options", [])), ssh["h1"]


@pytest.mark.parametrize("playbook", ["preflight", "cluster_train"])
def test_ssh_config_file_is_refused_before_contact(installed_collection, cluster3, netns_shared_dir, tmp_path,
                                                   playbook):
    cluster = cluster3
    paths = _layout(netns_shared_dir)
    group, hosts = _vars(cluster, paths)
    cfg = tmp_path / "cfg"
    cfg.write_text("Host *\n  User root\n")
    hosts["h2"]["ansible_ssh_extra_args"] = f"-F {cfg}"
    inv = cluster.write_inventory(tmp_path / "inv.json", group, hosts)
    proc = _play(installed_collection, inv, playbook)
    assert proc.returncode != 0
    fails = results(proc.stdout)
    # The refusal is h2's own result; h1 and h3 were not contacted and say why.
    assert sorted(fails) == ["h2"], fails
    msg = str(fails["h2"]["msg"])
    assert "host h2: ansible_ssh_extra_args: -F is not supported" in msg, msg
    assert "no host was contacted" in msg, msg
    assert "h1:" not in msg and "h3:" not in msg
    assert task_results(proc.stdout, PREFLIGHT_RESULT) == {"h1": "skipping", "h2": "fatal", "h3": "skipping"}
    assert failed_in_recap(proc.stdout) == ["h2"]
    assert _connections(cluster) == {"h1": 0, "h2": 0, "h3": 0}


def test_unreachable_worker_only_warns_and_the_run_goes_on(
    installed_collection, netns_cluster_factory: Callable[..., Cluster], netns_shared_dir, tmp_path
):
    """docs/architecture.md: an unreachable probe skips the worker with its reason, and the run goes on."""
    paths = _layout(netns_shared_dir)
    cluster = netns_cluster_factory([HostSpec("h1"), HostSpec("h2"), HostSpec("h3", unreachable=True)],
                                    shared_root=netns_shared_dir)
    group, hosts = _vars(cluster, paths)
    inv = cluster.write_inventory(tmp_path / "inv.json", group, hosts)
    proc = _play(installed_collection, inv, "cluster_train", "--check")

    assert results(proc.stdout, "UNREACHABLE") == {}
    unreachable = skipped_with_reason(proc.stdout)
    assert sorted(unreachable) == ["h3"], unreachable
    assert "its checks were skipped: h3: preflight probe could not run" in unreachable["h3"]["msg"]
    assert results(proc.stdout) == {}
    counts = recap(proc.stdout)
    assert failed_in_recap(proc.stdout) == []
    assert counts["h3"]["unreachable"] == 0 and counts["h3"]["skipped"] >= 1, counts
    # The run went on: prebuild planned every worker's build, the launch plan was printed, and each worker
    # reported its build with its launch (no separate prebuild report in cluster_train), rc 0.
    assert "Prebuild | Build on the build host" in proc.stdout, proc.stdout
    assert "flodl launch plan (check mode" in proc.stdout
    assert "Prebuild | Result of this worker" not in proc.stdout
    assert sorted(task_results(proc.stdout, "Launch | Result of this worker")) == ["h1", "h2", "h3"]
    assert proc.returncode == 0


def test_probes_queued_behind_the_cap_each_get_their_whole_timeout(
    installed_collection, netns_cluster_factory: Callable[..., Cluster], netns_shared_dir, tmp_path
):
    """One probe at a time through 16 answering workers, 3 s each: every worker is checked. Under one 3 s deadline
    for the whole sweep (before), the workers queued last ran out of it and were reported unreachable."""
    paths = _layout(netns_shared_dir)
    cluster = netns_cluster_factory([HostSpec(f"h{i + 1}") for i in range(16)], shared_root=netns_shared_dir)
    group, hosts = _vars(cluster, paths)
    inv = cluster.write_inventory(tmp_path / "inv.json",
                                  dict(group, flodl_preflight_max_parallel=1, flodl_preflight_timeout=3), hosts)
    start = time.monotonic()
    proc = _play(installed_collection, inv, "preflight")
    seconds = time.monotonic() - start
    assert proc.returncode == 0, proc.stdout
    assert skipped_with_reason(proc.stdout) == {}, seconds
    assert "no answer within" not in proc.stdout and "not reached" not in proc.stdout
    assert set(task_results(proc.stdout, PREFLIGHT_RESULT).values()) == {"ok"}
    assert _accepted(cluster) == {f"h{i + 1}": 1 for i in range(16)}
    assert seconds < 16 * 3 + 3 + 30, seconds  # the rounds, one more, and Ansible's own start and reports


def test_a_runbook_play_on_the_controller_fails_when_a_worker_fails(
    installed_collection, netns_cluster_factory: Callable[..., Cluster], netns_shared_dir, tmp_path
):
    """The preflight role in an operator's own play on localhost speaks for the whole run."""
    paths = _layout(netns_shared_dir, "h2data")
    cluster = netns_cluster_factory([HostSpec("h1"), HostSpec("h2", missing_paths=[str(paths["h2data"])])],
                                    shared_root=netns_shared_dir)
    group, hosts = _vars(cluster, paths)
    hosts["h2"]["flodl_data_path"] = str(paths["h2data"])
    playbook = tmp_path / "runbook.yml"
    playbook.write_text(textwrap.dedent("""\
        - name: Runbook preflight from the controller
          hosts: localhost
          gather_facts: false
          tasks:
            - name: Preflight every worker
              ansible.builtin.import_role:
                name: flodl.cluster.preflight
                rolespec_validate: false
        """))
    inv = cluster.write_inventory(tmp_path / "inv.json", group, hosts)
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), str(playbook)])
    assert proc.returncode != 0, proc.stdout
    fails = results(proc.stdout)
    assert sorted(fails) == ["localhost"], fails
    lines = fails["localhost"]["msg"].splitlines()
    assert lines[0] == "preflight for 2 worker(s), reported on localhost: 1 ok, 1 failed", lines
    assert lines[1].startswith("h2: the declared data path ") and str(paths["h2data"]) in lines[1]
    assert failed_in_recap(proc.stdout) == ["localhost"]
    assert _accepted(cluster) == {"h1": 1, "h2": 1}

    hosts["h2"]["flodl_data_path"] = str(paths["data"])
    inv = cluster.write_inventory(tmp_path / "inv.json", group, hosts)
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), str(playbook)])
    assert proc.returncode == 0, proc.stdout
    assert task_results(proc.stdout, PREFLIGHT_RESULT) == {"localhost": "ok"}
    assert failed_in_recap(proc.stdout) == []

    # Refused on a worker's variables: the verdict counts the workers, and names the one at fault.
    hosts["h2"]["flodl_local_devices"] = "half"
    inv = cluster.write_inventory(tmp_path / "inv.json", group, hosts)
    before = _accepted(cluster)
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), str(playbook)])
    assert proc.returncode != 0, proc.stdout
    lines = results(proc.stdout)["localhost"]["msg"].splitlines()
    assert lines[0] == "preflight for 2 worker(s), reported on localhost: 1 failed, 1 skipped", lines
    assert lines[1].startswith("h2: refused before contact (no host was contacted): ") and "flodl_local_devices" in lines[1]
    assert len(lines) == 2 and _accepted(cluster) == before


def test_a_first_worker_on_the_local_connection_does_not_decide_how_the_others_are_reached(
    installed_collection, cluster3, netns_shared_dir, tmp_path
):
    """The controller's own box listed first with ``ansible_connection: local``: the others are still ssh.

    ansible-core 2.21 records the first play host's connection plugin on the run-once task; read as the
    play's keyword, it made every other worker "local" and refused them.
    """
    paths = _layout(netns_shared_dir)
    group, hosts = _vars(cluster3, paths)
    hosts["h1"]["ansible_connection"] = "local"
    inv = cluster3.write_inventory(tmp_path / "inv.json", group, hosts)
    proc = _play(installed_collection, inv, "preflight", env={"FLODL_HOST_NAME": "h1"})
    assert proc.returncode == 0, proc.stdout
    assert task_results(proc.stdout, PREFLIGHT_RESULT) == {"h1": "ok", "h2": "ok", "h3": "ok"}
    assert "h1: ok — the controller's own box, no ssh" in proc.stdout
    assert _accepted(cluster3) == {"h1": 0, "h2": 1, "h3": 1}


def test_cluster_train_with_an_empty_worker_group_fails_naming_the_source(installed_collection, tmp_path):
    """No host in flodl_workers (an empty sync, an fdl_cluster source that was refused) is a failed run, not
    `skipping: no hosts matched` with rc 0. No cluster: there is no host to contact."""
    hosts = tmp_path / "hosts.ini"
    hosts.write_text("[flodl_workers]\n", encoding="utf-8")
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "fdl.yml").write_text("cluster: [broken\n", encoding="utf-8")
    source = tmp_path / "lab.fdl_cluster.yml"
    source.write_text("plugin: flodl.cluster.fdl_cluster\nproject_dir: proj\n", encoding="utf-8")
    proc = run_ansible(installed_collection, ["ansible-playbook", "flodl.cluster.cluster_train",
                                              "-i", str(hosts), "-i", str(source)], cwd=tmp_path, timeout=120)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "skipping: no hosts matched" not in out
    assert "group flodl_workers is empty or missing, so there is no worker to prebuild and launch for" in out
    assert f"the flodl.cluster.fdl_cluster source {source}" in out and "'Unable to parse' warning" in out
    assert failed_in_recap(proc.stdout) == ["localhost"]
