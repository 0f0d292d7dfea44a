"""flodl.cluster.walk_in_agent for real, over Ansible's own `local` connection: a worker's agent started, then
collected and judged with what the launcher said about its host."""
from __future__ import annotations

import os
import secrets
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from ansible_collections.flodl.cluster.plugins.plugin_utils._walk_in import walk_in_steps

from .conftest import Case, make_action, run_case

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
    window = {"changed": True, "launcher": {"pid": os.getpid(), "port": 1337}, "msg": "join window open on port 1337"}
    task_vars = {"inventory_hostname": "gpu-b", "flodl_launch_env": prepared, "flodl_launch_window": window, **extra}
    return Case(task_vars=task_vars, args={"stage": stage}, check_mode=False, expected={})


def _agent_ended(within: float = 10.0) -> None:
    """Wait until the started agent (a one-liner here) has ended: its exit code is recorded beside its log."""
    recorded = Path(os.environ.get("TMPDIR") or "/tmp") / f"flodl-agent-{RUN_ID}.log.exit"  # wi.agent_log's
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if recorded.read_text(encoding="utf-8").endswith("\n"):
                return
        except OSError:
            pass
        time.sleep(0.01)


def test_started_then_collected_a_worker_that_joined_and_ran_passes(tmp_path):
    started = run_case(ACTION, _case(tmp_path, "start", 0))
    assert started["changed"] is True and isinstance(started["pid"], int), started
    _agent_ended()
    launcher = {"rc": 0, "view": {"joined": {"gpu-b": [0]}, "failed_ranks": {}, "quorum_failed": False}}
    out = run_case(ACTION, _case(tmp_path, "collect", 0, flodl_agent_start=started, flodl_launch_follow=launcher))
    entry = out["per_host"]["gpu-b"]
    assert entry["status"] == "changed" and entry["data"]["agent_rc"] == 0, entry
    assert entry["data"]["agent_tail"] == ["agent gpu-b saw 7b7d"]  # its environment arrived whole, on stdin
    assert not out.get("failed")


def test_a_worker_the_launcher_never_admitted_fails_in_its_own_entry(tmp_path):
    started = run_case(ACTION, _case(tmp_path, "start", 1))
    _agent_ended()
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


def _open_step_that_failed(tmp_path) -> dict:
    """What the launch step's open stage registers when its launcher ends before its window opens (run for real)."""
    args = {"command": f"{sys.executable} -c 'import sys; sys.exit(3)'", "chdir": str(tmp_path), "env": {},
            "shell": "/bin/sh", "grace_seconds": 1.0, "launch_host": "localhost", "prepared_var": "flodl_launch_env",
            "walk_in_stage": "open"}
    walk_in = {"run_id": RUN_ID, "host": "127.0.0.1", "port": 9, "open_timeout": 10.0, "agents": {}}
    task_vars = {"flodl_launch_env": {"walk_in": walk_in}, "hostvars": {}}
    opened = walk_in_steps.run_stage(SimpleNamespace(_templar=None), task_vars, {}, args, str(tmp_path / "logs"),
                                     SimpleNamespace(display=lambda _t: None))
    assert opened["failed"] is True, opened
    return opened


@pytest.mark.parametrize("window, words", [
    ("failed", "(the step failed: flodl launch: the launcher ended before its join window opened"),
    ({"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}, "(the step was skipped)"),
    (None, "(nothing is registered for it: the step did not run)"),
    ({"changed": True, "msg": "join window open"}, "(the step registered no launcher)"),
])
def test_no_agent_is_started_without_an_open_window(tmp_path, window, words):
    case = _case(tmp_path, "start", 0, launch_host="ctl-box")
    case.args["launch_host"] = "ctl-box"
    if window is None:
        del case.task_vars["flodl_launch_window"]
    else:
        case.task_vars["flodl_launch_window"] = _open_step_that_failed(tmp_path) if window == "failed" else window
    action = make_action(ACTION, case)
    ran: list[str] = []
    action._low_level_execute_command = lambda script, **_kw: ran.append(script) or {"rc": 0, "stdout": ""}
    out = action.run(task_vars=case.task_vars)
    assert ran == []  # the worker was not even contacted
    assert out["failed"] is True and "pid" not in out, out
    assert out["msg"].startswith("gpu-b: its walk-in agent was not started: the launcher's join window on ctl-box "
                                 "did not open "), out["msg"]
    assert words in out["msg"] and "launch step that opens the window (registered as flodl_launch_window)" in out["msg"]


class Untouchable(dict):
    """Another worker's entry: reading it in any way (a copy, a template, a lookup) fails the test."""

    def _refuse(self, *_args, **_kwargs):
        raise AssertionError("another worker's entry was read")

    __getitem__ = __iter__ = __len__ = __contains__ = items = keys = values = get = copy = _refuse
    __reduce__ = __reduce_ex__ = __deepcopy__ = _refuse


def test_each_worker_reads_only_its_own_entries_of_a_500_worker_run(tmp_path):
    """The results hold every worker's agent and the launcher's view of every host: each worker's task reads its own
    (here every other entry fails when read, and holds a template that would fail if rendered)."""
    poison = {"host": "{{ undefined_variable_of_another_worker }}", "env": {"X": "{{ lookup('pipe', 'false') }}"}}
    names = [f"w{i:03d}" for i in range(500)]
    case = _case(tmp_path, "start", 0)
    agents = case.task_vars["flodl_launch_env"]["walk_in"]["agents"]
    agents.update({n: Untouchable(poison) for n in names})
    joined = {n: Untouchable(a=[0]) for n in names}
    for stage in ("start", "collect"):
        started = case.task_vars.get("flodl_agent_start")
        done = _case(tmp_path, stage, 0, flodl_agent_start=started, flodl_launch_follow={
            "rc": 0, "view": {"joined": {**joined, "gpu-b": [7]}, "failed_ranks": joined, "quorum_failed": False}})
        done.task_vars["flodl_launch_env"]["walk_in"]["agents"] = agents
        out = run_case(ACTION, done)
        assert not out.get("failed"), out
        case.task_vars["flodl_agent_start"] = out
        if stage == "start":
            _agent_ended()
    assert out["per_host"]["gpu-b"]["status"] == "changed" and "ranks [7] ran" in out["msg"], out
