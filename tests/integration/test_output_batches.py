"""A chatty training under ansible-runner (how AWX runs a job): a bounded number of job events, every line logged.

The launch phase alone runs a command that prints 6,000 lines; no worker is contacted (explicit device
lists, prebuild off), so no hosts are needed. Assertions read what AWX reads: the runner's events.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from conftest import Collection, need

LINES = 6000
CHATTY = "import sys, time\nfor i in range(6000):\n    print(f'[w1] step {i} loss 0.5', flush=True)\n    time.sleep(0.0005)\n"


def test_six_thousand_lines_make_a_few_hundred_events_and_a_full_log(installed_collection: Collection, tmp_path):
    try:
        import ansible_runner  # noqa: PLC0415  (the tool under test)
    except ImportError:
        ansible_runner = None
    need(ansible_runner is not None, f"ansible-runner is not installed in {sys.prefix}: run scripts/bootstrap.sh")
    project = tmp_path / "proj"
    project.mkdir()
    (project / "chatty.py").write_text(CHATTY)
    pdd = tmp_path / "pdd"
    (pdd / "project").mkdir(parents=True)
    (pdd / "env").mkdir()
    (pdd / "inventory").mkdir()
    (pdd / "project" / "launch.yml").write_text("- name: Launch\n  ansible.builtin.import_playbook: flodl.cluster.launch\n")
    workers = {
        "ctl": {"flodl_path": str(project), "flodl_local_devices": [0], "flodl_nccl_socket_ifname": "lo",
                "ansible_connection": "local"},
        "10.77.0.12": {"flodl_path": str(project), "flodl_local_devices": [0], "flodl_nccl_socket_ifname": "lo"},
    }
    inventory = {"all": {"vars": {"flodl_controller_host": "10.77.0.1", "flodl_controller_path": str(project),
                                  "flodl_cmd": "train"},
                         "children": {"flodl_workers": {"hosts": workers}}}}
    (pdd / "inventory" / "hosts.json").write_text(json.dumps(inventory))
    survey = {"flodl_prebuild": "false", "flodl_launch_command": "python3 chatty.py"}
    (pdd / "env" / "extravars").write_text(json.dumps(survey))
    envvars = {**{k: v for k, v in installed_collection.env().items() if k.startswith("ANSIBLE_")},
               "FLODL_HOST_NAME": "ctl", "PYTHONUNBUFFERED": "1",
               "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    (pdd / "env" / "envvars").write_text(json.dumps(envvars))
    r = ansible_runner.run(private_data_dir=str(pdd), playbook="launch.yml", quiet=True)
    stdout = r.stdout.read()
    print(f"status={r.status} rc={r.rc}\n{stdout[-3000:]}")
    assert r.status == "successful", stdout[-3000:]
    events = list(r.events)
    shown = [line for line in stdout.splitlines() if line.startswith("[w1] step ")]
    assert shown == [f"[w1] step {i} loss 0.5" for i in range(LINES)]  # every line reaches the job, in order
    print(f"{len(events)} events for {LINES} lines")
    assert len(events) <= 300, len(events)
    logs = sorted((project / "target" / "cluster" / "logs").glob("launch-*.log"))
    assert len(logs) == 1
    logged = [line for line in logs[0].read_text().splitlines() if line.startswith("[w1] step ")]
    assert len(logged) == LINES
