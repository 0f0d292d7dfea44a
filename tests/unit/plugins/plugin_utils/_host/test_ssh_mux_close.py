"""plugin_utils._proc.sshreuse_watch speaks OpenSSH's mux protocol to close masters (what ``ssh -O exit`` sends).

Each fake master is a real Unix socket served by a thread, answering as a master does, or not.
"""
from __future__ import annotations

import multiprocessing
import shutil
import socket
import struct
import tempfile
import threading
import time
from pathlib import Path

import pytest

from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import sshreuse_io
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc import sshreuse_watch as sw

PREFIX = "flodl-ssh-"
FAKE_SSH = '#!/bin/sh\necho "$@" >> "$SSH_LOG"\nexit 0\n'


def _read(conn: socket.socket) -> tuple[int, ...]:
    size = struct.unpack(">I", conn.recv(4, socket.MSG_WAITALL))[0]
    body = conn.recv(size, socket.MSG_WAITALL)
    return struct.unpack(f">{size // 4}I", body)


class FakeMaster(threading.Thread):
    """One connection, then: ``ok`` (hello, OK), ``gone`` (hello, then closes), ``bad-hello``, ``silent``."""

    def __init__(self, path: Path, behaviour: str) -> None:
        super().__init__(daemon=True)
        self.behaviour, self.received = behaviour, []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(1)
        self.release = threading.Event()
        self.start()

    def run(self) -> None:
        conn, _addr = self.server.accept()
        with conn:
            self.received.append(_read(conn))
            if self.behaviour == "silent":
                self.release.wait(5)
                return
            hello = sw.MUX_S_OK if self.behaviour == "bad-hello" else sw.MUX_MSG_HELLO
            conn.sendall(struct.pack(">III", 8, hello, sw.MUX_VERSION))
            self.received.append(_read(conn))
            if self.behaviour == "ok":
                conn.sendall(struct.pack(">III", 8, sw.MUX_S_OK, self.received[-1][1]))

    def stop(self) -> None:
        self.release.set()
        self.server.close()
        self.join(5)


@pytest.fixture
def control():
    # Short: a Unix socket path has a 108-byte limit, which pytest's tmp_path can pass.
    top = Path(tempfile.mkdtemp(prefix="mux", dir="/tmp"))
    path = top / f"{PREFIX}run"
    path.mkdir(mode=0o700)
    yield path
    shutil.rmtree(top, ignore_errors=True)


def test_masters_that_answer_or_exit_are_closed_without_an_ssh_process(control, stand_in_on_path):
    log = stand_in_on_path("ssh", FAKE_SSH)
    masters = [FakeMaster(control / "a", "ok"), FakeMaster(control / "b", "gone")]
    try:
        assert sw.close_masters_in(str(control), PREFIX) == 2
    finally:
        for master in masters:
            master.stop()
    for master in masters:  # hello (protocol 4), then terminate (request 1), as ssh -O exit sends
        assert master.received == [(sw.MUX_MSG_HELLO, 4), (sw.MUX_C_TERMINATE, 1)]
    assert not log.exists() and not control.exists()


def test_a_master_that_does_not_speak_the_protocol_gets_ssh_o_exit(control, stand_in_on_path):
    log = stand_in_on_path("ssh", FAKE_SSH)
    masters = [FakeMaster(control / "a", "ok"), FakeMaster(control / "b", "bad-hello")]
    (control / "c").write_text("")  # a stale socket file: nothing listens
    try:
        assert sw.close_masters_in(str(control), PREFIX) == 3  # a by the protocol, b and c by the (fake) ssh
    finally:
        for master in masters:
            master.stop()
    calls = sorted(log.read_text().splitlines())  # the fallbacks run at the same time
    assert calls == [f"-o ControlPath={control / 'b'} -O exit flodl-master",
                     f"-o ControlPath={control / 'c'} -O exit flodl-master"]


def test_a_silent_master_costs_at_most_the_request_budget(control, stand_in_on_path, monkeypatch):
    stand_in_on_path("ssh", FAKE_SSH)
    monkeypatch.setattr(sw, "MUX_SECONDS", 0.3)
    silent = FakeMaster(control / "a", "silent")
    start = time.monotonic()
    try:
        assert sw.terminate_masters([str(control / "a")], time.monotonic() + sw.MUX_SECONDS) == set()
    finally:
        silent.stop()
    assert time.monotonic() - start < 1.5


def test_masters_closed_beside_the_play_are_closed_before_the_worker_process_ends(control, tmp_path):
    """The launch step returns its result, then its masters close in a thread: Ansible's worker is a
    multiprocessing child, and Python joins that thread before the child exits."""
    done = tmp_path / "closed"
    slow = threading.Event()

    def worker() -> None:
        real = sshreuse_io.close_masters

        def close(path: str, timeout: float = 10.0) -> int:
            slow.wait(0.3)  # longer than the step's own return
            closed = real(path, timeout)
            done.write_text(str(closed))
            return closed

        sshreuse_io.close_masters = close
        FakeMaster(control / "a", "ok")
        assert sshreuse_io.close_masters_beside(str(control)) is not None
        # returns here, as the step does once its result is sent

    child = multiprocessing.get_context("fork").Process(target=worker)
    child.start()
    child.join(10)
    assert child.exitcode == 0 and done.read_text() == "1" and not control.exists()
    assert sshreuse_io.close_masters_beside(None) is None
