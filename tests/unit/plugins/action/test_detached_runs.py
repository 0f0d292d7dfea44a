"""Detached runs for real, on this machine as the launch host: started, reported by `status`, stopped.

Each run is a real detached session (``setsid``) started by detached_io; `status` is the real
launch_status action on the recorded case, asking /bin/sh here. The play is limited to the controller's
own worker, so `status` asks no remote worker how many ranks run.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import detached_io

from .conftest import make_action

ACTION = "launch_status"


def status_case(case: Any) -> Any:
    loaded = case("no_detached_run")
    loaded.task_vars["ansible_play_hosts_all"] = ["ctl"]  # as `--limit ctl`: no ssh to gpu-b, gpu-c
    return loaded


def gone(pid: int) -> None:
    """A session leader stays a zombie (alive to ``kill -0``) until its reaper, PID 1 here, collects it."""
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.05)


def start(loaded: Any, tmp_path: Path, command: str, **over: Any) -> dict[str, Any]:
    args = {"launch_host": "localhost", "env": {"FLODL_X": "one"}, "chdir": str(tmp_path), "command": command,
            "shell": "/bin/sh", "forward_agent": False, "project_dir": None}
    args.update(over)
    return detached_io.start_detached(make_action(ACTION, loaded), loaded.task_vars, {}, args, str(tmp_path / "logs"))


def wait_for(path: str, text: str) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if os.path.isfile(path) and text in Path(path).read_text(encoding="utf-8"):
            return
        time.sleep(0.02)
    raise AssertionError(f"{text!r} never reached {path}")


@pytest.fixture
def stop_later():
    pids: list[int] = []
    yield pids.append
    for pid in pids:  # a failed assertion leaves no session behind
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


def test_a_running_run_is_reported_then_stopped_by_its_session(case, run, tmp_path, stop_later):
    loaded = status_case(case)
    started = start(loaded, tmp_path, "echo started $FLODL_X; exec sleep 30")
    assert started["changed"] is True and started["detached"] is True, started.get("msg")
    stop_later(started["pid"])
    assert f"detached run {started['run_id']} started on localhost (pid {started['pid']})" in started["msg"]
    assert Path(started["record"]).is_file()
    wait_for(started["log_file"], "started one")

    status = run(loaded)
    assert (status["state"], status["launcher"], status["failed"]) == ("running", "running", False)
    assert status["run_id"] == started["run_id"] and "started one" in status["log_tail"]
    assert status["per_host"] == {}

    action = make_action(ACTION, loaded)
    stopped = detached_io.stop_detached(action, loaded.task_vars, str(tmp_path), grace=1, forward_agent=False)
    assert stopped == ([f"stopped the launcher of detached run {started['run_id']} on localhost (pid {started['pid']})"],
                       [])
    gone(started["pid"])
    after = run(loaded)
    assert after["state"] == "stopped" and after["failed"] is True and after["launcher"] == "ended"
    # Nothing left to stop.
    assert detached_io.stop_detached(action, loaded.task_vars, str(tmp_path), forward_agent=False) == ([], [])


def test_a_run_that_exits_non_zero_fails_status_with_its_code(case, run, tmp_path, monkeypatch, stop_later):
    monkeypatch.setattr(run_module(), "POLL_SECONDS", 0.05)
    loaded = status_case(case)
    started = start(loaded, tmp_path, "echo bye; sleep 0.2; exit 3")
    stop_later(started["pid"])
    loaded.args = {"run_id": started["run_id"], "wait_seconds": 5, "lines": 1}
    status = run(loaded)
    assert (status["state"], status["rc"], status["failed"]) == ("failed", 3, True)
    assert status["log_tail"] == ["bye"] and status["msg"] == f"run {started['run_id']}: launcher ended, exit code 3"


def test_a_run_still_running_after_the_wait_fails_the_wait(case, run, tmp_path, monkeypatch, stop_later):
    monkeypatch.setattr(run_module(), "POLL_SECONDS", 0.05)
    loaded = status_case(case)
    started = start(loaded, tmp_path, "exec sleep 30")
    stop_later(started["pid"])
    loaded.args = {"wait_seconds": 0.2}
    status = run(loaded)
    assert status["state"] == "running" and status["failed"] is True
    assert status["msg"].endswith("launcher running after waiting 0.2s for it to end")


@pytest.mark.parametrize("run_id, words", [
    ("0123456789abcdef", "0123456789abcdef.json: No such file or directory"),
    ("not-a-run", "run_id is not a run id (16 lowercase hex characters"),
])
def test_status_names_why_there_is_no_run_to_report_on(case, run, run_id, words):
    loaded = status_case(case)
    loaded.args = {"run_id": run_id}
    out = run(loaded)
    assert out["failed"] is True and any(words in p for p in out["problems"]), out["problems"]


def test_a_launch_that_cannot_start_says_why_on_which_host(case, tmp_path):
    loaded = status_case(case)
    out = start(loaded, tmp_path, "true", chdir=str(tmp_path / "missing"))
    assert out["msg"].startswith("flodl launch: could not start the detached run on localhost: ")
    assert out["failed"] is True and str(tmp_path / "missing") in out["msg"]  # the shell's own words
    bad = start(loaded, tmp_path, "true", env={"X": "a\nb"})
    assert bad["failed"] is True and "flodl launch on localhost: environment value of X holds a newline" in bad["msg"]


def test_a_broken_record_is_named_and_the_latest_good_one_is_found(tmp_path):
    runs = Path(detached_io.runs_dir(str(tmp_path)))
    runs.mkdir(parents=True)
    (runs / "ffffffffffffffff.json").write_text("{not json", encoding="utf-8")
    run, why, problems = detached_io.find_run(str(tmp_path), None)
    assert run is None and why.startswith(str(runs / "ffffffffffffffff.json: ")) and problems == [why]


def test_a_record_whose_pid_is_not_its_launcher_is_reported_and_left_alone(case, run, tmp_path, stop_later):
    """A forged record naming a live session leader of this machine: status and teardown leave it be."""
    import subprocess

    loaded = status_case(case)
    started = start(loaded, tmp_path, "exec sleep 30")
    stop_later(started["pid"])
    other = subprocess.Popen(["setsid", "sleep", "30"])
    stop_later(other.pid)
    record = Path(started["record"])
    record.write_text(record.read_text(encoding="utf-8").replace(f'"pid": {started["pid"]}', f'"pid": {other.pid}'),
                      encoding="utf-8")
    status = run(loaded)
    assert (status["state"], status["launcher"], status["failed"]) == ("unproven", "not this run's", True)
    action = make_action(ACTION, loaded)
    stopped, problems = detached_io.stop_detached(action, loaded.task_vars, str(tmp_path), grace=1,
                                                  forward_agent=False)
    assert stopped == [] and len(problems) == 1 and f"(pid {other.pid}): the process at the record's pid" in problems[0]
    assert other.poll() is None and os.path.exists(f"/proc/{started['pid']}")  # neither was signalled


def test_a_record_naming_a_host_outside_the_inventory_is_refused_before_contact(case, run, tmp_path):
    loaded = status_case(case)
    started = start(loaded, tmp_path, "true")
    record = Path(started["record"])
    record.write_text(record.read_text(encoding="utf-8").replace('"launch_host": "localhost"',
                                                                 '"launch_host": "nowhere"'), encoding="utf-8")
    status = run(loaded)
    assert status["failed"] is True and "names launch host 'nowhere'" in status["problems"][0]
    stopped, problems = detached_io.stop_detached(make_action(ACTION, loaded), loaded.task_vars, str(tmp_path),
                                                  forward_agent=False)
    assert stopped == [] and "neither this machine nor an inventory host" in problems[0]


def run_module():
    import importlib

    return importlib.import_module("ansible_collections.flodl.cluster.plugins.action.launch_status")
