"""flodl.cluster.launch_env: a refusal before contact, and the check-mode plan without ssh."""
from __future__ import annotations

import json
import socket

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._core.hexcodec import hex_decode

ACTION = "launch_env"


@pytest.fixture(autouse=True)
def no_resolver(monkeypatch):
    # The extra-hosts lookup asks the system resolver: the recorded names resolve nowhere, without waiting.
    def unknown(*_args, **_kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unknown)


def test_recorded_case(recorded, run, expect, no_ssh):
    expect(run(recorded), recorded.expected)
    assert [argv for argv in no_ssh if "ssh" in str(argv)] == []


def test_refused_before_contact(case, run, no_processes):
    # Every worker's report fails with the refusal; the step (on one worker) passes, and starts nothing.
    result = run(case("refused"))
    assert not result.get("failed") and result["refused"] is True and "command" not in result
    assert {e["status"] for e in result["per_host"].values()} == {"failed"}
    assert no_processes == []


def test_an_earlier_refusal_is_carried_on_and_nothing_is_read(case, run, no_processes):
    # The launch playbook's validation refused the run (a live run holds its lock): the launch must not start.
    loaded = case("refused")
    earlier = {"changed": False, "refused": True, "problems": ["flodl run lock: another run is live"],
               "failed_hosts": ["ctl"], "msg": "the run lock was not taken; nothing was started: 1 problem(s)",
               "per_host": {"ctl": {"status": "failed", "msg": "the run lock was not taken: another run is live",
                                    "data": {}}}}
    loaded.task_vars = dict(loaded.task_vars, flodl_topology_run=earlier)
    result = run(loaded)
    assert not result.get("failed") and result["refused"] is True and result["per_host"] == earlier["per_host"]
    assert result["msg"].startswith("not started: the run was refused by an earlier step of this play; the run lock")


def test_check_mode_hands_the_launcher_the_topology_and_the_envelope(case, run, no_ssh, tmp_path):
    result = run(case("check_mode"))
    env = result["env"]
    topology = hex_decode(env["FLODL_INTERNAL_FULL_CLUSTER_JSON"]).decode()
    assert f'"path": "{tmp_path}"' in topology and topology.startswith("{\n  ")  # pretty, as fdl-cli writes it
    # gpu-b's `all` gets its two AMD GPUs from the preflight result given, without asking gpu-b again.
    assert [w["ranks"] for w in json.loads(topology)["workers"]] == [[0, 1], [2, 3], [4]]
    assert env["FLODL_INTERNAL_FDL_CMD"] == "train"
    assert "gpu-b" in env["FLODL_INTERNAL_PREBUILD_PER_HOST"]
    assert not (tmp_path / "target").exists()  # check mode writes no overlay


def test_a_run_refused_by_its_variables_closes_the_masters_preflight_left_and_starts_nothing(
        case, run, no_processes, tmp_path):
    masters = tmp_path / "flodl-ssh-abcdefgh"
    masters.mkdir()
    loaded = case("check_mode")
    loaded.check_mode = False
    loaded.args = dict(loaded.args, preflight={**loaded.args["preflight"], "ssh_control_dir": str(masters)})
    loaded.task_vars = dict(loaded.task_vars, flodl_launch_timeout="soon")
    result = run(loaded)
    assert not result.get("failed") and result["refused"] is True and "command" not in result and "env" not in result
    assert "controller: flodl_launch_timeout must be a number of seconds (0 or more), got str 'soon'" in result["msg"]
    assert {e["status"] for e in result["per_host"].values()} == {"failed"}
    assert not masters.exists()  # nothing will ride them: closed, their directory gone
    assert no_processes == []
