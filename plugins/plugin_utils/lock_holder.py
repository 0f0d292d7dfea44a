# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Keeps the launch host's session (and so its run lock) open while ansible-playbook lives; run as a script.

``lock_holder.py <playbook pid> <end sentinel> <ssh argv...>`` starts the ssh, copies its stdout to
this process's stdout up to the end sentinel, then closes that stdout (the preflight step has its
answer). It keeps ssh's stdin open until the ansible-playbook process is gone, then closes it: the
session on the launch host releases the lock and ends. Started in a session of its own, so a cancel's
signal to the job's process group leaves it to see ansible-playbook end. A kill of the whole job (a
deleted pod) kills it and the ssh too: the connection drops, the session's stdin closes there all the
same. Standard library only: it runs without Ansible (``-I -S``).
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

POLL_SECONDS = 0.5
RELEASE_WAIT_SECONDS = 15.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def hold(playbook_pid: int, end_mark: bytes, argv: list[str]) -> int:
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    source, sink = proc.stdout, proc.stdin
    if source is None or sink is None:
        return 2
    out = sys.stdout.buffer
    for line in iter(source.readline, b""):
        out.write(line)
        out.flush()
        if line.strip() == end_mark:
            break
    # Our stdout becomes /dev/null: the reader sees its end now, while this process lives on.
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    threading.Thread(target=source.read, daemon=True).start()  # never let ssh block on its output
    while proc.poll() is None and _alive(playbook_pid):
        time.sleep(POLL_SECONDS)
    try:
        sink.close()
    except OSError:
        pass
    try:
        return proc.wait(timeout=RELEASE_WAIT_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


if __name__ == "__main__":
    sys.exit(hold(int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3:]))
