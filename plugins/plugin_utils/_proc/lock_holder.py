# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Holds the run lock while ansible-playbook lives; run as a script, in one of two ways.

``lock_holder.py --lease <playbook pid> <its start time> <run id> <renew seconds>``, the lock's path in
``FLODL_RUN_LOCK_PATH``: the lock taken on this machine. Renews its lease (touches the file) while the
ansible-playbook process lives, then removes it; both only while the lock holds ``run id``. Killed with
everything else (a deleted pod), it leaves the lease to lapse.

The launch host's session:

``lock_holder.py <playbook pid> <end sentinel> <ssh argv...>`` starts the ssh, copies its stdout to
this process's stdout up to the end sentinel, then closes that stdout (the preflight step has its
answer). It keeps ssh's stdin open until the ansible-playbook process is gone, then closes it: the
session on the launch host releases the lock and ends. Started in a session of its own, so a cancel's
signal to the job's process group leaves it to see ansible-playbook end. A kill of the whole job (a
deleted pod) kills it and the ssh too: the connection drops, the session's stdin closes there all the
same. Standard library only: it runs without Ansible (``-I -S``), and takes its pid check from
sshreuse_watch.py, loaded by path from this directory.
"""
from __future__ import annotations

import importlib.util
import json
import os
import stat
import subprocess
import sys
import threading
import time
from typing import Any

POLL_SECONDS = 0.5
RELEASE_WAIT_SECONDS = 15.0
LEASE = "--lease"
PATH_VARIABLE = "FLODL_RUN_LOCK_PATH"
MAX_LOCK_BYTES = 4096  # module_utils._run.runlock.MAX_LOCK_BYTES (not importable here)


def process_start(pid: int) -> str | None:
    """The start time of process ``pid`` (``/proc/<pid>/stat`` field 22), None when there is none."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[19]
    except (OSError, IndexError):
        return None


def _if_ours(path: str, run_id: str, act: str) -> bool:
    """Renew (``touch``) or remove (``rm``) the lock at ``path`` when it holds ``run_id``; whether it did."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        try:
            ours = json.loads(os.read(fd, MAX_LOCK_BYTES + 1)).get("run_id") == run_id
        except (ValueError, AttributeError):
            return False
        if ours:
            if act == "touch":
                os.utime(fd)  # now, by the clock of the file system holding it
            else:
                os.unlink(path)
        return ours
    except OSError:
        return False
    finally:
        os.close(fd)


def keep_lease(playbook_pid: int, playbook_start: str, path: str, run_id: str, every: float) -> int:
    """Renew every ``every`` s while the playbook process (that pid, that start) lives; then release."""
    renew_at = time.monotonic() + every
    while process_start(playbook_pid) == playbook_start:
        if time.monotonic() >= renew_at:
            if not _if_ours(path, run_id, "touch"):
                return 1  # taken over or removed: nothing of this run's to keep
            renew_at = time.monotonic() + every
        time.sleep(POLL_SECONDS)
    _if_ours(path, run_id, "rm")
    return 0


def _sibling(name: str) -> Any:
    """A standard-library module next to this file, loaded by path: under ``-I -S`` the collection is not importable."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"flodl_{name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def hold(playbook_pid: int, end_mark: bytes, argv: list[str]) -> int:
    pid_alive = _sibling("sshreuse_watch").pid_alive  # the collection's one pid check
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
    while proc.poll() is None and pid_alive(playbook_pid):
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
    if sys.argv[1] == LEASE:
        sys.exit(keep_lease(int(sys.argv[2]), sys.argv[3], os.environ[PATH_VARIABLE], sys.argv[4], float(sys.argv[5])))
    sys.exit(hold(int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3:]))
