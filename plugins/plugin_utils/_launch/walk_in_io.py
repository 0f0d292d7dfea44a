# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A walk-in launch's launcher, on this machine: open its window, then follow it to its end (the I/O half).

The launcher must outlive the step that starts it: Ansible starts the agents in the tasks between the two
steps. It runs in a session of its own with its output in the launch log and its exit code beside it
(module_utils._launch.detached's recording wrapper). A watcher (module_utils._core.group_watch, held) stops it, and so
every agent (their window closes), when ansible-playbook is gone; a normal end needs nobody.
"""
from __future__ import annotations

import ipaddress
import os
import subprocess
import time
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._launch import detached as dt
from ansible_collections.flodl.cluster.plugins.module_utils._launch import walk_in_verdict as wv
from ansible_collections.flodl.cluster.plugins.module_utils._files.file_modes import PRIVATE_DIR_MODE, make_dirs
from ansible_collections.flodl.cluster.plugins.module_utils._core.group_watch import group_alive, start_watch
from ansible_collections.flodl.cluster.plugins.module_utils._core.output_batch import OutputBatcher
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_launch import RemoteLaunchError, env_payload

POLL_SECONDS = 0.1
TAIL = 30


def listening(port: int, host: str | None = None,
              tables: tuple[str, ...] = ("/proc/net/tcp", "/proc/net/tcp6")) -> bool:
    """Whether a socket of this network namespace listens on ``host:port``, or on ``port`` of every address (no
    connection is made to find out). Another launcher's window on the same port at another address (a second
    cluster on this machine) is not this one's."""
    want_port = f"{int(port):04X}"
    wanted = _table_addresses(host)
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


def _table_addresses(host: str | None) -> set[str] | None:
    """How /proc/net/tcp* spells ``host`` and the any-address (None: any address matches)."""
    try:
        addr = ipaddress.ip_address(str(host))
    except ValueError:
        return None  # a name: the window's own bind is not knowable from here
    packed = addr.packed
    if addr.version == 4:  # one little-endian 32-bit word
        return {packed[::-1].hex().upper(), "00000000"}
    words = "".join(packed[i:i + 4][::-1].hex() for i in range(0, 16, 4)).upper()
    return {words, "0" * 32}


def open_window(args: Mapping[str, Any], window: Mapping[str, Any], log_dir: str, watch_pid: int,
                opened: Callable[[int, str | None], bool] = listening) -> tuple[dict[str, Any], str | None]:
    """Start the launcher detached here and wait for its join window; (what a later step follows, or why not).

    ``window``: ``port`` and ``open_timeout`` from the prepared launch. Nothing is left running on a failure.
    """
    run_id = str(window["run_id"])
    make_dirs(log_dir, PRIVATE_DIR_MODE)
    log = os.path.join(log_dir, f"launch-{time.strftime('%Y%m%d-%H%M%S')}-{run_id}.log")
    try:
        payload = env_payload({str(k): str(v) for k, v in (args["env"] or {}).items()})
    except RemoteLaunchError as exc:
        return {}, str(exc)
    watch = start_watch(float(args["grace_seconds"]), watch_pid)
    proc = subprocess.run(["/bin/sh", "-c", dt.detach_script(args["chdir"], args["command"], log, args["shell"])],
                          input=payload, capture_output=True, timeout=30, check=False)
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
    deadline = time.monotonic() + float(window["open_timeout"])
    while not opened(int(window["port"]), window.get("host")):
        if os.path.exists(dt.exit_file(log)) or not group_alive(pid) or time.monotonic() >= deadline:
            stop(pid, float(args["grace_seconds"]))
            if watch is not None:
                watch.done()
            ended = os.path.exists(dt.exit_file(log))
            return started, ("the launcher ended before its join window opened" if ended else
                             f"the launcher's join window (port {window['port']}) did not open within "
                             f"{float(window['open_timeout']):g} s; it was stopped")
        time.sleep(POLL_SECONDS)
    if watch is not None:
        watch.hold()  # the launcher outlives this step; the watcher stops it if ansible-playbook goes
    return started, None


def stop(pid: int, grace: float) -> None:
    """TERM the launcher's session, KILL what is left after ``grace``."""
    if pid < dt.MIN_PID:
        return
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
