"""The run lock as a lease (issue 38), on real namespace hosts through the installed collection's playbooks.

A run that ends removes its own lock, so the next run passes from any controller: this machine, the
launch host (h1, the AWX layout), another controller identity. A run killed outright (its whole pid
namespace SIGKILLed, as a deleted job pod or an execution-environment container) leaves its lock, which
another controller takes over once the lease lapses (``flodl_run_lock_ttl``); while it lives, a run from
another controller is refused, naming both.
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
from streamed_play import kill_session, wait_for
from test_launch import copy_project, project_vars, rank_processes, worker_vars

PLAYBOOKS = "flodl.cluster"
SAME_VARIANT = {"h1": "precompiled/cu128", "h2": "precompiled/cu128", "h3": "precompiled/cu128"}
# The launch host h1 is also a worker: the stand-in names the controller apart (see test_launch_host.py).
STANDIN = "FLODL_HOST_NAME=launchbox python3 standin_launcher.py --epochs 1"
SHORT = json.dumps({"flodl_cluster_env": {"FLODL_DEMO_STEPS": "3", "FLODL_DEMO_STEP_MS": "50"}})


def _setup(cluster, shared: Path, tmp_path: Path, **group) -> tuple[Path, Path]:
    """A project on the shared mount, with the workers' key there too (the launch host h1 uses it)."""
    project = copy_project(shared / "proj")
    key = shared / "keys" / "id"
    key.parent.mkdir(mode=0o700)
    shutil.copy(cluster.key_path, key)
    os.chmod(key, 0o600)
    host_vars = worker_vars(project, SAME_VARIANT, {"h1": [0], "h2": [0], "h3": [0]})
    for h in host_vars:
        host_vars[h]["ansible_ssh_private_key_file"] = str(key)
    group.setdefault("flodl_launch_command", STANDIN)
    return project, cluster.write_inventory(tmp_path / "inv.json", project_vars(project, cluster, **group), host_vars)


def _gone(path: Path, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    return not path.exists()


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_a_finished_run_leaves_no_lock_for_the_next_controllers(
        installed_collection, cluster3, netns_shared_dir, tmp_path):
    project, inv = _setup(cluster3, netns_shared_dir, tmp_path)
    lock = project / "target/cluster/run.lock"
    train = ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train"]
    local = run_ansible(installed_collection, train)
    assert local.returncode == 0, local.stdout + local.stderr
    assert _gone(lock), f"the local run left its lock: {lock.read_text()}"
    # The AWX layout: the launch host takes the lock in the same shared project.
    remote = run_ansible(installed_collection, [*train, "-e", "flodl_launch_host=h1"])
    assert remote.returncode == 0, remote.stdout + remote.stderr
    assert "flodl run lock" not in remote.stdout
    assert _gone(lock), "the launch host's session left its lock"
    other = run_ansible(installed_collection, train, env={"FLODL_HOST_NAME": "ctl-b"})
    assert other.returncode == 0, other.stdout + other.stderr
    assert "flodl run lock" not in other.stdout and "lock is stale" not in _flat(other.stdout + other.stderr)
    assert _gone(lock)


def test_a_killed_runs_lease_lapses_and_two_live_runs_refuse_each_other(
        installed_collection, cluster3, netns_shared_dir, tmp_path):
    ttl = 15
    project, inv = _setup(cluster3, netns_shared_dir, tmp_path, flodl_launch_grace_seconds=3, flodl_run_lock_ttl=ttl,
                          flodl_cluster_env={"FLODL_DEMO_SLEEP_S": "300", "FLODL_DEMO_STEP_MS": "50"})
    lock = project / "target/cluster/run.lock"
    train = ["-i", str(inv), f"{PLAYBOOKS}.cluster_train"]
    # Controller A: its own pid namespace (an EE container), its own identity; everything in it dies at once.
    first = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "sh", "-c", '"$@"; exit $?', "sh",
         ansible_bin("ansible-playbook"), *train],
        env=installed_collection.env(PYTHONUNBUFFERED="1", FLODL_HOST_NAME="ctl-a"), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(first.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        wait_for(lines, first, lambda t: t.count("sleeping 300s") >= 3, 240, "the first run's ranks to start",
                 while_running=True)
        held = json.loads(lock.read_text())
        assert (held["controller_host"], held["ttl"]) == ("ctl-a", ttl), held
        # Controller B, while A lives: refused before contact, naming both runs.
        second = run_ansible(installed_collection, ["ansible-playbook", *train, "-e", SHORT],
                             env={"FLODL_HOST_NAME": "ctl-b"})
        assert first.poll() is None, "".join(lines)
        out = _flat(second.stdout + second.stderr)
        assert second.returncode != 0
        assert (f"another run of project {project} is live on controller ctl-a (run lock held by pid {held['pid']} "
                f"of ") in out
        assert "; this run (controller ctl-b, run id " in out and ") was not started." in out
        assert "Prebuild | Build on the build host" not in second.stdout
        os.killpg(first.pid, signal.SIGKILL)  # the whole namespace: the playbook, its lease holder, the launcher
        killed = time.monotonic()
        first.wait()
    finally:
        kill_session(first)
    reader.join(timeout=5)
    time.sleep(1)
    assert json.loads(lock.read_text())["run_id"] == held["run_id"], "nothing released the killed run's lock"
    assert time.time() - lock.stat().st_mtime < ttl, "the lease had already lapsed before the kill"
    # The killed launcher's ranks outlive it on the workers; the lock is left to its lease.
    td = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.teardown"])
    assert td.returncode == 0, td.stdout + td.stderr
    assert rank_processes(f"{project}/target/cluster/") == []
    assert lock.exists()
    time.sleep(max(0.0, killed + ttl + 2 - time.monotonic()))
    third = run_ansible(installed_collection, ["ansible-playbook", *train, "-e", SHORT],
                        env={"FLODL_HOST_NAME": "ctl-b"})
    took = time.monotonic() - killed
    assert third.returncode == 0, third.stdout + third.stderr
    assert f"over its {ttl} s: the run on ctl-a ended without releasing it (killed, or cut off)); taking it over" in (
        _flat(third.stdout + third.stderr))
    assert took < 120, took
    assert _gone(lock)
