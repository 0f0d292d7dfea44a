"""lock_holder.hold in this process, on real processes: a stand-in session (python -c) and a stand-in
ansible-playbook (sleep) stopped by its pid.

hold() turns its stdout into /dev/null once the end sentinel is copied: the test keeps fd 1 and
restores it, and hands hold a byte buffer as sys.stdout.
"""
from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ansible_collections.flodl.cluster.plugins.plugin_utils._proc import lock_holder

# The launch host's session: its answer, the sentinel, more output nobody reads, then it holds the lock
# until its stdin closes, and says it released it.
SESSION = (
    "import sys; w = sys.stdout.write; w('identity=gpu-a\\nEND\\n' + 'after\\n' * 5000); sys.stdout.flush(); "
    "sys.stdin.read(); open(sys.argv[1], 'w').write('released'); sys.exit(5)"
)


class Out:
    def __init__(self) -> None:
        self.buffer = io.BytesIO()


@pytest.fixture
def held(monkeypatch):
    """``held(argv, playbook)``: hold() run with fd 1 kept; (rc, what it copied)."""
    monkeypatch.setattr(lock_holder, "POLL_SECONDS", 0.02)

    def run(argv: list[str], playbook_pid: int) -> tuple[int, bytes]:
        out = Out()
        monkeypatch.setattr(sys, "stdout", out)
        saved = os.dup(1)
        try:
            rc = lock_holder.hold(playbook_pid, b"END", argv)
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            monkeypatch.undo()
        return rc, out.buffer.getvalue()

    return run


def end_later(proc: subprocess.Popen, seconds: float) -> threading.Timer:
    def end() -> None:
        proc.kill()
        proc.wait()  # reaped: a zombie would still answer kill -0
    timer = threading.Timer(seconds, end)
    timer.start()
    return timer


def test_the_session_holds_until_ansible_playbook_ends_then_releases(held, tmp_path):
    playbook = subprocess.Popen(["sleep", "30"])
    timer = end_later(playbook, 0.3)
    marker = tmp_path / "released"
    try:
        rc, copied = held([sys.executable, "-c", SESSION, str(marker)], playbook.pid)
    finally:
        timer.join()
    assert copied == b"identity=gpu-a\nEND\n"  # the answer only, up to the sentinel
    assert rc == 5 and marker.read_text(encoding="utf-8") == "released"


def test_a_session_that_ends_first_ends_the_holder(held):
    playbook = subprocess.Popen(["sleep", "30"])
    try:
        rc, copied = held([sys.executable, "-c", "print('x'); print('END')"], playbook.pid)
    finally:
        playbook.kill()
        playbook.wait()
    assert (rc, copied) == (0, b"x\nEND\n")


def test_a_session_that_ignores_its_closed_stdin_is_killed_after_the_release_wait(held, monkeypatch, tmp_path):
    monkeypatch.setattr(lock_holder, "RELEASE_WAIT_SECONDS", 0.2)
    gone = subprocess.Popen(["true"])
    gone.wait()  # ansible-playbook already ended
    rc, copied = held([sys.executable, "-c", "import time; print('END', flush=True); time.sleep(30)"], gone.pid)
    assert rc == -9 and copied == b"END\n"


def test_its_pid_check_loaded_by_path_tells_a_gone_pid_from_a_live_one():
    gone = subprocess.Popen(["true"])
    gone.wait()
    pid_alive = lock_holder._sibling("sshreuse_watch").pid_alive  # as hold() loads it under -I -S
    assert pid_alive(os.getpid()) is True and pid_alive(gone.pid) is False
    source = Path(lock_holder.__file__).read_text(encoding="utf-8")
    assert "from ansible" not in source and "import ansible" not in source  # it runs with -I -S
