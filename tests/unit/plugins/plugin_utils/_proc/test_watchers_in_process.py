"""The watchers' parts in this process, on real processes: which children share the session, who the
original parent is, and the master watcher's wait and close (a stand-in ``ssh`` first on PATH).

The subprocess-level behaviour (a watcher outliving its parent) is in test_parent_watch.py and
test_sshreuse_watch.py; these call the same functions directly.
"""
from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from ansible_collections.flodl.cluster.plugins.plugin_utils._proc import parent_watch, sshreuse_watch

PREFIX = "flodl-ssh-"

# `ssh -o ControlPath=<sock> -O exit flodl-master`: answers for sockets named ok*, not for the others.
FAKE_SSH = """#!/bin/sh
echo "$@" >> "$SSH_LOG"
case "$2" in *ok*) exit 0 ;; esac
exit 255
"""


@pytest.fixture
def fake_ssh(stand_in_on_path) -> Path:
    return stand_in_on_path("ssh", FAKE_SSH)


def control_dir(tmp_path: Path, *socks: str) -> Path:
    control = tmp_path / f"{PREFIX}run"
    control.mkdir(mode=0o700)
    for name in socks:
        (control / name).write_text("", encoding="utf-8")
    return control


def test_children_of_lists_direct_children_only(tmp_path):
    child = subprocess.Popen(["sleep", "30"])
    shell = subprocess.Popen(["sh", "-c", "sleep 30 & echo $!; wait"], stdout=subprocess.PIPE, text=True)
    try:
        assert shell.stdout is not None
        grandchild = int(shell.stdout.readline())
        mine = parent_watch.children_of(os.getpid())
        assert child.pid in mine and shell.pid in mine and grandchild not in mine
        assert parent_watch.children_of(shell.pid) == [grandchild] and parent_watch.children_of(child.pid) == []
    finally:
        for proc in (child, shell):
            proc.kill()
            proc.wait()
        os.kill(grandchild, 9)


def test_only_the_children_sharing_this_session_are_stopped():
    same = subprocess.Popen(["sleep", "30"])
    own = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert parent_watch.stop_own_session_children() >= 1
        assert same.wait(timeout=5) == -15
        assert own.poll() is None  # its own session: the group watcher's business
    finally:
        for proc in (same, own):
            proc.kill()
            proc.wait()


def test_the_original_parent_here_is_todays_parent():
    assert parent_watch.original_parent() == os.getppid()


def test_the_parent_watch_does_nothing_while_the_parent_lives():
    done = threading.Event()
    thread = threading.Thread(target=parent_watch._watch, args=(os.getppid(), done, 0.01))
    thread.start()
    thread.join(0.1)
    assert thread.is_alive()  # still watching: the parent has not changed
    done.set()
    thread.join(2)
    assert not thread.is_alive()


def test_masters_are_closed_one_ssh_each_and_the_directory_removed(tmp_path, fake_ssh):
    control = control_dir(tmp_path, "ok-a", "ok-b", "stale-c")
    assert sshreuse_watch.close_masters_in(str(control), PREFIX) == 2  # the stale one did not answer
    lines = sorted(fake_ssh.read_text(encoding="utf-8").splitlines())
    assert lines == [f"-o ControlPath={control}/{n} -O exit flodl-master" for n in ("ok-a", "ok-b", "stale-c")]
    assert not control.exists()


def test_without_ssh_nothing_is_closed_but_the_directory_still_goes(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    control = control_dir(tmp_path, "ok-a")
    assert sshreuse_watch.close_masters_in(str(control), PREFIX) == 0 and not control.exists()


def test_the_watch_closes_what_is_left_once_the_playbook_is_gone(tmp_path, fake_ssh):
    control = control_dir(tmp_path, "ok-a")
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert sshreuse_watch.watch(gone.pid, str(control), PREFIX, poll=0.01) == 1
    assert not control.exists()


def test_the_watch_ends_quietly_once_the_launch_step_removed_the_directory(tmp_path, fake_ssh):
    control = control_dir(tmp_path)
    threading.Timer(0.05, control.rmdir).start()
    assert sshreuse_watch.watch(os.getpid(), str(control), PREFIX, poll=0.01) == 0
    assert not fake_ssh.exists()  # no ssh was run


def test_pid_alive_tells_a_gone_pid_from_a_live_one():
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert sshreuse_watch.pid_alive(os.getpid()) is True and sshreuse_watch.pid_alive(gone.pid) is False
