"""How a launch command stops (launcher_process): an interrupt, a timeout, a closed stdin, a group that
ignores SIGTERM. Real commands in their own process groups; the interrupt is a real SIGTERM to this
process, which run_streamed turns into a clean stop. Each test puts this process's handlers back.
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest

from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import launcher_process as lp

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Log:
    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data


@pytest.fixture(autouse=True)
def handlers():
    saved = {s: signal.getsignal(s) for s in SIGNALS}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def interrupt_after(seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    return timer


def run(script: str, tmp_path, **kw) -> tuple[lp.RunOutcome, Log]:
    log = Log()
    outcome = lp.run_streamed(["sh", "-c", script], str(tmp_path), dict(os.environ), log, lambda _b: None,
                              grace=kw.pop("grace", 1.0), batch_seconds=0.05, **kw)
    return outcome, log


def test_a_sigterm_stops_the_command_group_and_is_handed_back(tmp_path):
    interrupt_after(0.3)
    outcome, log = run("echo started; exec sleep 30", tmp_path)
    assert outcome.interrupted == signal.SIGTERM and outcome.stop_note == "stopped by SIGTERM"
    assert outcome.rc == -signal.SIGTERM and outcome.tail == ["started"] and log.data.endswith(b"# exit -15\n")
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN  # repeats ignored until handed back
    called: list[int] = []
    outcome.previous_handler = lambda signum, _frame: called.append(signum)
    lp.hand_back_signal(outcome)
    assert called == [signal.SIGTERM]


def test_an_interrupted_remote_launch_closes_stdin_and_lets_the_far_side_stop(tmp_path):
    # The interrupt once the far side has read its stdin (a fixed delay lost that race on a loaded machine).
    def interrupt_once_read(line: str) -> None:
        if "got env" in line:
            os.kill(os.getpid(), signal.SIGTERM)

    outcome, _log = run("read line; echo got $line; cat >/dev/null; echo closed", tmp_path, stdin_data=b"env\n",
                        on_line=interrupt_once_read)
    assert outcome.interrupted == signal.SIGTERM
    assert outcome.stop_note == "the launch host stopped its session when stdin closed" and outcome.rc == 0


def test_the_launch_timeout_stops_the_command_and_says_so(tmp_path):
    outcome, _log = run("exec sleep 30", tmp_path, timeout=0.3)
    assert outcome.timed_out is True and outcome.interrupted is None and outcome.rc == -signal.SIGTERM
    remote, _log = run("cat >/dev/null", tmp_path, timeout=0.3, stdin_data=b"x\n")
    assert remote.timed_out is True and remote.rc == 0  # the far side ended when its stdin closed


def test_a_group_ignoring_sigterm_is_killed_after_the_grace(tmp_path):
    proc = subprocess.Popen(["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"],
                            stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        start = time.monotonic()
        assert lp.stop_group(proc, 0.3) == "SIGKILL after 0.3s"
        assert proc.returncode == -signal.SIGKILL and time.monotonic() - start < 3
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_group_already_gone_is_said_so():
    proc = subprocess.Popen(["true"], start_new_session=True)
    proc.wait()
    assert lp.stop_group(proc, 5.0) == "already gone"


def test_signal_names_are_read_for_humans():
    assert lp.signal_name(signal.SIGTERM) == "SIGTERM" and lp.signal_name(999) == "signal 999"
    lp.hand_back_signal(lp.RunOutcome(rc=0, seconds=0.0))  # not interrupted: nothing to hand back
