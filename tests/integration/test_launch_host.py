"""The launch on another inventory host (flodl_launch_host), on real namespace hosts.

Under AWX the play's localhost is the job's container; the launcher belongs on the
real controller box. Here h1 plays that box: the launcher must run there (its UTS
namespace is h1's, not this machine's), with the same added environment bytes as a
local launch, output streamed while it runs, its exit code returned, and a cancel
must leave nothing running. The key sits on the shared filesystem ("keys present
there"), since /tmp is private to each host.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from conftest import ansible_bin, run_ansible
from netns_cluster import HostSpec
from streamed_play import kill_session, stream, wait_for
from test_launch import PLAYBOOKS, TWO_VARIANTS, copy_project, project_vars, rank_processes, worker_vars

RECORD = """\
import json, os, socket, sys
with open(sys.argv[1], "w") as fh:
    json.dump({"env": dict(os.environ), "cwd": os.getcwd(), "host": socket.gethostname()}, fh)
"""


# The launch host here is also a worker (h1); a controller box usually is not: name it apart, so the
# stand-in reaches every worker over ssh (its local path would need cargo, absent on the hosts).
STANDIN = "FLODL_HOST_NAME=launchbox python3 standin_launcher.py --epochs 1"


def _launchers(project: Path) -> list[int]:
    """Stand-in launcher processes of this test's project (others may run on the machine at the same time)."""
    found = []
    for pid, cmd in rank_processes("python3"):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if "standin_launcher.py" in cmd and cwd == str(project):
            found.append(pid)
    return found


def _setup(cluster, shared: Path, tmp_path: Path, **group):
    project = copy_project(shared / "proj")
    (project / "record.py").write_text(RECORD)
    key = shared / "keys" / "id"
    key.parent.mkdir(mode=0o700)
    shutil.copy(cluster.key_path, key)
    os.chmod(key, 0o600)
    host_vars = worker_vars(project, TWO_VARIANTS, {"h1": [0], "h2": [0], "h3": [0]})
    for h in host_vars:
        host_vars[h]["ansible_ssh_private_key_file"] = str(key)
    inv = cluster.write_inventory(tmp_path / "inv.json", project_vars(project, cluster, **group), host_vars)
    return project, inv


def _added(record: dict, base: dict) -> dict:
    """The variables the launch added: what the recorded env has beyond (or unlike) a plain shell's."""
    return {k: v for k, v in record["env"].items() if k.startswith(("FLODL_", "FDL_", "LIBTORCH_", "CUDA_"))
            and base.get(k) != v}


def test_launcher_runs_on_the_launch_host_with_the_local_environment_bytes(
        installed_collection, cluster3, netns_shared_dir, tmp_path):
    cluster = cluster3
    out_remote, out_local = netns_shared_dir / "remote.json", netns_shared_dir / "local.json"
    project, inv = _setup(cluster, netns_shared_dir, tmp_path,
                          flodl_launch_command=f"python3 record.py {out_remote} && {STANDIN}")
    remote = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train",
                                                "-e", "flodl_launch_host=h1"])
    assert remote.returncode == 0, remote.stdout + remote.stderr
    assert "flodl launch: running `python3 record.py" in remote.stdout and " on h1 in " in remote.stdout
    rec = json.loads(out_remote.read_text())
    assert rec["host"] == "h1"  # ran on h1, not here
    assert rec["cwd"] == str(project)
    # The ranks' output came back through the launch host, live (the stand-in fans out from h1).
    for host in ("h1", "h2", "h3"):
        assert f"[standin-launcher] {host}: exited with status 0" in remote.stdout

    local = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.launch",
                                               "-e", f"flodl_launch_command='python3 record.py {out_local}'"])
    assert local.returncode == 0, local.stdout + local.stderr
    rec_local = json.loads(out_local.read_text())
    assert rec_local["host"] != "h1"
    plain = dict(os.environ)
    remote_added, local_added = _added(rec, plain), _added(rec_local, plain)
    assert "FLODL_INTERNAL_FULL_CLUSTER_JSON" in remote_added and "FLODL_INTERNAL_PREBUILD_PER_HOST" in remote_added
    assert remote_added == local_added


def test_exit_code_propagates_from_the_launch_host(installed_collection, cluster3, netns_shared_dir, tmp_path):
    _project, inv = _setup(cluster3, netns_shared_dir, tmp_path, flodl_launch_command="echo on-h1-$(hostname); exit 5")
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train",
                                              "-e", "flodl_launch_host=h1"])
    assert proc.returncode != 0
    assert "on-h1-h1" in proc.stdout
    assert "the launch command exited with code 5 (rc=5)" in proc.stdout


def test_cancel_stops_the_launcher_on_the_launch_host(installed_collection, cluster3, netns_shared_dir, tmp_path):
    project, inv = _setup(cluster3, netns_shared_dir, tmp_path,
                          flodl_cluster_env={"FLODL_DEMO_SLEEP_S": "300", "FLODL_DEMO_STEP_MS": "50"},
                          flodl_launch_grace_seconds=3, flodl_launch_command=STANDIN)
    proc, lines, reader = stream(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train",
                                                        "-e", "flodl_launch_host=h1"])
    try:
        wait_for(lines, proc, lambda out: sum("sleeping 300s" in ln for ln in out.splitlines()) >= 3, 150,
                 "the ranks reported sleeping", while_running=True)
        launchers = _launchers(project)
        assert launchers, "no stand-in launcher process"
        me = os.readlink("/proc/self/ns/uts")
        assert all(os.readlink(f"/proc/{pid}/ns/uts") != me for pid in launchers), "launcher ran here"
        proc.send_signal(signal.SIGTERM)  # what an AWX cancel sends first
        rc = proc.wait(timeout=60)
    finally:
        kill_session(proc)
    reader.join(timeout=5)
    assert rc != 0, "".join(lines)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _launchers(project):
        time.sleep(0.2)
    assert not _launchers(project), "launcher survived the cancel"
    td = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.teardown"])
    assert td.returncode == 0
    deadline = time.monotonic() + 5
    while rank_processes(f"{project}/target/cluster/") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert rank_processes(f"{project}/target/cluster/") == []


def test_a_worker_the_launch_host_cannot_reach_fails_preflight(
        installed_collection, cluster3, netns_shared_dir, tmp_path):
    project, inv = _setup(cluster3, netns_shared_dir, tmp_path)
    doc = json.loads(inv.read_text())
    # h3's key only exists on this machine (/tmp is private to each host): the launcher on h1 could not use it.
    doc["all"]["children"]["flodl_workers"]["hosts"]["h3"]["ansible_ssh_private_key_file"] = str(cluster3.key_path)
    inv.write_text(json.dumps(doc))
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train",
                                              "-e", "flodl_launch_host=h1"])
    assert proc.returncode != 0
    assert "fatal: [h3]" in proc.stdout
    assert "flodl's launcher will run on h1 (flodl_launch_host) and fan out from there, but h1 cannot reach" in proc.stdout
    assert "flodl_launch_forward_agent: true" in proc.stdout
    assert "fatal: [h2]" not in proc.stdout
    assert not list(project.glob("target/cluster/h*/*/release/train"))


def test_detached_run_then_status_then_teardown(installed_collection, cluster3, netns_shared_dir, tmp_path):
    import re

    project, inv = _setup(cluster3, netns_shared_dir, tmp_path,
                          flodl_cluster_env={"FLODL_DEMO_SLEEP_S": "300", "FLODL_DEMO_STEP_MS": "50"},
                          flodl_launch_command=STANDIN, flodl_launch_grace_seconds=3)
    start = time.monotonic()
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train",
                                              "-e", "flodl_launch_host=h1", "-e", "flodl_launch_detach=true"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert time.monotonic() - start < 120
    m = re.search(r"detached run ([0-9a-f]{16}) started on h1 \(pid (\d+)\)", proc.stdout)
    assert m, proc.stdout
    run_id = m.group(1)
    record = json.loads((project / "target/cluster/runs" / f"{run_id}.json").read_text())
    assert record["launch_host"] == "h1" and record["pid"] == int(m.group(2))
    marker = f"{project}/target/cluster/"
    deadline = time.monotonic() + 90
    while len(rank_processes(marker)) < 3:
        assert time.monotonic() < deadline, "the detached run never started its ranks"
        time.sleep(0.5)

    status = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.status",
                                                "-e", f"flodl_run_id={run_id}"])
    assert status.returncode == 0, status.stdout + status.stderr
    assert f"flodl run {run_id} on h1: launcher running" in status.stdout
    assert "  | " in status.stdout  # a log tail
    assert status.stdout.count("1 rank process(es) of ") == 3

    td = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.teardown"])
    assert td.returncode == 0, td.stdout + td.stderr
    assert f"stopped the launcher of detached run {run_id} on h1" in td.stdout
    deadline = time.monotonic() + 15
    while (rank_processes(marker) or _launchers(project)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert rank_processes(marker) == []
    assert not _launchers(project)
    after = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.status"])
    # Stopped by teardown: the run recorded no exit code, which status reports as a failed run.
    assert after.returncode != 0
    assert f"flodl run {run_id} on h1: launcher ended without recording an exit code" in after.stdout
    assert sum(line.startswith(f"  {h}: 0 rank process(es) of ") for h in ("h1", "h2", "h3")
               for line in after.stdout.splitlines()) == 3


def test_a_launch_timeout_stops_the_run_and_cleans_the_workers(
        installed_collection, cluster3, netns_shared_dir, tmp_path):
    project, inv = _setup(cluster3, netns_shared_dir, tmp_path,
                          flodl_cluster_env={"FLODL_DEMO_SLEEP_S": "300", "FLODL_DEMO_STEP_MS": "50"},
                          flodl_launch_command=STANDIN, flodl_launch_grace_seconds=2)
    start = time.monotonic()
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train",
                                              "-e", "flodl_launch_timeout=20"])
    took = time.monotonic() - start
    assert proc.returncode != 0
    assert "the launch command did not finish within flodl_launch_timeout=20s" in proc.stdout
    assert took < 150, took
    assert rank_processes(f"{project}/target/cluster/") == []  # the orphan cleanup ran before the play ended
    assert not _launchers(project)


# --------------------------------------------------------------------------- the launch host is the controller

SLOW_CARGO = """#!/bin/sh
echo "$$" > {marker}
exec sleep 600
"""


def test_a_second_job_from_another_pod_is_refused_during_the_first_ones_prebuild(
        installed_collection, cluster3, netns_shared_dir, tmp_path):
    """Two AWX jobs, each in its own pod, with h1 as the launch host: the lock lives on h1, not in a pod.

    The first pod builds (it sees the project, with a cargo that never ends); the second does not see the
    project at all. Deleting the first pod (SIGKILL of all it runs) releases the lock on h1.
    """
    from pod import Pod

    tools, marker = netns_shared_dir / "slow-bin", netns_shared_dir / "cargo-started"
    tools.mkdir()
    (tools / "cargo").write_text(SLOW_CARGO.format(marker=marker))
    (tools / "cargo").chmod(0o755)
    # The controller's data path is the project: there on h1 (the shared mount), absent from the second pod.
    project, inv = _setup(cluster3, netns_shared_dir, tmp_path, flodl_launch_command=STANDIN,
                          flodl_controller_data_path=str(netns_shared_dir / "proj"),
                          flodl_prebuild_env={"PATH": f"{tools}:/usr/bin:/bin"})
    lock = project / "target/cluster/run.lock"
    argv = [ansible_bin("ansible-playbook"), "-i", str(inv), f"{PLAYBOOKS}.cluster_train", "-e", "flodl_launch_host=h1"]
    with Pod(cluster3) as first_pod, Pod(cluster3, hide=[str(project)]) as second_pod:
        first = first_pod.spawn(argv, env=installed_collection.env(PYTHONUNBUFFERED="1"), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(iter(first.stdout.readline, "")), daemon=True)
        reader.start()
        deadline = time.monotonic() + 150
        while not marker.exists():
            assert first.poll() is None, "".join(lines)
            assert time.monotonic() < deadline, "the first job's build never started:\n" + "".join(lines)
            time.sleep(0.2)
        held = json.loads(lock.read_text())  # written on h1, in the shared project
        assert held["controller_host"] == "h1", held
        second = second_pod.spawn(argv, env=installed_collection.env(), stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        out = second.communicate(timeout=180)[0]
        print(out)
        assert second.returncode != 0
        assert f"another run of project {project} is live on controller h1 (run lock held by pid {held['pid']}" in out
        assert f"run id {held['run_id']}" in out
        assert "Prebuild |" not in out  # refused before its builds
        # The controller's data path was checked on h1, where it exists (it is absent from the second pod).
        assert f"controller h1: error — local checks, data {project} ok" in out
        assert f"data path {project} is missing" not in out
        assert json.loads(lock.read_text()) == held
        first_pod.kill()  # the first job's pod deleted: its ssh to h1 dies with it
        reader.join(timeout=5)
        deadline = time.monotonic() + 10
        while lock.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        print("".join(lines))
        assert not lock.exists(), "the lock outlived its job's pod"


def test_min_free_gb_is_measured_on_the_launch_host_in_its_session(
        installed_collection, netns_cluster_factory, netns_shared_dir, tmp_path):
    """flodl_preflight_min_free_gb: the controller's data path is measured where the launch runs, by the launch
    host's one session. It is a 64 MiB tmpfs that h1 alone sees; here it is absent, so a free-space finding
    (not "missing") proves the part ran there."""
    small = "/tmp/flodl-small"
    cluster = netns_cluster_factory([HostSpec("h1", small_paths=[small]), "h2", "h3"], shared_root=netns_shared_dir)
    project, inv = _setup(cluster, netns_shared_dir, tmp_path, flodl_controller_data_path=small)
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train",
                                              "-e", "flodl_launch_host=h1", "-e", "flodl_preflight_min_free_gb=0.5"])
    assert proc.returncode != 0
    assert ("the controller failed preflight, so the run stops: h1: only 0.06 GB free on the data path "
            f"{small}, below flodl_preflight_min_free_gb (0.5 GB)") in proc.stdout, proc.stdout
    assert "Prebuild |" not in proc.stdout
    assert not list(project.glob("target/cluster/h*/*/release/train"))


def test_an_unknown_launch_host_key_fails_preflight(installed_collection, cluster3, netns_shared_dir, tmp_path):
    project, inv = _setup(cluster3, netns_shared_dir, tmp_path)
    empty = tmp_path / "known_hosts_empty"
    empty.write_text("")
    doc = json.loads(inv.read_text())
    doc["all"]["children"]["flodl_workers"]["hosts"]["h1"]["ansible_ssh_common_args"] = (
        f"-o UserKnownHostsFile={empty} -o LogLevel=ERROR -o IdentitiesOnly=yes")
    inv.write_text(json.dumps(doc))
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train",
                                              "-e", "flodl_launch_host=h1"])
    assert proc.returncode != 0
    ip = cluster3.host("h1").ip
    assert f"launch host h1: ssh host-key verification failed: no host key for {ip} is in known_hosts" in proc.stdout
    assert "Prebuild |" not in proc.stdout
    assert not list(project.glob("target/cluster/h*/*/release/train"))
    assert not (project / "target/cluster/run.lock").exists()
