# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A watcher process that stops the collection's process groups when the process that started them dies.

Builds and the launch command each run in a process group of their own, so no signal to Ansible's
process group reaches them. Whoever starts them (the prebuild module on the build host, the launch
step on the controller) first starts this watcher, in a session of its own, and holds the only write
end of its stdin (the lifeline). It then tells the watcher each group it starts (``+<pgid>``), each
that ended (``-<pgid>``), and ``done`` when it returns normally, or ``hold`` when its groups outlive
it (a walk-in launcher, followed by a later step): then only ``watch_pid`` counts, and the watcher
ends once its groups have. If the lifeline closes without ``done`` or ``hold`` (the starter was
killed, however), or the process ``watch_pid`` (ansible-playbook) is gone,
the watcher TERMs every group it knows, KILLs what is left after the grace period, then runs the
cleanup commands it was given (``c<json argv>``: the orphan cleanup's ssh to each worker) at once,
all under one deadline.

The watcher's code is a string run with ``python -I -S -c``: a module runs from Ansible's zip on the
build host, where no file of this collection exists to execute. Standard library only; Python 3.8.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
from typing import Any, Callable, List, Optional

# The process checks, written once: the watcher runs this text, and this module runs it too (group_alive below,
# which the launch step's own stop uses).
CHECKS_SOURCE = r'''
import os

def stat_of(pid):
    try:
        with open("/proc/%d/stat" % pid) as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return fields[0], fields[19]
    except (OSError, IndexError):
        return None

def gone(pid, start):
    if pid <= 0:
        return False
    st = stat_of(pid)
    if st is None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return os.path.isdir("/proc/self")  # /proc exists but not this pid: gone
    return st[0] in ("Z", "X") or (start is not None and st[1] != start)

def runs_in_group(entry, pgid):
    try:
        with open("/proc/%s/stat" % entry) as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[2] == str(pgid) and fields[0] not in ("Z", "X")

def group_alive(pgid):
    # A zombie counts as gone: its parent (the starter) may be dead, and a reaper may be slow.
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # The leader first: while it runs, one read answers (a scan of /proc costs a read per process of the
    # machine, tens of ms on a busy one, and this is polled while a launch is followed).
    if runs_in_group(str(pgid), pgid):
        return True
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    return any(entry.isdigit() and runs_in_group(entry, pgid) for entry in entries)
'''

WATCHER_SOURCE = CHECKS_SOURCE + r'''
import json, select, signal, subprocess, sys, time

def stop(groups, grace):
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(group_alive(g) for g in groups):
        time.sleep(0.1)
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

def clean(jobs, timeout):
    procs = []
    for argv in jobs:
        try:
            procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

def main(grace, pid, cleanup_timeout, poll):
    for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_IGN)
    start = stat_of(pid)[1] if pid > 0 and stat_of(pid) else None
    groups, jobs, pending = [], [], b""
    held = lifeline = False
    while True:
        ready = select.select([0], [], [], poll)[0] if not lifeline else time.sleep(poll)
        if ready:
            chunk = os.read(0, 65536)
            if not chunk and not held:
                break
            lifeline = not chunk
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                if line == b"done":
                    return 0
                if line == b"hold":
                    held = True
                elif line[:1] == b"+" and int(line[1:]) not in groups:
                    groups.append(int(line[1:]))
                elif line[:1] == b"-" and int(line[1:]) in groups:
                    groups.remove(int(line[1:]))
                elif line[:1] == b"c":
                    jobs.append(json.loads(line[1:].decode()))
        if gone(pid, start):
            break
        if held and not any(group_alive(g) for g in groups):
            return 0  # what it guarded ended by itself
    stop(groups, grace)
    clean(jobs, cleanup_timeout)
    return 1

sys.exit(main(float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])))
'''

# The watcher's first stdin line is its source (JSON): ``ps`` shows a short command, not the code.
# Read a byte at a time so nothing after that line is consumed here.
BOOTSTRAP = ("import json, os\nline = b''\nwhile not line.endswith(b'\\n'):\n    c = os.read(0, 1)\n"
             "    if not c:\n        raise SystemExit(0)\n    line += c\nexec(json.loads(line))")
NAME = "flodl-group-watch"

_CHECKS: dict = {}
exec(CHECKS_SOURCE, _CHECKS)  # nosec: this module's own constant, the text the watcher runs

POLL_SECONDS = 0.2


class GroupWatch:
    """The starter's end of one watcher process (see the module docstring); thread-safe."""

    def __init__(self, grace: float, watch_pid: int = 0, cleanup_timeout: float = 30.0,
                 python: Optional[str] = None) -> None:
        self._lock = threading.Lock()
        self._closed = False
        self.proc = subprocess.Popen(  # pylint: disable=ansible-bad-function
            [python or sys.executable, "-I", "-S", "-c", BOOTSTRAP, NAME, f"{max(0.0, grace):g}", str(int(watch_pid)),
             f"{max(0.0, cleanup_timeout):g}", f"{POLL_SECONDS:g}"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True,
        )
        self._send(json.dumps(WATCHER_SOURCE))

    def _send(self, line: str) -> None:
        with self._lock:
            if self._closed or self.proc.stdin is None:
                return
            try:
                os.write(self.proc.stdin.fileno(), line.encode() + b"\n")
            except OSError:
                pass  # the watcher is gone: nothing more it can do

    def add(self, pgid: int) -> None:
        self._send(f"+{int(pgid)}")

    def remove(self, pgid: int) -> None:
        self._send(f"-{int(pgid)}")

    def cleanup(self, argvs: List[List[str]]) -> None:
        """Commands to run (all at once, one deadline) after the groups are stopped, if the watcher fires."""
        for argv in argvs:
            self._send("c" + json.dumps([str(a) for a in argv]))

    def alive(self) -> bool:
        """Whether the watcher still guards: it exits once it has fired (its starter's parent is gone)."""
        with self._lock:
            return not self._closed and self.proc.poll() is None

    def hold(self) -> None:
        """The starter returns, but its groups live on: the watcher keeps them until they end, or stops them
        (and runs the cleanup) when ``watch_pid`` is gone. A later step that waits for them calls nothing."""
        self._send("hold")
        self._let_go()

    def done(self) -> None:
        """The starter returns normally: the watcher exits without touching anything.

        Not waited for: it reads ``done`` before the lifeline's end, so it exits on its own whenever that is
        (a step shorter than the watcher's own start-up would otherwise wait for it); a daemon thread reaps it.
        """
        self._send("done")
        self._let_go()

    def _let_go(self) -> None:
        with self._lock:
            self._closed = True
            if self.proc.stdin is not None:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass
        threading.Thread(target=self.proc.wait, name="flodl-group-watch-reaper", daemon=True).start()


def group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is left, a zombie counting as gone: the watcher's own check."""
    return bool(_CHECKS["group_alive"](pgid))


# A gate in front of a group's command: it runs only once its starter says so on stdin, so a starter killed
# between starting the group and telling its watcher about it leaves nothing running (read sees EOF).
_GATE = 'read __flodl_go || exit 97; [ "$__flodl_go" = go ] || exit 97; exec "$@" </dev/null'


def start_group(argv: List[str], cwd: str, env: dict, stdout: Any) -> "subprocess.Popen[bytes]":
    """``argv`` in a session (so a process group) of its own, gated: stdin closed, stderr into ``stdout``.

    The command waits for :func:`release` (after the starter told its watcher the group). Not Ansible's
    run_command: builds run concurrently in threads, each streaming into its own log.
    """
    return subprocess.Popen(  # pylint: disable=ansible-bad-function
        ["/bin/sh", "-c", _GATE, "sh", *argv], cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=stdout,
        stderr=subprocess.STDOUT, start_new_session=True,
    )


def release(proc: "subprocess.Popen[bytes]") -> None:
    """Let a gated group's command run (its watcher knows the group by now)."""
    if proc.stdin is None:
        return
    try:
        proc.stdin.write(b"go\n")
        proc.stdin.close()
    except OSError:
        pass  # it is gone already: its exit code says so


def start_watch(grace: float, watch_pid: int = 0, cleanup_timeout: float = 30.0) -> Optional[GroupWatch]:
    """A started watcher, or None when no process can be started (the run goes on unwatched)."""
    try:
        return GroupWatch(grace, watch_pid, cleanup_timeout)
    except OSError:
        return None


def watch_channel(fd: int, on_gone: Callable[[], None], stop: threading.Event, poll: float = 1.0) -> None:
    """Call ``on_gone`` once the reader of ``fd`` (a module's stdout: sshd's end of the session) is gone.

    A pipe or socket whose far end closed polls POLLERR or POLLHUP even with no event asked for, and
    nothing is read or written. Runs until ``stop`` is set; meant for a daemon thread.
    """
    poller = select.poll()
    poller.register(fd, 0)
    while not stop.is_set():
        if poller.poll(poll * 1000):
            on_gone()
            return


def start_channel_watch(fd: int, on_gone: Callable[[], None]) -> threading.Event:
    """``watch_channel`` in a daemon thread; set the returned event to end it."""
    stop = threading.Event()
    threading.Thread(target=watch_channel, args=(fd, on_gone, stop), daemon=True).start()
    return stop
