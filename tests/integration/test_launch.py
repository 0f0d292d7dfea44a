"""Launch phase, cluster_train and teardown on real namespace hosts (issue 5).

Every test installs the collection from its tarball and runs real
``ansible-playbook``; hosts are network namespaces with their own sshd
(tests/harness/netns_cluster.py), sharing this machine's filesystem except
/tmp and /root. flodl's real launcher needs libtorch and GPUs, so the launch
command is either a recorder script or the stand-in launcher shipped with
the demo (examples/demo/standin_launcher.py).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO_ROOT, ansible_bin, need, run_ansible
from play_output import failed_in_recap, recap, results, task_results
from streamed_play import as_terminal_job

DEMO = REPO_ROOT / "examples" / "demo"
PLAYBOOKS = "flodl.cluster"

RECORDER = textwrap.dedent(
    """\
    import json, os, sys
    with open(sys.argv[1], "w") as fh:
        json.dump({"env": dict(os.environ), "cwd": os.getcwd(), "argv": sys.argv[2:]}, fh)
    print("recorded")
    """
)


def copy_project(dest: Path) -> Path:
    need(shutil.which("cargo") is not None, "cargo is needed to build the demo project")
    shutil.copytree(DEMO, dest, ignore=shutil.ignore_patterns("target"))
    os.chmod(dest, 0o755)
    (dest / "record_env.py").write_text(RECORDER)
    return dest


def project_vars(project: Path, cluster, **extra) -> dict:
    out = {
        "flodl_controller_host": cluster.controller_ip,
        "flodl_controller_path": str(project),
        "flodl_cmd": "train",
        "flodl_launch_command": "python3 standin_launcher.py --epochs 3",
        "flodl_cluster_env": {"FLODL_DEMO_STEPS": "3", "FLODL_DEMO_STEP_MS": "50"},
    }
    out.update(extra)
    return out


def worker_vars(project: Path, arch: dict[str, str], devices: dict[str, list[int] | str]) -> dict:
    return {
        h: {"flodl_path": str(project), "flodl_arch": arch[h], "flodl_local_devices": devices[h],
            "flodl_nccl_socket_ifname": "eth0"}
        for h in arch
    }


TWO_VARIANTS = {"h1": "precompiled/cu128", "h2": "precompiled/cu128", "h3": "precompiled/rocm63"}


def rank_processes(marker: str) -> list[tuple[int, str]]:
    """Processes anywhere on the machine (host namespaces included) whose argv[0] contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        argv0 = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
        if marker in argv0:
            found.append((int(entry), raw.replace(b"\0", b" ").decode("utf-8", "replace")))
    return found


# --------------------------------------------------------------------------- the §1a environment


EXPECTED_TEMPLATE = """{
  "controller": {
    "host": "@CTL@",
    "port": 1337,
    "path": "@ROOT@"
  },
  "workers": [
    {
      "host": "h1",
      "ranks": [
        0,
        1
      ],
      "local_devices": [
        0,
        1
      ],
      "nccl_socket_ifname": "eth0",
      "path": "@ROOT@",
      "ssh": {
        "target": "@IP1@",
        "user": "root",
        "identity_file": "@KEY@",
        "options": [
          "UserKnownHostsFile=/dev/null",
          "StrictHostKeyChecking=no",
          "LogLevel=ERROR",
          "ConnectTimeout=10",
          "IdentitiesOnly=yes",
          "ControlPath=@CP@/%C"
        ]
      },
      "arch": "precompiled/cu128",
      "env": {
        "A_FLAG": "1",
        "NCCL_DEBUG": "INFO"
      }
    },
    {
      "host": "h2",
      "ranks": [
        2,
        3
      ],
      "local_devices": "all",
      "nccl_socket_ifname": "eth0",
      "path": "@ROOT@",
      "ssh": {
        "target": "@IP2@",
        "port": 22,
        "user": "root",
        "identity_file": "@ROOT@/keys/id_h2",
        "options": [
          "UserKnownHostsFile=/dev/null",
          "StrictHostKeyChecking=no",
          "LogLevel=ERROR",
          "ConnectTimeout=10",
          "IdentitiesOnly=yes",
          "ControlPath=@CP@/%C"
        ]
      },
      "arch": "precompiled/cu128",
      "data_path": "/var/tmp"
    },
    {
      "host": "h3",
      "ranks": [
        4
      ],
      "local_devices": [
        5
      ],
      "nccl_socket_ifname": "eth0",
      "path": "@ROOT@",
      "ssh": {
        "target": "@IP3@",
        "user": "root",
        "identity_file": "@KEY@",
        "options": [
          "UserKnownHostsFile=/dev/null",
          "StrictHostKeyChecking=no",
          "LogLevel=ERROR",
          "ConnectTimeout=10",
          "IdentitiesOnly=yes",
          "ControlPath=@CP@/%C"
        ]
      },
      "arch": "precompiled/rocm63",
      "gpu_ram_share": 0.5
    }
  ],
  "env": {
    "FLODL_DEMO_STEPS": "2",
    "NCCL_SOCKET_NTHREADS": "4"
  }
}"""


def test_launch_env_exact_bytes(installed_collection, cluster3, netns_shared_dir, tmp_path):
    cluster = cluster3
    project = copy_project(netns_shared_dir / "proj")
    (project / "keys").mkdir()
    shutil.copy(cluster.key_path, project / "keys" / "id_h2")
    os.chmod(project / "keys" / "id_h2", 0o600)
    # h2 has two "NVIDIA GPUs": a fake nvidia-smi in its private /root, on PATH for ssh commands.
    fake = cluster.ssh(
        "h2",
        "mkdir -p /root/bin && printf '#!/bin/sh\\necho 0\\necho 1\\n' > /root/bin/nvidia-smi && "
        "chmod +x /root/bin/nvidia-smi && echo 'export PATH=/root/bin:$PATH' > /root/.bashrc",
    )
    assert fake.returncode == 0, fake.stderr
    envelope = {
        "h1": {"bin": "target/cluster/h1/precompiled-cu128/release/train", "ld_library_path": "/x/lib"},
        "h3": {"bin": "target/cluster/h3/precompiled-rocm63/release/train", "ld_library_path": "/opt/rocm/lib:/y"},
    }
    (project / "target" / "cluster").mkdir(parents=True)
    (project / "target" / "cluster" / "prebuild-envelope.json").write_text(json.dumps(envelope, indent=1))
    out = tmp_path / "recorded.json"
    host_vars = worker_vars(project, TWO_VARIANTS, {"h1": [0, 1], "h2": "all", "h3": [5]})
    host_vars["h1"]["flodl_env"] = {"NCCL_DEBUG": "INFO", "A_FLAG": "1"}
    host_vars["h2"]["flodl_ssh"] = {"identity_file": "keys/id_h2", "port": 22}
    host_vars["h2"]["flodl_data_path"] = "/var/tmp"
    host_vars["h3"]["flodl_gpu_ram_share"] = 0.5
    inv = cluster.write_inventory(
        tmp_path / "inv.json",
        project_vars(
            project, cluster,
            flodl_launch_command=f"python3 record_env.py {out} a 'b c'",
            flodl_fdl_env="cluster",
            flodl_net_timeout_scale="2.5",
            flodl_cluster_env={"NCCL_SOCKET_NTHREADS": "4", "FLODL_DEMO_STEPS": "2"},
        ),
        host_vars,
    )
    before = {h.name: h.connections() for h in cluster}
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.launch"],
                       env={"FLODL_TEST_CALLER_VAR": "kept"})
    assert proc.returncode == 0
    assert "recorded" in proc.stdout
    # one ssh sweep, only for the `all` worker
    assert {h.name: h.connections() - before[h.name] for h in cluster} == {"h1": 0, "h2": 1, "h3": 0}

    rec = json.loads(out.read_text())
    env = rec["env"]
    expected = (
        EXPECTED_TEMPLATE.replace("@CTL@", cluster.controller_ip)
        .replace("@ROOT@", str(project))
        .replace("@KEY@", str(cluster.key_path))
        .replace("@CP@", str(cluster.control_dir))
        .replace("@IP1@", cluster["h1"].ip)
        .replace("@IP2@", cluster["h2"].ip)
        .replace("@IP3@", cluster["h3"].ip)
    )
    assert bytes.fromhex(env["FLODL_INTERNAL_FULL_CLUSTER_JSON"]).decode() == expected
    assert env["FLODL_INTERNAL_FULL_CLUSTER_JSON"] == expected.encode().hex()  # lowercase, exact
    assert env["FLODL_INTERNAL_FDL_CMD"] == "train"
    assert env["FDL_ENV"] == "cluster"
    assert env["FLODL_INTERNAL_HOST_USER"] == "root"
    # h1..h3 are reached through their ansible_host IPs, but their own names do not resolve on the
    # controller; as in fdl-cli the ssh target is not consulted, so no pair and no variable.
    assert "FLODL_INTERNAL_CLUSTER_EXTRA_HOSTS" not in env
    assert env["FLODL_INTERNAL_PREBUILD_PER_HOST"] == json.dumps(envelope, separators=(",", ":"), sort_keys=True)
    assert env["FLODL_NET_TIMEOUT_SCALE"] == "2.5"
    assert "FLODL_TESTING_CLUSTER_JSON" not in env
    assert rec["cwd"] == str(project)
    assert rec["argv"] == ["a", "b c"]
    assert env["FLODL_TEST_CALLER_VAR"] == "kept"  # the caller's own environment is kept
    logs = list((project / "target" / "cluster" / "logs").glob("launch-*.log"))
    assert logs and "recorded" in logs[0].read_text()


# --------------------------------------------------------------------------- full cluster_train


def test_cluster_train_two_variants_then_a_failing_rank(installed_collection, cluster3, netns_shared_dir, tmp_path):
    cluster = cluster3
    project = copy_project(netns_shared_dir / "proj")
    host_vars = worker_vars(project, TWO_VARIANTS, {"h1": [0], "h2": [0, 1], "h3": [0]})
    inv = cluster.write_inventory(tmp_path / "inv.json", project_vars(project, cluster, flodl_fdl_env="cluster"),
                                  host_vars)
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train"])
    assert proc.returncode == 0
    out = proc.stdout
    for host, arch in TWO_VARIANTS.items():
        feature = "rocm" if "rocm" in arch else "cuda"
        assert f"[{host}] variant={arch}\n" in out
        assert f"[{host}] features={feature}\n" in out
        assert f"[{host}] host={host}\n" in out
        assert f"[{host}] cwd={project}\n" in out
        assert f"[{host}] args=--epochs 3\n" in out
        assert f"[{host}] step 3 loss" in out
        assert f"[standin-launcher] {host}: exited with status 0" in out
    assert f"[h3] ld_library_path=/opt/rocm/lib:{project}/libtorch/precompiled/rocm63/lib\n" in out
    assert f"[h1] ld_library_path={project}/libtorch/precompiled/cu128/lib\n" in out
    # the phases ran in order
    assert out.index("flodl preflight") < out.index("Prebuild | Build on the build host") < out.index("flodl launch plan")
    # every worker reports its preflight, then its build with its launch (one task for both)
    for task in ("Preflight | Result of this worker", "Launch | Result of this worker"):
        per_worker = task_results(out, task)
        assert sorted(per_worker) == ["h1", "h2", "h3"] and set(per_worker.values()) <= {"ok", "changed"}, (
            task, per_worker)
    assert "Prebuild | Result of this worker" not in out
    assert failed_in_recap(out) == [] and sorted(recap(out)) == ["h1", "h2", "h3"]

    inv = cluster.write_inventory(
        tmp_path / "inv-fail.json",
        project_vars(project, cluster, flodl_cluster_env={"FLODL_DEMO_FAIL_HOST": "h2:3", "FLODL_DEMO_STEP_MS": "50"}),
        host_vars,
    )
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train"])
    assert proc.returncode != 0
    assert "[h2] failing on purpose: host=h2 code=3" in proc.stdout
    assert "[standin-launcher] h2: exited with status 3" in proc.stdout
    # As flodl's launcher names a failing rank (h2's ranks are 1 and 2): h2 fails, and only h2.
    assert 'cluster launcher: host "h2" reports rank 1 exited with code 3' in proc.stdout
    assert "the launch command exited with code 3 (rc=3)" in proc.stdout + proc.stderr
    assert '"rc": 3' in proc.stdout
    assert failed_in_recap(proc.stdout) == ["h2"] and sorted(recap(proc.stdout)) == ["h1", "h2", "h3"], (
        proc.stdout[-3000:])
    assert task_results(proc.stdout, "Launch | Result of this worker") == {"h1": "ok", "h2": "fatal", "h3": "ok"}
    fails = results(proc.stdout)
    assert sorted(fails) == ["h2"] and "rank 1 exited with code 3" in fails["h2"]["msg"], fails
    assert fails["h2"]["launch"]["rank_exits"] == [{"host": "h2", "rank": 1, "code": 3}]
    # The launch step says how the launcher ended, and fails no one itself.
    assert task_results(proc.stdout, "Launch | Run the launch command") == {"h1": "changed"}
    assert "workers failed by this launch: h2" in proc.stdout

    # A failed build (h3's rocm variant no longer compiles) starts no launch and fails that worker, in the
    # report of its build and launch; the others built and report so.
    main_rs = project / "src" / "main.rs"
    main_rs.write_text(main_rs.read_text() + '\n#[cfg(feature = "rocm")]\ncompile_error!("rocm broken on purpose");\n')
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train"])
    assert proc.returncode != 0
    fails = results(proc.stdout)
    assert sorted(fails) == ["h3"] and "precompiled/rocm63" in fails["h3"]["msg"], fails
    reported = task_results(proc.stdout, "Launch | Result of this worker")
    assert reported.pop("h3") == "fatal" and sorted(reported) == ["h1", "h2"], reported
    assert set(reported.values()) <= {"ok", "changed"}, reported
    assert failed_in_recap(proc.stdout) == ["h3"]
    assert "flodl launch plan" not in proc.stdout and "[standin-launcher]" not in proc.stdout


def test_check_mode_prints_the_plan_and_runs_nothing(installed_collection, cluster3, netns_shared_dir, tmp_path):
    cluster = cluster3
    project = copy_project(netns_shared_dir / "proj")
    inv = cluster.write_inventory(
        tmp_path / "inv.json", project_vars(project, cluster),
        worker_vars(project, TWO_VARIANTS, {"h1": [0], "h2": [0], "h3": [0]}),
    )
    proc = run_ansible(installed_collection,
                       ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train", "--check"])
    assert proc.returncode == 0
    out = proc.stdout
    assert "flodl launch plan (check mode" in out
    assert "FLODL_INTERNAL_FULL_CLUSTER_JSON=7b0a2020" in out  # the full hex
    assert '"host": "h3",' in out  # decoded topology beside it
    assert "would run `python3 standin_launcher.py --epochs 3`" in out
    assert "[h1] variant=" not in out
    assert not (project / "target" / "cluster" / "logs").exists()
    assert not list(project.glob("target/cluster/h*/*/release/train"))

    # From a checkout: the playbook file itself, roles found through the installed collection.
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv),
                                              str(REPO_ROOT / "playbooks" / "cluster_train.yml"), "--check"])
    assert proc.returncode == 0
    assert "flodl launch plan (check mode" in proc.stdout

    # Survey answers as AWX sends them (text, blanks) and -vv, through the roles as well as the validation.
    blanks = ["-e", "flodl_build_host=", "-e", "flodl_launch_host=", "-e", "flodl_launch_grace_seconds=",
              "-e", "flodl_gpu_ram_share=0.5", "-vv"]
    proc = run_ansible(installed_collection,
                       ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train", "--check", *blanks])
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "FLODL_VERBOSITY=debug" in proc.stdout
    assert '"gpu_ram_share": 0.5' in proc.stdout


# --------------------------------------------------------------------------- validation before any host


# One case end to end (0 logins on every host); every refusal of this kind, by both playbooks' first steps, is
# a unit test (tests/unit/plugins/action/test_refusals_before_contact.py).
@pytest.mark.parametrize(
    ("extra", "worker_env", "env", "expect"),
    [
        ({"flodl_cluster_env": {"CUDA_VISIBLE_DEVICES": "0"}}, None, {}, 'key "CUDA_VISIBLE_DEVICES" is reserved'),
    ],
)
def test_invalid_runs_fail_before_any_host(installed_collection, cluster3, netns_shared_dir, tmp_path,
                                           extra, worker_env, env, expect):
    cluster = cluster3
    project = copy_project(netns_shared_dir / "proj")
    host_vars = worker_vars(project, TWO_VARIANTS, {"h1": [0], "h2": "all", "h3": [0]})
    if worker_env is not None:
        host_vars["h2"]["flodl_env"] = worker_env
    inv = cluster.write_inventory(tmp_path / "inv.json", project_vars(project, cluster, **extra), host_vars)
    for playbook in ("cluster_train", "launch"):
        proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.{playbook}"],
                           env=env)
        assert proc.returncode != 0
        assert expect in proc.stdout + proc.stderr
        assert "no host was contacted" in proc.stdout + proc.stderr
    assert [h.connections() for h in cluster] == [0, 0, 0]
    assert not (project / "target").exists()


def test_recursion_guard_runs_the_command_plainly(installed_collection, cluster3, netns_shared_dir, tmp_path):
    cluster = cluster3
    project = copy_project(netns_shared_dir / "proj")
    out = tmp_path / "recorded.json"
    inv = cluster.write_inventory(
        tmp_path / "inv.json",
        project_vars(project, cluster, flodl_launch_command=f"python3 record_env.py {out}"),
        worker_vars(project, TWO_VARIANTS, {"h1": "all", "h2": [0], "h3": [0]}),
    )
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.launch"],
                       env={"FLODL_INTERNAL_CLUSTER_JSON": "7b7d"})
    assert proc.returncode == 0
    assert "FLODL_INTERNAL_CLUSTER_JSON is already set" in proc.stdout + proc.stderr
    assert "runs plainly" in proc.stdout + proc.stderr
    env = json.loads(out.read_text())["env"]
    assert env["FLODL_INTERNAL_CLUSTER_JSON"] == "7b7d"
    for name in ("FLODL_INTERNAL_FULL_CLUSTER_JSON", "FLODL_INTERNAL_FDL_CMD", "FLODL_INTERNAL_PREBUILD_PER_HOST",
                 "FLODL_INTERNAL_CLUSTER_EXTRA_HOSTS", "FLODL_INTERNAL_HOST_USER"):
        assert name not in env
    assert [h.connections() for h in cluster] == [0, 0, 0]  # not even the GPU sweep for h1's `all`


# --------------------------------------------------------------------------- live output, interrupt, teardown


def _stream(proc: subprocess.Popen, lines: list[str], stamps: list[float]) -> None:
    assert proc.stdout is not None
    for line in iter(proc.stdout.readline, ""):
        lines.append(line)
        stamps.append(time.monotonic())


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_live_output_interrupt_and_teardown(installed_collection, cluster3, netns_shared_dir, tmp_path, sig):
    cluster = cluster3
    project = copy_project(netns_shared_dir / "proj")
    host_vars = worker_vars(project, TWO_VARIANTS, {"h1": [0], "h2": [0], "h3": [0]})
    inv = cluster.write_inventory(
        tmp_path / "inv.json",
        project_vars(project, cluster, flodl_cluster_env={"FLODL_DEMO_SLEEP_S": "300", "FLODL_DEMO_STEP_MS": "50"},
                     flodl_launch_grace_seconds=5),
        host_vars,
    )
    marker = f"{project}/target/cluster/"
    proc = subprocess.Popen(
        [ansible_bin("ansible-playbook"), "-i", str(inv), f"{PLAYBOOKS}.cluster_train"],
        env=installed_collection.env(PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=as_terminal_job,
    )
    lines: list[str] = []
    stamps: list[float] = []
    reader = threading.Thread(target=_stream, args=(proc, lines, stamps), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if sum("sleeping 300s" in ln for ln in list(lines)) == 3:
                break
            assert proc.poll() is None, "".join(lines)
            time.sleep(0.2)
        else:
            pytest.fail("ranks never reported sleeping:\n" + "".join(lines))
        # Live output: the ranks' lines are in ansible-playbook's stdout while the play still runs.
        assert proc.poll() is None
        assert any(ln.startswith("[h3] step 1 loss") for ln in lines)
        running = rank_processes(marker)
        assert len(running) == 3, running
        proc.send_signal(sig)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=5)
    out = "".join(lines)
    assert rc != 0, out
    assert "interrupted by SIG" in out or "User interrupted" in out or rc in (-sig, 128 + sig), out
    # The interrupt alone stops the command's process group; ssh hangs up and the remote trap stops the ranks.
    deadline = time.monotonic() + 15
    while rank_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    left_after_interrupt = rank_processes(marker)
    print("left after interrupt:", left_after_interrupt)

    # Teardown: idempotent, and afterwards no rank process is left on any host.
    td = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.teardown"])
    assert td.returncode == 0
    for host in ("h1", "h2", "h3"):
        assert f"  {host}: ok — nothing of " in td.stdout or f"  {host}: changed — stopped " in td.stdout
    assert left_after_interrupt == [] or "changed — stopped " in td.stdout
    # Every worker reports its own cleanup.
    per_worker = task_results(td.stdout, "Result of this worker")
    assert sorted(per_worker) == ["h1", "h2", "h3"] and set(per_worker.values()) <= {"ok", "changed"}, per_worker
    assert failed_in_recap(td.stdout) == []
    deadline = time.monotonic() + 5
    while rank_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert rank_processes(marker) == []


def test_teardown_stops_orphans_and_warns_without_pkill(installed_collection, netns_cluster_factory,
                                                        netns_shared_dir, tmp_path):
    from netns_cluster import HostSpec

    cluster = netns_cluster_factory([HostSpec("h1"), HostSpec("h2", no_pkill=True)])
    project = copy_project(netns_shared_dir / "proj")
    # A prebuilt binary per host, as prebuild leaves it.
    for host in ("h1", "h2"):
        tgt = project / "target" / "cluster" / host / "precompiled-cu128"
        build = subprocess.run(
            ["cargo", "build", "--release", "--features", "cuda", "--bin", "train"],
            cwd=project, env={**os.environ, "CARGO_TARGET_DIR": str(tgt),
                              "LIBTORCH_PATH": str(project / "libtorch/precompiled/cu128")},
            capture_output=True, text=True, check=False,
        )
        assert build.returncode == 0, build.stderr
    inv = cluster.write_inventory(
        tmp_path / "inv.json", project_vars(project, cluster),
        worker_vars(project, {"h1": "precompiled/cu128", "h2": "precompiled/cu128"}, {"h1": [0], "h2": [0]}),
    )
    abs_bin = project / "target/cluster/h1/precompiled-cu128/release/train"
    started = cluster.ssh("h1", f"FLODL_DEMO_SLEEP_S=300 nohup {abs_bin} >/dev/null 2>&1 &")
    assert started.returncode == 0
    deadline = time.monotonic() + 10
    while not rank_processes(str(abs_bin)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(rank_processes(str(abs_bin))) == 1

    first = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.teardown"])
    assert first.returncode == 0
    assert f"  h1: changed — stopped 1 process(es) of {abs_bin}\n" in first.stdout
    # h1 changed, h2 ok with a warning (no pkill there): neither fails.
    assert task_results(first.stdout, "Result of this worker") == {"h1": "changed", "h2": "ok"}
    assert failed_in_recap(first.stdout) == [] and recap(first.stdout)["h2"]["changed"] == 0
    assert "[WARNING]: host h2: pkill is not installed" in first.stdout + first.stderr
    assert "  h2: ok — host h2: pkill is not installed" in first.stdout
    assert rank_processes(str(abs_bin)) == []
    second = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.teardown"])
    assert second.returncode == 0
    assert all(c["changed"] == 0 for c in recap(second.stdout).values()), recap(second.stdout)
    assert task_results(second.stdout, "Result of this worker") == {"h1": "ok", "h2": "ok"}
    assert f"  h1: ok — nothing of {abs_bin} was running" in second.stdout


# --------------------------------------------------------------------------- compose overlay


def test_compose_overlay_is_accepted_by_docker_compose(tmp_path):
    need(shutil.which("docker") is not None, "docker CLI (compose v2) not installed")
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, check=False)
    need(probe.returncode == 0, "docker compose v2 plugin not installed")
    from ansible_collections.flodl.cluster.plugins.module_utils._launch import compose_overlay as co

    (tmp_path / "docker-compose.yml").write_text(
        "services:\n" + "".join(f"  {s}:\n    image: busybox\n" for s in ("cuda", "dev", "bench", "rocm"))
    )
    overlay = tmp_path / co.OVERLAY_NAME
    overlay.write_text(co.compose_overlay([("h1", "192.168.100.11"), ("h-2", "10.0.0.2")]))
    cmd = co.splice_compose_flags("docker compose config --format json", co.compose_overlay_flags(str(overlay)))
    proc = subprocess.run(["sh", "-c", cmd], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    services = json.loads(proc.stdout)["services"]
    for svc in ("cuda", "dev", "bench"):
        assert sorted(services[svc]["extra_hosts"]) in (
            ["h-2:10.0.0.2", "h1:192.168.100.11"],
            ["h-2=10.0.0.2", "h1=192.168.100.11"],
        )
    assert not services["rocm"].get("extra_hosts")


def test_docker_compose_launch_gets_overlay_and_env(installed_collection, docker_engine, demo_project, tmp_path):
    """A ``docker compose`` launch: overlay written byte-exact, ``-f`` flags spliced, §1a vars reach the container."""
    from ansible_collections.flodl.cluster.plugins.module_utils._launch import compose_overlay as co

    project = demo_project()
    compose = project / "docker-compose.yml"
    # The overlay names cuda, dev and bench (§5): docker compose refuses it unless all three exist.
    assert all(f"\n  {svc}:" in compose.read_text() for svc in ("cuda", "dev", "bench"))
    record = (
        'docker compose run --rm dev bash -c "env | grep -E \'^(FLODL_|FDL_ENV=|HOSTNAME=)\' | sort > /workspace/rec.txt; '
        'getent hosts 10.77.0.11 h2 >> /workspace/rec.txt || true"'
    )
    # Extra hosts come from each worker's own host name (fdl-cli never looks at the ssh target):
    # h1's host is an IP literal, its own answer; h2's name resolves nowhere, so it is left out.
    workers = {
        "h1": {"ansible_host": "10.77.0.11", "flodl_host": "10.77.0.11",
               "flodl_ssh": {"identity_file": "keys/id_h1"}},
        "h2": {"ansible_host": "10.77.0.12"},
    }
    for host in workers.values():
        host.update(flodl_path=str(project), flodl_local_devices=[0], flodl_nccl_socket_ifname="eth0")
    inventory = {
        "all": {
            "vars": {
                "flodl_controller_host": "10.77.0.1",
                "flodl_controller_path": str(project),
                "flodl_controller_docker": "dev",
                "flodl_cmd": "train",
                "flodl_fdl_env": "cluster",
                "flodl_prebuild": False,
                "flodl_launch_command": record,
            },
            "children": {
                "flodl_workers": {"hosts": workers},
                "ungrouped": {"hosts": {"localhost": {"ansible_connection": "local"}}},
            },
        }
    }
    inv = tmp_path / "inv.json"
    inv.write_text(json.dumps(inventory))
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.launch"],
                       env={"FLODL_HOST_NAME": "ctl-box"})
    assert proc.returncode == 0
    overlay = project / co.OVERLAY_NAME
    assert overlay.read_text() == co.compose_overlay([("10.77.0.11", "10.77.0.11")])
    assert f"docker compose -f docker-compose.yml -f {overlay} run --rm dev" in proc.stdout
    rec = (project / "rec.txt").read_text().splitlines()
    env = dict(line.split("=", 1) for line in rec if "=" in line)
    topo = json.loads(bytes.fromhex(env["FLODL_INTERNAL_FULL_CLUSTER_JSON"]))
    assert topo["workers"][0]["ssh"]["identity_file"] == "/workspace/keys/id_h1"  # as the container sees it
    assert topo["controller"]["host"] == "10.77.0.1"
    assert env["FLODL_INTERNAL_FDL_CMD"] == "train"
    assert env["FDL_ENV"] == "cluster"
    assert env["FLODL_INTERNAL_HOST_USER"]
    assert env["HOSTNAME"] == "ctl-box"
    assert "FLODL_INTERNAL_CLUSTER_EXTRA_HOSTS" not in env  # fdl-cli only, never passed into containers
    assert "FLODL_INTERNAL_PREBUILD_PER_HOST" not in env  # prebuild off
    hosts = {line.split()[1]: line.split()[0] for line in rec if "=" not in line and line.strip()}
    assert hosts == {"10.77.0.11": "10.77.0.11"}  # from the overlay's extra_hosts; h2 unknown in the container


def test_join_token_reaches_the_launcher_but_not_the_logs(installed_collection, cluster3, netns_shared_dir,
                                                          tmp_path):
    cluster = cluster3
    project = copy_project(netns_shared_dir / "proj")
    out = tmp_path / "recorded.json"
    token = "5eed" * 8
    inv = cluster.write_inventory(
        tmp_path / "inv.json",
        project_vars(project, cluster, flodl_launch_command=f"python3 record_env.py {out}",
                     flodl_controller_join={"token": token, "min_rank_start": 2}),
        worker_vars(project, TWO_VARIANTS, {"h1": [0], "h2": [0], "h3": [0]}),
    )
    for extra in ([], ["--check"], ["-vvv"]):
        proc = run_ansible(installed_collection,
                           ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.launch", *extra])
        assert proc.returncode == 0
        # Only the launch role's output is checked (flodl.cluster.topology returns the cluster as-is at -v).
        launch_part = proc.stdout[proc.stdout.index("TASK [flodl.cluster.launch"):]
        assert token not in launch_part + proc.stderr
        assert token.encode().hex() not in launch_part + proc.stderr
        assert "join token redacted" in launch_part
    topo = json.loads(bytes.fromhex(json.loads(out.read_text())["env"]["FLODL_INTERNAL_FULL_CLUSTER_JSON"]))
    assert topo["controller"]["join"] == {"min_rank_start": 2, "token": token}


# --------------------------------------------------------------------------- libtorch variables (fdl-cli parity)


def test_native_launch_gets_the_libtorch_variables_fdl_cli_sets(
        installed_collection, cluster3, netns_shared_dir, tmp_path):
    """The launched process gets what fdl-cli's libtorch_env puts on it (docs/launcher-contract.md §1c, §5).

    Two runs of the same project: with the controller as none of the workers, the variant comes from
    libtorch/.active (upstream's literal ``./`` join kept); with the controller as worker h1 (FLODL_HOST_NAME),
    from h1's own variant directory, whose ``.arch`` names the CUDA toolkit.
    """
    cluster = cluster3
    project = copy_project(netns_shared_dir / "proj")
    (project / "libtorch" / "precompiled" / "cu128" / ".arch").write_text("torch=2.7.0\ncuda=12.8\n")
    out = tmp_path / "rec.json"
    host_vars = worker_vars(project, TWO_VARIANTS, {"h1": [0], "h2": [0], "h3": [0]})
    inv = cluster.write_inventory(
        tmp_path / "inv.json",
        project_vars(project, cluster, flodl_launch_command=f"python3 record_env.py {out}", flodl_prebuild=False),
        host_vars,
    )
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.launch"],
                       env={"FLODL_HOST_NAME": "launchbox", "LD_LIBRARY_PATH": "/opt/caller/lib"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    env = json.loads(out.read_text())["env"]
    root = str(project)
    assert env["LIBTORCH_CPU_PATH"] == "./libtorch/precompiled/cpu"
    assert env["LIBTORCH_HOST_PATH"] == "./libtorch/precompiled/cpu"  # .active holds precompiled/cpu
    assert env["LIBTORCH_PATH"] == f"{root}/./libtorch/precompiled/cpu"
    assert env["LD_LIBRARY_PATH"] == f"{root}/./libtorch/precompiled/cpu/lib:/opt/caller/lib"
    assert env["FDL_GPU_FEATURE"] == "cuda"  # a CPU variant gets cuda, as upstream
    assert "CUDA_VERSION" not in env and "CUDA_TAG" not in env
    assert env["HOSTNAME"] == os.environ.get("HOSTNAME", "launchbox")  # set only when the caller has none

    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.launch"],
                       env={"FLODL_HOST_NAME": "h1", "LD_LIBRARY_PATH": ""})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    env = json.loads(out.read_text())["env"]
    assert env["LIBTORCH_HOST_PATH"] == f"{root}/libtorch/precompiled/cu128"
    assert env["LIBTORCH_PATH"] == f"{root}/libtorch/precompiled/cu128"
    assert env["LD_LIBRARY_PATH"].split(":")[0] == f"{root}/libtorch/precompiled/cu128/lib"
    assert env["FDL_GPU_FEATURE"] == "cuda"
    assert env["CUDA_VERSION"] == "12.8.0" and env["CUDA_TAG"] == "12.8"
    assert env["HOSTNAME"] == os.environ.get("HOSTNAME", "h1")
