"""An ``ansible-playbook`` (or other Ansible CLI) run in the background, its output collected as it comes.

For the tests that act while a play runs (a signal, a kill, a second run): start it, wait for a sign in
its output, then stop its whole session.
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from typing import Callable

import pytest
from conftest import ansible_bin


def as_terminal_job() -> None:
    """``preexec_fn``: the hangup, interrupt and quit signals as a job started from a terminal has them, whatever
    this pytest inherited. Under ``nohup`` SIGHUP is ignored, and an ignored signal stays ignored across exec:
    the run would then outlive the hangup a test sends it."""
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)


def stream(collection, argv: list[str], **env: str) -> tuple[subprocess.Popen, list[str], threading.Thread]:
    """``argv[0]`` (an Ansible CLI of this venv) in a session of its own; its output lines, read by a thread."""
    proc = subprocess.Popen([ansible_bin(argv[0]), *argv[1:]], env=collection.env(PYTHONUNBUFFERED="1", **env),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=as_terminal_job)
    lines: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in iter(proc.stdout.readline, ""):
            lines.append(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    return proc, lines, reader


def wait_for(lines: list[str], proc: subprocess.Popen, what: Callable[[str], bool], timeout: float, why: str, *,
             poll: float = 0.2, while_running: bool = False) -> None:
    """Until ``what(output so far)``; fails the test on timeout, or when the run ends first.

    An ended run's last lines still count (the reader may lag), unless ``while_running``: the sign must come
    while the run still runs (the test is about to signal it).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if what("".join(lines)):
            return
        if proc.poll() is not None:
            time.sleep(0 if while_running else 0.5)
            if not while_running and what("".join(lines)):
                return
            pytest.fail(f"ansible-playbook ended (rc={proc.returncode}) before {why}:\n" + "".join(lines))
        time.sleep(poll)
    pytest.fail(f"timed out waiting for {why}:\n" + "".join(lines))


def kill_session(proc: subprocess.Popen) -> None:
    """SIGKILL the run's whole process group (it leads its session), unless it has ended."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
