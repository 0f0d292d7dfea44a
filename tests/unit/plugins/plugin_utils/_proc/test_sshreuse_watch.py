"""plugin_utils._proc.sshreuse_watch: the run's masters are closed once ansible-playbook is gone (real processes)."""
from __future__ import annotations

import os
import subprocess
import time

from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.sshreuse_watch import close_masters_in, start_watcher

PREFIX = "flodl-ssh-"


def _reaped(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return True
        time.sleep(0.05)
    return False


def test_the_directory_goes_when_the_playbook_process_ends(tmp_path):
    control = tmp_path / f"{PREFIX}run"
    control.mkdir(mode=0o700)
    playbook = subprocess.Popen(["sleep", "30"])
    watcher = start_watcher(playbook.pid, str(control), PREFIX)
    assert watcher is not None
    try:
        time.sleep(0.8)
        assert control.is_dir() and os.waitpid(watcher, os.WNOHANG)[0] == 0, "the watcher acted while the play lived"
    finally:
        playbook.kill()
        playbook.wait()
    assert _reaped(watcher, 5), "the watcher did not end after the playbook process"
    assert not control.exists()


def test_the_watcher_ends_quietly_when_the_launch_step_closed_them(tmp_path):
    control = tmp_path / f"{PREFIX}run"
    control.mkdir(mode=0o700)
    watcher = start_watcher(os.getpid(), str(control), PREFIX)
    control.rmdir()
    assert _reaped(watcher, 5)


def test_only_a_directory_of_ours_is_touched(tmp_path):
    other = tmp_path / "someone-elses"
    other.mkdir()
    (other / "keep").write_text("x")
    assert close_masters_in(str(other), PREFIX) == 0
    assert (other / "keep").exists()
    assert close_masters_in(None, PREFIX) == 0 and close_masters_in(str(tmp_path / "absent"), PREFIX) == 0


def test_masters_that_never_answer_cost_one_wait_in_all(tmp_path, monkeypatch):
    """``ssh -O exit`` that hangs: the timeout bounds the whole close, not each master (issue 19, item 4)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "ssh"
    fake.write_text("#!/bin/sh\nexec sleep 30\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    control = tmp_path / f"{PREFIX}run"
    control.mkdir(mode=0o700)
    for i in range(5):
        (control / f"sock{i}").write_text("")
    start = time.monotonic()
    assert close_masters_in(str(control), PREFIX, timeout=0.5) == 0
    assert time.monotonic() - start < 1.5  # five masters, one half-second wait (not 2.5 s)
    assert not control.exists()
