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
