# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Closing a run's ssh masters; also run as a script, which waits for ansible-playbook to end first.

The launch step closes the masters when the launcher exits. A run that stops earlier (a failed build,
a cancel between phases, ansible-playbook killed) never gets there, so the probe step starts this file
as a small watcher in its own session: once the ansible-playbook process is gone, it closes whatever
masters are left and removes the directory. Standard library only: it runs without Ansible (``-I -S``).
lock_holder.py, another such script, loads this file by path for ``pid_alive``: keep it standard library only.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

POLL_SECONDS = 0.5


def close_masters_in(control_dir: str | None, prefix: str, timeout: float = 10.0) -> int:
    """``ssh -O exit`` every master whose socket is in the run's directory, then remove it; the count closed.

    Only a directory named with ``prefix`` (one this collection made) is touched. ``timeout`` bounds the whole
    wait, however many masters there are.
    """
    if not control_dir or not os.path.isdir(control_dir) or not os.path.basename(
            control_dir.rstrip("/")).startswith(prefix):
        return 0
    procs = []
    for name in sorted(os.listdir(control_dir)):
        sock = os.path.join(control_dir, name)
        try:
            procs.append(subprocess.Popen(
                ["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "flodl-master"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        except OSError:
            continue
    closed = 0
    deadline = time.monotonic() + timeout  # one wait for all of them, not one per master
    for proc in procs:
        try:
            closed += proc.wait(timeout=max(0.0, deadline - time.monotonic())) == 0
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    shutil.rmtree(control_dir, ignore_errors=True)
    return closed


def pid_alive(pid: int) -> bool:
    """Whether a process of that pid exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def watch(playbook_pid: int, control_dir: str, prefix: str, poll: float = POLL_SECONDS) -> int:
    """Wait while ansible-playbook lives and the directory exists; then close what is left."""
    while os.path.isdir(control_dir):
        if not pid_alive(playbook_pid):
            return close_masters_in(control_dir, prefix)
        time.sleep(poll)
    return 0  # the launch step closed them


def start_watcher(playbook_pid: int, control_dir: str, prefix: str) -> int | None:
    """Start the watcher for this run's directory, detached from the play; its pid, None when it cannot run."""
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", os.path.abspath(__file__), str(playbook_pid), control_dir, prefix],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True)
    except OSError:
        return None
    return proc.pid


if __name__ == "__main__":
    watch(int(sys.argv[1]), sys.argv[2], sys.argv[3])
