# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An Ansible worker that ends when ansible-playbook dies, taking its ssh with it.

Measured on both ansible-core lines: after a SIGKILL or a SIGHUP of ansible-playbook, the forked
worker running a task lives on (only a SIGTERM makes Ansible stop its workers). It keeps its ssh to
the build host open, so the remote build module never learns the run is gone, and it keeps probing
workers nobody waits for. A long-running action step wraps its work in ``exit_with_parent()``: once
the worker's parent changes, its children in its own session (Ansible's ssh, the probes) get SIGTERM
(as its whole process group, when it leads one, as Ansible's worker does) and the worker exits.
Children in a session of their own (a process-group watcher, the builds, the launch command) are left
to that watcher (module_utils._core.group_watch), which sees the worker go.
"""
from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.processes import stop_spawning

POLL_SECONDS = 0.2


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc); empty where /proc cannot tell."""
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[1] == str(pid):
            found.append(int(entry))
    return found


def stop_own_session_children() -> int:
    """SIGTERM every child of this process that shares its session; how many were signalled."""
    own = os.getsid(0)
    count = 0
    for child in children_of(os.getpid()):
        try:
            if os.getsid(child) == own:
                os.kill(child, signal.SIGTERM)
                count += 1
        except OSError:
            pass  # gone already
    return count


def _watch(parent: int, done: threading.Event, poll: float) -> None:
    while not done.wait(poll):
        if os.getppid() != parent:
            stop_spawning()  # no probe is forked after the signal below
            if os.getpgrp() == os.getpid():
                # Ansible's worker leads a session of its own (it calls setsid): its group holds only it and
                # what it started there. A group signal also reaches a child being forked right now, which a
                # list of children can miss; this process gets it too and ends, or exits below.
                try:
                    os.killpg(os.getpid(), signal.SIGTERM)
                except OSError:
                    pass
            stop_own_session_children()
            os._exit(1)  # nobody waits for this task's result any more


def original_parent() -> int:
    """The process that forked this one: ansible-playbook for an Ansible worker, even if it died already."""
    try:
        import multiprocessing  # noqa: PLC0415

        parent = multiprocessing.parent_process()
        if parent is not None and parent.pid:
            return int(parent.pid)
    except (ImportError, AttributeError, ValueError):
        pass
    return os.getppid()


@contextmanager
def exit_with_parent(poll: float = POLL_SECONDS) -> Iterator[None]:
    """While the block runs, this process ends (after its own-session children) if its parent dies.

    The parent is the one that forked this worker, not today's: one that died before the block began
    (a signal right as the task started) is noticed at the first poll.
    """
    done = threading.Event()
    threading.Thread(target=_watch, args=(original_parent(), done, poll), daemon=True).start()
    try:
        yield
    finally:
        done.set()
