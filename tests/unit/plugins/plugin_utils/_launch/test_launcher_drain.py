"""The launch ends with its command, even when something the command left keeps the output pipe open.

An ssh ControlPersist master that the launcher's fan-out started keeps its stderr, which is the launch's
output pipe: the launch step waited for it (for good) before this bound. Real processes, no mocks.
"""
from __future__ import annotations

import os
import signal
import time

from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import launcher_process as lp


class _Log:
    def __init__(self):
        self.data = b""

    def write(self, data):
        self.data += data


def test_a_child_holding_the_pipe_does_not_hold_the_launch(tmp_path):
    log, shown = _Log(), []
    pid_file = tmp_path / "child.pid"
    script = f"sleep 60 >&2 & echo $! > {pid_file}; echo launched; exit 4"
    start = time.monotonic()
    outcome = lp.run_streamed(["sh", "-c", script], str(tmp_path), dict(os.environ), log, shown.append,
                              grace=1, batch_seconds=0.1)
    elapsed = time.monotonic() - start
    child = int(pid_file.read_text())
    try:
        assert outcome.rc == 4 and "launched" in outcome.tail
        assert elapsed < lp.DRAIN_SECONDS + lp.EXIT_POLL_SECONDS + 3, elapsed
        os.kill(child, 0)  # the child is still there: it is not the launch's to stop, nor to wait for
    finally:
        os.kill(child, signal.SIGKILL)


def test_output_written_just_before_the_exit_is_kept(tmp_path):
    log, shown = _Log(), []
    outcome = lp.run_streamed(["sh", "-c", "for i in 1 2 3; do echo line$i; done"], str(tmp_path), dict(os.environ),
                              log, shown.append, grace=1, batch_seconds=0.1)
    assert outcome.rc == 0 and outcome.tail == ["line1", "line2", "line3"]
    assert b"line3\n" in log.data and "\n".join(shown).splitlines() == ["line1", "line2", "line3"]


def test_a_local_launch_never_runs_under_a_umask_that_lets_group_or_world_write(tmp_path):
    """cargo run and the launcher write into the project: the caller's umask 000 gets group/world write added."""
    log, shown = _Log(), []
    old = os.umask(0)
    try:
        outcome = lp.run_streamed(["sh", "-c", "umask"], str(tmp_path), dict(os.environ), log, shown.append,
                                  grace=1, batch_seconds=0.1)
    finally:
        os.umask(old)
    assert outcome.rc == 0 and outcome.tail == ["0022"]
