"""A detached run records its exit code; status turns it into a verdict (run with the real /bin/sh)."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._launch import detached as dt
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_launch import END_MARK

RID = "0123456789abcdef"


def start(tmp_path, command: str) -> dt.DetachedRun:
    log = str(tmp_path / "logs" / f"launch-x-{RID}.log")
    script = dt.detach_script(str(tmp_path), command, log)
    proc = subprocess.run(["/bin/sh", "-c", script], input=f"FLODL_T=1\n{END_MARK}\n".encode(), capture_output=True,
                          timeout=10, check=True)
    pid = dt.parse_pid(proc.stdout.decode())
    assert pid is not None
    # The pid is printed before the child has run setsid: until then, its session (what stop signals) is not there.
    deadline = time.monotonic() + 10
    while _pgid(pid) not in (pid, None) and time.monotonic() < deadline:
        time.sleep(0.005)
    return dt.new_record(RID, "localhost", pid, log, command, dt.parse_start(proc.stdout.decode()))


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None  # already ended (a short command)


def status(run: dt.DetachedRun) -> str:
    return subprocess.run(["/bin/sh", "-c", dt.status_script(run, 5)], capture_output=True, text=True,
                          timeout=10, check=True).stdout


def settle(run: dt.DetachedRun) -> str:
    deadline = time.monotonic() + 10
    while True:
        out = status(run)
        if dt.parse_status(out)[0] == "0" or time.monotonic() > deadline:
            return out
        time.sleep(0.05)


@pytest.mark.parametrize("command, state, rc", [
    ("echo hello $FLODL_T; exit 3", "failed", 3),
    ("echo hello $FLODL_T", "succeeded", 0),
])
def test_the_exit_code_is_recorded_and_judged(tmp_path, command, state, rc):
    run = start(tmp_path, command)
    out = settle(run)
    alive, tail = dt.parse_status(out)
    assert alive == "0" and tail == ["hello 1"]
    verdict = dt.run_state(alive, dt.parse_exit(out))
    assert (verdict.state, verdict.rc, verdict.failed) == (state, rc, rc != 0)
    assert f"exit code {rc}" in verdict.summary


def test_a_stopped_run_records_no_code_and_fails(tmp_path):
    run = start(tmp_path, "sleep 30")
    assert run.proc_start.isdigit()  # the launch host's own start time, for the proof
    out = status(run)
    assert dt.parse_proof(out) == "ok"
    assert dt.run_state(dt.parse_status(out)[0], dt.parse_exit(out), proof=dt.parse_proof(out)).state == "running"
    stop = subprocess.run(["/bin/sh", "-c", dt.stop_script(run, 2)], capture_output=True, text=True, timeout=20,
                          check=False)
    assert dt.parse_status(stop.stdout)[0] == "stopped"
    out = settle(run)
    verdict = dt.run_state(dt.parse_status(out)[0], dt.parse_exit(out), proof=dt.parse_proof(out))
    assert (verdict.state, verdict.rc, verdict.failed) == ("stopped", None, True)


def test_the_stop_does_not_wait_out_its_grace_for_an_unreaped_launcher(tmp_path):
    """A launcher that ends at its TERM but is never reaped (a container's PID 1 that never reaps): a zombie is
    no member of the group, so the stop returns at once instead of after the grace (kill -0 still finds it)."""
    log = str(tmp_path / f"launch-x-{RID}.log")
    # A session leader whose command line holds the run's exit file, as the recording wrapper's does.
    leader = subprocess.Popen(["/bin/sh", "-c", "sleep 30 & wait", "sh", dt.exit_file(log)], start_new_session=True)
    try:
        start = Path(f"/proc/{leader.pid}/stat").read_text().rsplit(") ", 1)[1].split()[19]
        run = dt.new_record(RID, "localhost", leader.pid, log, "sleep 30", start)
        began = time.monotonic()
        stop = subprocess.run(["/bin/sh", "-c", dt.stop_script(run, 5)], capture_output=True, text=True,
                              timeout=20, check=False)
        took = time.monotonic() - began
        state = Path(f"/proc/{leader.pid}/stat").read_text().rsplit(") ", 1)[1][0]
    finally:
        leader.wait(timeout=10)
    assert dt.parse_proof(stop.stdout) == "ok" and dt.parse_status(stop.stdout)[0] == "stopped"
    assert state == "Z" and took < 3.5, (state, took)


def test_an_unreaped_launcher_counts_as_ended(tmp_path):
    """A container whose PID 1 never reaps: the ended launcher stays a zombie, which kill -0 still finds."""
    zombie = subprocess.Popen(["/bin/sh", "-c", "exit 0"])  # our child: a zombie until we wait for it
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert subprocess.run(["kill", "-0", str(zombie.pid)], check=False).returncode == 0
        out = status(_record(zombie.pid, tmp_path))
        assert (dt.parse_status(out)[0], dt.parse_proof(out)) == ("0", "gone")
    finally:
        zombie.wait()


def _record(pid: int, tmp_path, proc_start: str = "") -> dt.DetachedRun:
    return dt.new_record(RID, "localhost", pid, str(tmp_path / "logs" / f"launch-x-{RID}.log"), "train", proc_start)


def _live(argv: list[str]) -> subprocess.Popen:
    proc = subprocess.Popen(argv)
    if "setsid" not in argv:
        return proc  # never a session leader: nothing to wait for (the wait below would last its whole 10 s)
    deadline = time.monotonic() + 10
    while _pgid(proc.pid) != proc.pid and time.monotonic() < deadline:  # setsid has run
        time.sleep(0.005)
    return proc


@pytest.mark.parametrize("how, word", [
    ("unrelated", "session"),   # any process: not the leader of a session of its own
    ("session", "command"),     # a session leader, but not the recording wrapper of this run's log
    ("other_user", "user"),     # the wrapper's command line, as another user
    ("wrong_start", "start"),   # the wrapper's command line, started at another time than recorded
])
def test_a_live_process_that_is_not_the_runs_launcher_is_never_running_nor_signalled(tmp_path, how, word):
    """A forged record (or a pid reused after the run): status reports it as not this run's, stop leaves it be."""
    exit_path = dt.exit_file(str(tmp_path / "logs" / f"launch-x-{RID}.log"))
    argv = {
        "unrelated": ["sleep", "30"],
        "session": ["setsid", "sleep", "30"],
        "other_user": ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                       "setsid", "/bin/sh", "-c", "sleep 30", "sh", exit_path],
        "wrong_start": ["setsid", "/bin/sh", "-c", "sleep 30", "sh", exit_path],
    }[how]
    live = _live(argv)
    try:
        run = _record(live.pid, tmp_path, "1" if how == "wrong_start" else "")
        out = status(run)
        assert (dt.parse_status(out)[0], dt.parse_proof(out)) == ("0", word)
        verdict = dt.run_state("0", dt.parse_exit(out), proof=word)
        assert (verdict.state, verdict.failed) == ("unproven", True)
        assert "not this run's launcher" in verdict.summary and "nothing was signalled" in verdict.summary
        stop = subprocess.run(["/bin/sh", "-c", dt.stop_script(run, 1)], capture_output=True, text=True,
                              timeout=20, check=False)
        assert dt.parse_status(stop.stdout)[0] == "0" and dt.parse_proof(stop.stdout) == word
        assert live.poll() is None  # still running: nothing was signalled
    finally:
        live.kill()
        live.wait()


@pytest.mark.parametrize("pid", [1, 0, -1])
def test_pid_one_and_below_are_never_scripted(tmp_path, pid):
    run = dt.DetachedRun(RID, "localhost", pid, str(tmp_path / "x.log"), "train", 0.0)
    for script in (lambda: dt.stop_script(run, 1), lambda: dt.status_script(run, 5)):
        with pytest.raises(ValueError, match="never a launcher"):
            script()


@pytest.mark.parametrize("pid", [1, 0, -1, True, "7", 2**31])
def test_a_record_with_pid_one_or_below_does_not_parse(pid):
    body = {"format": dt.FORMAT, "run_id": RID, "launch_host": "localhost", "pid": pid, "log": "/x.log",
            "command": "train", "started": 1.0}
    run, problem = dt.parse_record(json.dumps(body).encode())
    assert run is None and "pid" in problem


def test_a_record_without_a_start_time_still_parses_and_a_bad_one_does_not():
    body = {"format": dt.FORMAT, "run_id": RID, "launch_host": "localhost", "pid": 42, "log": "/x.log",
            "command": "train", "started": 1.0}
    assert dt.parse_record(json.dumps(body).encode())[0].proc_start == ""
    body["proc_start"] = "12; kill -9 -1"
    assert "proc_start" in dt.parse_record(json.dumps(body).encode())[1]


def test_an_unanswered_status_fails():
    assert dt.run_state(None, None, "ssh: connect timed out") == dt.RunState(
        "unknown", None, True, "launcher state unknown (ssh: connect timed out)")


@pytest.mark.parametrize("text, rc", [("0", 0), ("137", 137), ("", None), ("x1", None), ("12345", None)])
def test_only_a_plain_code_is_read(text, rc):
    assert dt.parse_exit(f"__FLODL_ALIVE__=0\n{dt.EXIT_MARK}={text}\nlog line\n") == rc


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
        run = start(tmp_path, "echo out")
    finally:
        os.umask(old)
    settle(run)
    modes = [os.lstat(p).st_mode & 0o777 for p in (os.path.dirname(run.log), run.log, dt.exit_file(run.log))]
    assert modes == [0o750, 0o640, 0o640]


def _body(**over) -> dict:
    return {"format": dt.FORMAT, "run_id": RID, "launch_host": "localhost", "pid": 42, "log": "/x.log",
            "command": "train", "started": 1.0, **over}


@pytest.mark.parametrize("data, problem", [
    (b" " * (dt.MAX_RECORD_BYTES + 1), f"the run record is {dt.MAX_RECORD_BYTES + 1} bytes, over"),
    (b"\xff\xfe{}", "the run record (4 bytes) is not JSON"),
    (b'{"format": ', "is not JSON"),
    (b"[1, 2]", "the file is not a flodl detached-run record"),
    (json.dumps(_body(format="flodl-detached/0")).encode(), "not a flodl detached-run record"),
    (json.dumps(_body(started=True)).encode(), "the run record's started is not a time"),
    (json.dumps(_body(started="yesterday")).encode(), "started is not a time"),
    (json.dumps(_body(launch_host="")).encode(), "the run record's launch_host is not a one-line string"),
    (json.dumps(_body(log="/x.log\nrm -rf ~")).encode(), "the run record's log is not a one-line string"),
    (json.dumps({k: v for k, v in _body().items() if k != "command"}).encode(), "command is not a one-line"),
    (json.dumps(_body(run_id="../../etc/passwd")).encode(), "the run record's run_id is not a run id"),
    (json.dumps(_body(run_id=RID.upper())).encode(), "run_id is not a run id"),
])
def test_a_forged_or_broken_record_does_not_parse_and_its_problem_shows_no_content(data, problem):
    run, found = dt.parse_record(data)
    assert run is None and problem in found
    assert "rm -rf" not in found and "passwd" not in found


def test_a_well_formed_record_parses_to_what_it_says():
    run, problem = dt.parse_record(dt.new_record(RID, "gpu-b", 4242, "/l/x.log", "train", "77").to_json().encode())
    assert problem is None
    assert (run.run_id, run.launch_host, run.pid, run.log, run.command, run.proc_start) == (
        RID, "gpu-b", 4242, "/l/x.log", "train", "77")


@pytest.mark.parametrize("run_id", ["", "0123456789ABCDEF", "0123456789abcde", "../0123456789abcdef", RID + "0"])
def test_a_record_is_never_named_after_what_is_not_a_run_id(run_id):
    with pytest.raises(ValueError, match="16 lowercase hex"):
        dt.record_name(run_id)
    assert dt.record_name(RID) == f"{RID}.json"


def test_output_without_the_marks_gives_no_pid_no_start_and_no_exit_code():
    out = "ssh: warning: something\nlog line\n"
    assert (dt.parse_pid(out), dt.parse_start(out), dt.parse_exit(out), dt.parse_proof(out)) == (None, "", None, None)
    assert dt.parse_pid(f"{dt.PID_MARK}=12x\n") is None
    assert dt.parse_start(f"{dt.START_MARK}=1; reboot\n") == ""


def test_the_latest_run_is_the_last_started_and_none_without_records():
    old = dt.DetachedRun("a" * 16, "h", 10, "/a.log", "train", 100.0)
    new = dt.DetachedRun("b" * 16, "h", 11, "/b.log", "train", 200.0)
    assert dt.latest({old.run_id: old, new.run_id: new}) is new
    assert dt.latest({new.run_id: new, old.run_id: old}) is new
    assert dt.latest({}) is None
