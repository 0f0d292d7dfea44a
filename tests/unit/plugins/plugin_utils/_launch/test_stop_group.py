"""plugin_utils._launch.launcher_process.stop_group with real process groups: TERM obeyed, and a child left ignoring it
(test_launcher_stop.py has the leader ignoring it and a group already gone)."""
from __future__ import annotations

import subprocess
import sys
import time

from ansible_collections.flodl.cluster.plugins.module_utils._core.group_watch import group_alive
from ansible_collections.flodl.cluster.plugins.plugin_utils._launch.launcher_process import stop_group

# A leader that leaves a child ignoring SIGTERM in its group, says so, then waits.
STUBBORN = ("import subprocess, sys, time\n"
            "subprocess.Popen([sys.executable, '-c', 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print(1, flush=True); time.sleep(60)'])\n"
            "time.sleep(60)\n")


def _group(code: str) -> subprocess.Popen:
    """``code`` leading a process group of its own, as the launch command runs."""
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True, stdout=subprocess.PIPE, text=True)


def test_a_group_that_obeys_sigterm_is_stopped_by_it():
    proc = _group("import time; print(1, flush=True); time.sleep(60)")
    assert proc.stdout is not None and proc.stdout.readline() == "1\n"
    start = time.monotonic()
    assert stop_group(proc, grace=10) == "stopped by SIGTERM"
    assert time.monotonic() - start < 5 and not group_alive(proc.pid)
    proc.stdout.close()


def test_what_ignores_sigterm_is_killed_after_the_grace():
    proc = _group(STUBBORN)
    assert proc.stdout is not None and proc.stdout.readline() == "1\n"
    start = time.monotonic()
    assert stop_group(proc, grace=0.5) == "SIGKILL after 0.5s"
    assert time.monotonic() - start >= 0.5
    deadline = time.monotonic() + 5
    while group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not group_alive(proc.pid)  # the child, orphaned and killed, may stay a zombie: gone all the same
    proc.stdout.close()
