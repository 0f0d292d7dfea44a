"""A detached run records its exit code; status turns it into a verdict (run with the real /bin/sh)."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils import detached as dt
from ansible_collections.flodl.cluster.plugins.module_utils.remote_launch import END_MARK


def start(tmp_path, command: str) -> tuple[int, str]:
    log = str(tmp_path / "logs" / "launch-x.log")
    script = dt.detach_script(str(tmp_path), command, log)
    proc = subprocess.run(["/bin/sh", "-c", script], input=f"FLODL_T=1\n{END_MARK}\n".encode(), capture_output=True,
                          timeout=10, check=True)
    pid = dt.parse_pid(proc.stdout.decode())
    assert pid is not None
    # The pid is printed before the child has run setsid: until then, its session (what stop signals) is not there.
    deadline = time.monotonic() + 10
    while _pgid(pid) not in (pid, None) and time.monotonic() < deadline:
        time.sleep(0.005)
    return pid, log


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None  # already ended (a short command)


def status(pid: int, log: str) -> str:
    return subprocess.run(["/bin/sh", "-c", dt.status_script(pid, log, 5)], capture_output=True, text=True,
                          timeout=10, check=True).stdout


def settle(pid: int, log: str) -> str:
    deadline = time.monotonic() + 10
    while True:
        out = status(pid, log)
        if dt.parse_status(out)[0] == "0" or time.monotonic() > deadline:
            return out
        time.sleep(0.05)


@pytest.mark.parametrize("command, state, rc", [
    ("echo hello $FLODL_T; exit 3", "failed", 3),
    ("echo hello $FLODL_T", "succeeded", 0),
])
def test_the_exit_code_is_recorded_and_judged(tmp_path, command, state, rc):
    pid, log = start(tmp_path, command)
    out = settle(pid, log)
    alive, tail = dt.parse_status(out)
    assert alive == "0" and tail == ["hello 1"]
    verdict = dt.run_state(alive, dt.parse_exit(out))
    assert (verdict.state, verdict.rc, verdict.failed) == (state, rc, rc != 0)
    assert f"exit code {rc}" in verdict.summary


def test_a_stopped_run_records_no_code_and_fails(tmp_path):
    pid, log = start(tmp_path, "sleep 30")
    out = status(pid, log)
    assert dt.run_state(dt.parse_status(out)[0], dt.parse_exit(out)).state == "running"
    stop = subprocess.run(["/bin/sh", "-c", dt.stop_script(pid, 2)], capture_output=True, text=True, timeout=20,
                          check=False)
    assert dt.parse_status(stop.stdout)[0] == "stopped"
    out = settle(pid, log)
    verdict = dt.run_state(dt.parse_status(out)[0], dt.parse_exit(out))
    assert (verdict.state, verdict.rc, verdict.failed) == ("stopped", None, True)


def test_an_unreaped_launcher_counts_as_ended(tmp_path):
    """A container whose PID 1 never reaps: the ended launcher stays a zombie, which kill -0 still finds."""
    zombie = subprocess.Popen(["/bin/sh", "-c", "exit 0"])  # our child: a zombie until we wait for it
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert subprocess.run(["kill", "-0", str(zombie.pid)], check=False).returncode == 0
        assert dt.parse_status(status(zombie.pid, str(tmp_path / "launch-x.log")))[0] == "0"
    finally:
        zombie.wait()


def test_a_live_launcher_is_running(tmp_path):
    live = subprocess.Popen(["sleep", "30"])
    try:
        assert dt.parse_status(status(live.pid, str(tmp_path / "launch-x.log")))[0] == "1"
    finally:
        live.kill()
        live.wait()


def test_an_unanswered_status_fails():
    assert dt.run_state(None, None, "ssh: connect timed out") == dt.RunState(
        "unknown", None, True, "launcher state unknown (ssh: connect timed out)")


@pytest.mark.parametrize("text, rc", [("0", 0), ("137", 137), ("", None), ("x1", None), ("12345", None)])
def test_only_a_plain_code_is_read(text, rc):
    assert dt.parse_exit(f"__FLODL_ALIVE__=0\n{dt.EXIT_MARK}={text}\nlog line\n") == rc


RID = "0123456789abcdef"


@pytest.mark.parametrize("given, var, artifact, want", [
    (RID, None, None, (RID, None)),
    (None, RID, {"run_id": "f" * 16}, (RID, None)),
    (None, "", {"run_id": RID}, (RID, None)),          # a blank survey answer falls through to the artifact
    (None, None, {"run_id": ""}, (None, None)),        # nothing named: the latest run
    (None, None, "not a map", (None, None)),
])
def test_the_run_comes_from_the_task_the_variable_or_the_start_jobs_artifact(given, var, artifact, want):
    assert dt.requested_run_id(given, var, artifact) == want


def test_a_run_id_that_is_no_run_id_is_refused():
    run_id, problem = dt.requested_run_id(None, None, {"run_id": "../../etc"})
    assert run_id is None and "flodl_launch.run_id is not a run id" in problem


def test_under_umask_000_the_log_directory_log_and_exit_code_are_private(tmp_path):
    old = os.umask(0)
    try:
        pid, log = start(tmp_path, "echo out")
    finally:
        os.umask(old)
    settle(pid, log)
    modes = [os.lstat(p).st_mode & 0o777 for p in (os.path.dirname(log), log, dt.exit_file(log))]
    assert modes == [0o750, 0o640, 0o640]
