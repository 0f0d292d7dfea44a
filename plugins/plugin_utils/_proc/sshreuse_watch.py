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
import socket
import struct
import subprocess
import sys
import time

POLL_SECONDS = 0.5
# OpenSSH's multiplexing protocol (PROTOCOL.mux), what `ssh -O exit` sends: a hello each way, then a
# terminate request the master answers with OK before it exits. Spoken here, it costs a socket per
# master instead of an ssh process per master (0.09 s at 32 workers); a master that does not answer
# so gets `ssh -O exit`.
MUX_MSG_HELLO = 0x00000001
MUX_C_TERMINATE = 0x10000005
MUX_S_OK = 0x80000001
MUX_VERSION = 4
MUX_MAX_FRAME = 256 * 1024
MUX_SECONDS = 2.0  # for the requests; a master still silent then gets ssh -O exit


class _Closed(OSError):
    """The master closed the connection."""


def _frame(*words: int) -> bytes:
    payload = struct.pack(f">{len(words)}I", *words)
    return struct.pack(">I", len(payload)) + payload


def _read_frame(conn: socket.socket) -> bytes:
    def exactly(size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = conn.recv(size - len(data))
            if not chunk:
                raise _Closed("the master closed the connection")
            data += chunk
        return data
    (size,) = struct.unpack(">I", exactly(4))
    if not 8 <= size <= MUX_MAX_FRAME:
        raise OSError(f"not a mux frame ({size} bytes)")
    return exactly(size)


def _said_done(conn: socket.socket) -> bool:
    """Read the master's hello, then its answer to the terminate request."""
    if struct.unpack(">I", _read_frame(conn)[:4])[0] != MUX_MSG_HELLO:
        return False
    try:
        reply = _read_frame(conn)
    except (_Closed, ConnectionResetError):
        return True  # the master exited before its answer, which ssh -O exit takes as done too
    kind, request = struct.unpack(">II", reply[:8])
    return kind == MUX_S_OK and request == 1


def terminate_masters(sock_paths: list[str], deadline: float) -> set[str]:
    """Ask every master to exit, as ``ssh -O exit`` does, all requests sent before any answer is read (a
    master reads them in order); the sockets whose master said OK."""
    sent: list[tuple[str, socket.socket]] = []
    for path in sock_paths:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.settimeout(max(0.01, deadline - time.monotonic()))
            conn.connect(path)
            conn.sendall(_frame(MUX_MSG_HELLO, MUX_VERSION) + _frame(MUX_C_TERMINATE, 1))
        except OSError:
            conn.close()
            continue
        sent.append((path, conn))
    done = set()
    for path, conn in sent:
        with conn:
            try:
                conn.settimeout(max(0.01, deadline - time.monotonic()))
                if _said_done(conn):
                    done.add(path)
            except (OSError, struct.error):
                continue
    return done


def close_masters_in(control_dir: str | None, prefix: str, timeout: float = 10.0) -> int:
    """Close every master whose socket is in the run's directory (``ssh -O exit``'s request), then remove it; the
    count closed.

    Only a directory named with ``prefix`` (one this collection made) is touched. ``timeout`` bounds the whole
    wait, however many masters there are.
    """
    if not control_dir or not os.path.isdir(control_dir) or not os.path.basename(
            control_dir.rstrip("/")).startswith(prefix):
        return 0
    procs = []
    deadline = time.monotonic() + timeout  # one wait for all of them, not one per master
    socks = [os.path.join(control_dir, name) for name in sorted(os.listdir(control_dir))]
    done = terminate_masters(socks, min(deadline, time.monotonic() + MUX_SECONDS))
    closed = len(done)
    for sock in socks:
        if sock in done:
            continue
        try:
            procs.append(subprocess.Popen(
                ["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "flodl-master"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        except OSError:
            continue
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
