"""plugin_utils._proc.parent_watch with real processes: a worker whose parent dies ends, with its own-session children."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

WORKER = textwrap.dedent(
    """\
    import os, subprocess, sys, time
    sys.path[:0] = {path!r}
    if {leader!r}:
        os.setsid()  # as Ansible's worker does: its own session and process group
    from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.parent_watch import exit_with_parent
    with exit_with_parent(poll=0.05):
        same = subprocess.Popen(["sleep", "60"])
        own = subprocess.Popen(["sleep", "60"], start_new_session=True)
        print(same.pid, own.pid, flush=True)
        time.sleep(60)
    """
)
# The "ansible-playbook": forks the worker, passes its output on, then waits to be killed.
PARENT = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', sys.argv[1]]); time.sleep(60)"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


@pytest.mark.parametrize("leader", [False, True], ids=["in-its-callers-group", "leading-its-own-group"])
def test_the_worker_exits_when_its_parent_is_killed_and_stops_only_its_own_session_children(leader):
    code = WORKER.format(path=sys.path, leader=leader)
    parent = subprocess.Popen([sys.executable, "-c", PARENT, code], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    same, own = (int(p) for p in parent.stdout.readline().split())
    worker = int(open(f"/proc/{same}/stat").read().rsplit(")", 1)[1].split()[1])
    try:
        assert _alive(worker) and _alive(same) and _alive(own)
        parent.kill()  # as SIGKILL of ansible-playbook alone
        parent.wait()
        assert _wait_gone(worker, 5) and _wait_gone(same, 5)
        assert _alive(own)  # a session of its own: the group watcher's business, not this one's
    finally:
        for pid in (own, same, worker):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_the_watch_thread_ends_with_the_block():
    import threading

    from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.parent_watch import exit_with_parent

    before = threading.active_count()
    with exit_with_parent(poll=0.01):
        assert threading.active_count() == before + 1
        time.sleep(0.05)  # the parent lives: nothing happens
    deadline = time.monotonic() + 2
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() == before
