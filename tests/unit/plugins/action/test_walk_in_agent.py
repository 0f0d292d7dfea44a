"""flodl.cluster.walk_in_agent for real, over Ansible's own `local` connection: a worker's agent started, then
collected and judged with what the launcher said about its host."""
from __future__ import annotations

import secrets
import time

from .conftest import Case, run_case

ACTION = "walk_in_agent"
# One run id per test process: the agent's file is in the shared temporary directory, and two lines run at once.
RUN_ID = secrets.token_hex(8)


def _case(tmp_path, stage: str, code: int, **extra) -> Case:
    agent = tmp_path / "agent"
    agent.write_text(f"#!/bin/sh\necho \"agent $FLODL_HOST_NAME saw $FLODL_INTERNAL_AGENT_JSON\"\nexit {code}\n")
    agent.chmod(0o755)
    prepared = {"walk_in": {"run_id": RUN_ID, "join_timeout": 120, "agent_timeout": 60, "agents": {"gpu-b": {
        "host": "gpu-b", "cwd": str(tmp_path), "binary": str(agent),
        "env": {"FLODL_HOST_NAME": "gpu-b", "FLODL_INTERNAL_AGENT_JSON": "7b7d"}}}}}
    task_vars = {"inventory_hostname": "gpu-b", "flodl_launch_env": prepared, **extra}
    return Case(task_vars=task_vars, args={"stage": stage}, check_mode=False, expected={})


def test_started_then_collected_a_worker_that_joined_and_ran_passes(tmp_path):
    started = run_case(ACTION, _case(tmp_path, "start", 0))
    assert started["changed"] is True and isinstance(started["pid"], int), started
    time.sleep(0.5)  # the agent is a one-liner here
    launcher = {"rc": 0, "view": {"joined": {"gpu-b": [0]}, "failed_ranks": {}, "quorum_failed": False}}
    out = run_case(ACTION, _case(tmp_path, "collect", 0, flodl_agent_start=started, flodl_launch_follow=launcher))
    entry = out["per_host"]["gpu-b"]
    assert entry["status"] == "changed" and entry["data"]["agent_rc"] == 0, entry
    assert entry["data"]["agent_tail"] == ["agent gpu-b saw 7b7d"]  # its environment arrived whole, on stdin
    assert not out.get("failed")


def test_a_worker_the_launcher_never_admitted_fails_in_its_own_entry(tmp_path):
    started = run_case(ACTION, _case(tmp_path, "start", 1))
    time.sleep(0.5)
    launcher = {"rc": 1, "view": {"joined": {}, "failed_ranks": {}, "quorum_failed": True}}
    out = run_case(ACTION, _case(tmp_path, "collect", 1, flodl_agent_start=started, flodl_launch_follow=launcher))
    entry = out["per_host"]["gpu-b"]
    assert entry["status"] == "failed" and entry["msg"].startswith("gpu-b: did not join within 120 s")


def test_a_missing_directory_fails_the_start_and_an_unplanned_host_is_skipped(tmp_path):
    case = _case(tmp_path, "start", 0)
    case.task_vars["flodl_launch_env"]["walk_in"]["agents"]["gpu-b"]["cwd"] = str(tmp_path / "gone")
    out = run_case(ACTION, case)
    assert out["failed"] is True and f"no directory {tmp_path / 'gone'} there" in out["msg"]
    other = _case(tmp_path, "start", 0)
    other.task_vars["inventory_hostname"] = "gpu-c"
    assert run_case(ACTION, other)["skipped"] is True


def test_check_mode_starts_nothing(tmp_path):
    case = _case(tmp_path, "start", 0)
    case.check_mode = True
    out = run_case(ACTION, case)
    assert out["changed"] is False and "would start" in out["msg"] and "pid" not in out
