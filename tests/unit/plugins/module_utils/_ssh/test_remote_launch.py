"""The launch on flodl_launch_host: env on stdin, wrapper script, run for real under sh."""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_launch import (
    RemoteLaunchError,
    env_payload,
    wrapper_script,
)


def test_payload_is_sorted_lines_then_the_end_mark():
    assert env_payload({"B": "2", "A": "x y'z"}) == b"A=x y'z\nB=2\n__FLODL_ENV_END__\n"


@pytest.mark.parametrize("env", [{"A": "1\n2"}, {"A": "\0"}, {"1A": "x"}, {"A-B": "x"}])
def test_what_cannot_travel_as_a_line_is_refused(env):
    with pytest.raises(RemoteLaunchError):
        env_payload(env)


def test_wrapper_exports_the_env_runs_in_cwd_and_returns_the_exit_code(tmp_path):
    marker = tmp_path / "hostile'$(touch x)"
    script = wrapper_script(str(tmp_path), "printf '%s|%s|' \"$FLODL_X\" \"$(pwd)\"; exit 7", 2)
    # stdin stays open, as ssh keeps it: closing it means "stop".
    proc = subprocess.Popen(["sh", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(env_payload({"FLODL_X": "a b $HOME 'q'"}))
    proc.stdin.flush()
    out = proc.stdout.read()
    assert proc.wait(timeout=20) == 7
    proc.stdin.close()
    assert out.decode() == f"a b $HOME 'q'|{tmp_path}|"
    assert not marker.exists()


def test_wrapper_refuses_a_missing_directory(tmp_path):
    proc = subprocess.run(["sh", "-c", wrapper_script(str(tmp_path / "nope"), "true", 1)],
                          input=env_payload({}), capture_output=True, timeout=20, check=False)
    assert proc.returncode == 97
    assert b"no directory" in proc.stderr


def test_closing_stdin_stops_the_whole_session(tmp_path):
    pidfile = tmp_path / "pids"
    command = f"sleep 300 & echo $! > {pidfile}; sleep 300"
    proc = subprocess.Popen(["sh", "-c", wrapper_script(str(tmp_path), command, 1)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdin is not None
    proc.stdin.write(env_payload({}))
    proc.stdin.flush()
    deadline = time.monotonic() + 10
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child = int(pidfile.read_text())
    proc.stdin.close()  # the controller side went away
    assert proc.wait(timeout=15) != 0
    deadline = time.monotonic() + 5
    while True:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "the background child survived the stop"
        time.sleep(0.05)


def test_a_launch_timeout_stops_the_command_and_says_so(tmp_path):
    from ansible_collections.flodl.cluster.plugins.plugin_utils._launch.launcher_process import run_streamed

    class Log:
        def __init__(self):
            self.data = b""

        def write(self, data):
            self.data += data

    log, shown = Log(), []
    start = time.monotonic()
    outcome = run_streamed(["sh", "-c", "echo started; sleep 300 & wait"], str(tmp_path), dict(os.environ), log,
                           shown.append, grace=1, timeout=1.5)
    assert outcome.timed_out is True
    assert time.monotonic() - start < 10
    assert outcome.rc != 0 and shown == ["started"]
    quick = run_streamed(["sh", "-c", "exit 3"], str(tmp_path), dict(os.environ), log, shown.append, grace=1, timeout=30)
    assert quick.timed_out is False and quick.rc == 3


@pytest.mark.parametrize("caller, seen", [(0o000, "0022"), (0o077, "0077")])
def test_the_command_never_runs_under_a_umask_that_lets_group_or_world_write(tmp_path, caller, seen):
    old = os.umask(caller)
    try:
        proc = subprocess.Popen(["sh", "-c", wrapper_script(str(tmp_path), "umask", 1)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE)
    finally:
        os.umask(old)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(env_payload({}))
    proc.stdin.flush()  # kept open, as ssh keeps it
    out = proc.stdout.read()
    assert proc.wait(timeout=20) == 0
    proc.stdin.close()
    assert out.decode().split() == [seen]
