# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A walk-in launch's launcher, on this machine: open its window, then follow it to its end (the I/O half).

The launcher must outlive the step that starts it: Ansible starts the agents in the tasks between the two
steps. It runs in a session of its own with its output in the launch log and its exit code beside it
(module_utils._launch.detached's recording wrapper). A watcher (module_utils._core.group_watch, held) stops it, and so
every agent (their window closes), when ansible-playbook is gone; a normal end needs nobody.

With ``flodl_launch_host`` (:class:`RemoteLauncher`) the detached command is the ssh that runs the launcher
there under the remote wrapper (module_utils._ssh.remote_launch), its stdin held open by
plugin_utils._proc.stdin_holder: the launcher's output comes back into the same log, ssh's exit code is the
launcher's, and whatever stops the ssh here (a stop, the watcher) closes the wrapper's stdin there, which stops
the launcher. The window is then awaited on the launch host (:class:`RemoteListenCheck`).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._launch import detached as dt
from ansible_collections.flodl.cluster.plugins.module_utils._walk_in import walk_in as wi
from ansible_collections.flodl.cluster.plugins.module_utils._walk_in import walk_in_verdict as wv
from ansible_collections.flodl.cluster.plugins.module_utils._files.file_modes import PRIVATE_DIR_MODE, make_dirs
from ansible_collections.flodl.cluster.plugins.module_utils._core.group_watch import group_alive, start_watch
from ansible_collections.flodl.cluster.plugins.module_utils._core.output_batch import OutputBatcher
from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import always_quote
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_launch import END_MARK, RemoteLaunchError, env_payload
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc import stdin_holder

POLL_SECONDS = 0.1
SETTLE_SECONDS = 5.0
TAIL = 30


def listening(port: int, host: str | None = None, tables: tuple[str, ...] = wi.TCP_TABLES) -> bool:
    """Whether a socket of this network namespace listens on ``host:port``, or on ``port`` of every address (no
    connection is made to find out). Another launcher's window on the same port at another address (a second
    cluster on this machine) is not this one's."""
    want_port = f"{int(port):04X}"
    wanted = wi.table_addresses(host)
    for table in tables:
        try:
            with open(table, encoding="ascii") as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) <= 3 or fields[3] != "0A":
                continue
            address, _sep, found_port = fields[1].rpartition(":")
            if found_port == want_port and (wanted is None or address.upper() in wanted):
                return True
    return False


@dataclass(frozen=True)
class RemoteLauncher:
    """The launcher on ``flodl_launch_host``: the ssh argv that runs it there under the remote wrapper, the
    wrapper's stdin (the environment lines), and how to run a one-shot script there."""

    host: str
    argv: list[str]
    payload: bytes
    script_argv: Callable[[str], list[str]]


class WindowCheckError(Exception):
    """The check on the launch host ended without seeing the window: why, for the operator."""


class RemoteListenCheck:
    """``listening`` on the launch host: one ssh, bounded by the window's open bound, that prints a mark when the
    window listens there (module_utils._walk_in.walk_in.listen_check_script). Called until it says True; raises
    WindowCheckError when the check ended without it. ``close`` ends the ssh (the loop there ends with it)."""

    def __init__(self, remote: RemoteLauncher, seconds: float):
        self._remote, self._seconds = remote, seconds
        self._proc: subprocess.Popen[bytes] | None = None

    def __call__(self, port: int, host: str | None = None) -> bool:
        if self._proc is None:
            argv = self._remote.script_argv(wi.listen_check_script(port, host, self._seconds))
            self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, start_new_session=True)
        if self._proc.poll() is None:
            return False
        out, err = self._proc.communicate()
        if wi.LISTEN_MARK in out.decode("utf-8", "replace"):
            return True
        why = (err.decode("utf-8", "replace").strip().splitlines() or [""])[-1][:300]
        if self._proc.returncode == 1:  # the loop's own bound (ssh's failures are 255)
            raise WindowCheckError(f"the launcher's join window (port {port}) did not open on {self._remote.host} "
                                   f"within {self._seconds:g} s; it was stopped")
        raise WindowCheckError(f"could not ask {self._remote.host} (flodl_launch_host) whether the launcher's join "
                               f"window listens there (ssh exit {self._proc.returncode}"
                               f"{': ' + why if why else ''}); the launcher was stopped")

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self._proc.communicate()


def open_window(args: Mapping[str, Any], window: Mapping[str, Any], log_dir: str, watch_pid: int,
                opened: Callable[[int, str | None], bool] = listening,
                remote: RemoteLauncher | None = None) -> tuple[dict[str, Any], str | None]:
    """Start the launcher detached here (or, with ``remote``, its ssh to the launch host) and wait for its join
    window; (what a later step follows, or why not).

    ``window``: ``port`` and ``open_timeout`` from the prepared launch. Nothing is left running on a failure.
    """
    run_id = str(window["run_id"])
    make_dirs(log_dir, PRIVATE_DIR_MODE)
    log = os.path.join(log_dir, f"launch-{time.strftime('%Y%m%d-%H%M%S')}-{run_id}.log")
    if remote is None:
        try:
            payload = env_payload({str(k): str(v) for k, v in (args["env"] or {}).items()})
        except RemoteLaunchError as exc:
            return {}, str(exc)
        script = dt.detach_script(args["chdir"], args["command"], log, args["shell"])
    else:
        payload = remote.payload
        holder = [sys.executable, "-I", "-S", stdin_holder.__file__, END_MARK, *remote.argv]
        script = dt.detach_script(log_dir, " ".join(always_quote(a) for a in holder), log, stdin_through=True)
        opened = RemoteListenCheck(remote, float(window["open_timeout"]))
    watch = start_watch(float(args["grace_seconds"]), watch_pid)
    proc = subprocess.run(["/bin/sh", "-c", script], input=payload, capture_output=True, timeout=30, check=False)
    pid = dt.parse_pid(proc.stdout.decode("utf-8", "replace"))
    if pid is None or pid < dt.MIN_PID:
        if watch is not None:
            watch.done()
        why = (proc.stderr.decode("utf-8", "replace").strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return {}, f"the launcher could not start: {why[:300]}"
    if watch is not None:
        watch.add(pid)
    started = {"pid": pid, "log": log, "run_id": run_id, "port": int(window["port"]),
               "proc_start": dt.parse_start(proc.stdout.decode("utf-8", "replace"))}
    if remote is not None:
        started["launch_host"] = remote.host
    problem = _await_window(pid, log, window, opened)
    close = getattr(opened, "close", None)
    if close is not None:
        close()
    if problem is not None:
        stop(pid, float(args["grace_seconds"]))
        if watch is not None:
            watch.done()
        return started, problem
    if watch is not None:
        watch.hold()  # the launcher outlives this step; the watcher stops it if ansible-playbook goes
    return started, None


def _await_window(pid: int, log: str, window: Mapping[str, Any], opened: Callable[[int, str | None], bool]
                  ) -> str | None:
    """None once the window listens; else why not (the launcher ended, the bound passed, the check failed)."""
    deadline = time.monotonic() + float(window["open_timeout"])
    try:
        while not opened(int(window["port"]), window.get("host")):
            if os.path.exists(dt.exit_file(log)) or not (group_alive(pid) or _running(pid)):
                return "the launcher ended before its join window opened"
            if time.monotonic() >= deadline:
                return (f"the launcher's join window (port {window['port']}) did not open within "
                        f"{float(window['open_timeout']):g} s; it was stopped")
            time.sleep(POLL_SECONDS)
    except WindowCheckError as exc:
        return "the launcher ended before its join window opened" if os.path.exists(dt.exit_file(log)) else str(exc)
    return None


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process: just started, it may not lead its own group yet (setsid still to come)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def stop(pid: int, grace: float) -> None:
    """TERM the launcher's session, KILL what is left after ``grace``."""
    if pid < dt.MIN_PID:
        return
    settle = time.monotonic() + SETTLE_SECONDS  # a launcher just started may not lead its group yet
    while not group_alive(pid) and _running(pid) and time.monotonic() < settle:
        time.sleep(POLL_SECONDS)
    for sig, wait in ((15, grace), (9, 0.0)):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + wait
        while group_alive(pid) and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)


def follow(started: Mapping[str, Any], show: Callable[[str], None], timeout: float, grace: float,
           batch_seconds: float) -> dict[str, Any]:
    """Stream the launcher's log until it ends (or ``timeout``, then stop it); its code, tail and view of hosts."""
    log, pid = str(started["log"]), int(started["pid"])
    batcher = OutputBatcher(batch_seconds)
    lines: list[str] = []
    offset, pending, timed_out = 0, b"", False
    deadline = time.monotonic() + timeout if timeout > 0 else None
    while True:
        ended = os.path.exists(dt.exit_file(log)) or not group_alive(pid)
        offset, pending, fresh = _read_from(log, offset, pending, final=ended)
        for line in fresh:
            lines.append(line)
            batch = batcher.add(line, time.monotonic())
            if batch:
                show(batch)
        if batcher.due(time.monotonic()):
            show(batcher.take())
        if ended:
            break
        if deadline is not None and time.monotonic() >= deadline:
            stop(pid, grace)
            timed_out = True
        time.sleep(POLL_SECONDS)
    rest = batcher.take()
    if rest:
        show(rest)
    rc = _exit_code(log)
    view = wv.read_launcher(lines)
    return {"rc": rc, "timed_out": timed_out, "tail": lines[-TAIL:], "log_file": log, "view": view.to_data()}


def _read_from(path: str, offset: int, pending: bytes, final: bool) -> tuple[int, bytes, list[str]]:
    """The whole lines added to ``path`` since ``offset``; at the end (``final``) the last partial one too."""
    chunks = []
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                chunks.append(chunk)
    except OSError:
        return offset, pending, []
    data = pending + b"".join(chunks)
    *whole, pending = data.split(b"\n")
    if final and pending:
        whole, pending = [*whole, pending], b""
    return offset + sum(len(c) for c in chunks), pending, [w.decode("utf-8", "replace") for w in whole]


def _exit_code(log: str) -> int | None:
    try:
        with open(dt.exit_file(log), encoding="ascii") as fh:
            text = fh.read(16).strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
