"""A detached run as an AWX workflow chains it: start, then status (repeatable), which reports the exit code.

The start job publishes ``flodl_launch.run_id``; AWX hands a workflow's next job the artifacts as extra
variables, which is how status is given the run here. One worker, the controller's own box with two
devices, so no host is contacted and nothing but this machine is involved.
"""
from __future__ import annotations

import json
import re

from conftest import run_ansible
from play_output import results


def _inventory(tmp_path, project, command: str):
    inventory = {"all": {
        "vars": {"flodl_controller_host": "127.0.0.1", "flodl_controller_path": str(project), "flodl_cmd": "train",
                 "flodl_prebuild": False, "flodl_launch_command": command},
        "children": {"flodl_workers": {"hosts": {"ctl": {
            "flodl_path": str(project), "flodl_local_devices": [0, 1], "flodl_nccl_socket_ifname": "lo",
            "ansible_connection": "local"}}}},
    }}
    path = tmp_path / "inv.json"
    path.write_text(json.dumps(inventory))
    return path


def test_status_reports_the_exit_code_and_fails_a_failed_run(installed_collection, tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    # The run ends when the test says so (a gate file), not after a fixed sleep: the "running" check can
    # never come too late on a slow machine, and an idle one waits for nothing.
    gate = tmp_path / "gate"
    inv = _inventory(tmp_path, project,
                     f"timeout 120 sh -c 'until [ -e {gate} ]; do sleep 0.1; done'; echo training done; exit 4")
    env = {"FLODL_HOST_NAME": "ctl"}
    start = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), "flodl.cluster.launch",
                                               "-e", "flodl_launch_detach=true"], env=env)
    assert start.returncode == 0
    run_id = re.search(r"detached run ([0-9a-f]{16}) started", start.stdout).group(1)
    artifact = json.dumps({"flodl_launch": {"run_id": run_id, "rc": "", "failed": False}})

    running = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), "flodl.cluster.status",
                                                 "-e", artifact], env=env)
    assert running.returncode == 0
    assert f"flodl run {run_id} on localhost: launcher running" in running.stdout
    gate.touch()

    ended = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), "flodl.cluster.status",
                                               "-e", artifact, "-e", "flodl_status_wait_seconds=60"], env=env)
    assert ended.returncode != 0
    assert f"flodl run {run_id} on localhost: launcher ended, exit code 4" in ended.stdout
    assert "  | training done" in ended.stdout
    failed = results(ended.stdout)
    assert failed and all(r.get("rc") == 4 and r.get("state") == "failed" for r in failed.values()), failed


def _forge(project, run_id: str, launch_host: str, pid: int) -> None:
    """A run record as anyone who can write to the shared project can write one."""
    runs = project / "target" / "cluster" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    (runs / f"{run_id}.json").write_text(json.dumps({
        "format": "flodl-detached/1", "run_id": run_id, "launch_host": launch_host, "pid": pid,
        "log": f"/tmp/launch-{run_id}.log", "command": "train", "started": 4e9}))


def test_forged_run_records_signal_nothing_and_the_workers_are_still_cleaned(
        installed_collection, netns_cluster_factory, netns_shared_dir, tmp_path):
    """Issue 35: pid 1, an unrelated process here and on a host, a host outside the inventory: all refused."""
    import shutil
    import subprocess
    import time

    from netns_cluster import HostSpec
    from play_output import failed_in_recap, task_results

    cluster = netns_cluster_factory([HostSpec("h1"), HostSpec("h2")])
    project = netns_shared_dir / "proj"
    project.mkdir()
    project.chmod(0o755)
    # A leftover rank on h1: any program at the path prebuild gives h1's binary.
    binary = project / "target/cluster/h1/precompiled-cu128/release/train"
    binary.parent.mkdir(parents=True)
    shutil.copy("/bin/sleep", binary)
    assert cluster.ssh("h1", f"nohup {binary} 300 >/dev/null 2>&1 &").returncode == 0
    # Unrelated processes the forged records point at: a session leader here, one on h2.
    here = subprocess.Popen(["setsid", "sleep", "300"])
    there = cluster.ssh("h2", "setsid sleep 300 >/dev/null 2>&1 & echo $!")
    there_pid = int(there.stdout.strip())
    try:
        _forge(project, "a" * 16, "localhost", 1)
        _forge(project, "b" * 16, "localhost", here.pid)
        _forge(project, "c" * 16, "h2", there_pid)
        _forge(project, "d" * 16, "h2", 1)
        _forge(project, "e" * 16, "elsewhere.example", here.pid)
        arch = {h: "precompiled/cu128" for h in ("h1", "h2")}
        inv = cluster.write_inventory(tmp_path / "inv.json", {
            "flodl_controller_host": cluster.controller_ip, "flodl_controller_path": str(project),
            "flodl_cmd": "train", "flodl_prebuild": False}, {
            h: {"flodl_path": str(project), "flodl_arch": arch[h], "flodl_local_devices": [0],
                "flodl_nccl_socket_ifname": "eth0"} for h in arch})

        td = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), "flodl.cluster.teardown"])
        out = td.stdout + td.stderr
        assert td.returncode != 0, out
        # The workers are cleaned all the same, each with its own result.
        assert task_results(td.stdout, "Result of this worker") == {"h1": "changed", "h2": "ok"}, td.stdout
        deadline = time.monotonic() + 10
        while cluster.ssh("h1", f"pgrep -f '^{binary}'").returncode == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert cluster.ssh("h1", f"pgrep -f '^{binary}'").returncode != 0
        # Every forged record is named and refused, and the run fails on it.
        assert "run record(s) refused, nothing of them was signalled" in out
        for words in ("aaaaaaaaaaaaaaaa.json: the run record's pid is not an integer from 2",
                      "dddddddddddddddd.json: the run record's pid is not an integer from 2",
                      f"detached run bbbbbbbbbbbbbbbb on localhost (pid {here.pid}): the process at the record's "
                      "pid is not this run's launcher",
                      f"detached run cccccccccccccccc on h2 (pid {there_pid}): the process at the record's pid",
                      "names launch host 'elsewhere.example', which is neither this machine nor an inventory host"):
            assert words in out, (words, out)
        # One failure, the run's: on the host that ran the run-once refusal, after every worker's own result.
        assert failed_in_recap(td.stdout) == ["h1"]
        assert "fatal: [h1]: FAILED! => {\"changed\": false, \"msg\": [\"flodl teardown: run record(s) refused" in td.stdout
        # And nothing outside the run was signalled: here, on h2, and h2's own PID 1 (its sshd).
        assert here.poll() is None
        assert cluster.ssh("h2", f"kill -0 {there_pid}").returncode == 0

        status = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), "flodl.cluster.status",
                                                    "-e", "flodl_run_id=" + "b" * 16])
        assert status.returncode != 0
        assert f"flodl run {'b' * 16} on localhost: the process at the record's pid is not this run's" in status.stdout
        foreign = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), "flodl.cluster.status",
                                                     "-e", "flodl_run_id=" + "e" * 16])
        assert foreign.returncode != 0 and "TemplateContext" not in foreign.stdout + foreign.stderr
        assert "names launch host 'elsewhere.example'" in foreign.stdout
        assert here.poll() is None and cluster.ssh("h2", f"kill -0 {there_pid}").returncode == 0
    finally:
        here.kill()
        here.wait()
        cluster.ssh("h2", f"kill {there_pid}")
