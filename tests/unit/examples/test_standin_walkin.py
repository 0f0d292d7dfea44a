"""The demo's stand-in join window (examples/demo/standin_walkin.py), on loopback: what the walk-in tests rely on."""
from __future__ import annotations

import binascii
import json
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "demo"))

import standin_walkin  # noqa: E402  pylint: disable=wrong-import-position

TOKEN = "0123456789abcdef0123456789abcdef"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _topology(port: int, ranks: int, join_timeout: float) -> dict:
    return {"controller": {"host": "127.0.0.1", "port": port,
                           "join": {"discovery": True, "min_rank_start": ranks, "target_ranks": ranks,
                                    "token": TOKEN, "join_timeout": join_timeout}},
            "workers": []}


def _connect(port: int) -> socket.socket:
    """A connection to the window, which may not be bound yet."""
    for _attempt in range(50):
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            time.sleep(0.05)
    pytest.fail("the window never opened")


def _agent(port: int, host: str, out: dict) -> None:
    """The demo agent's side of the wire: name, hello, then ranks, start, and one clean exit per rank."""
    spec = {"host": host, "controller_host": "127.0.0.1", "controller_port": port, "salt_hex": TOKEN,
            "local_devices": [0]}
    conn = _connect(port)
    with conn, conn.makefile("r", encoding="ascii") as reader:
        hex_spec = binascii.hexlify(json.dumps(spec).encode()).decode()
        conn.sendall(f"name {host}\nhello {hex_spec}\n".encode())
        lines = [reader.readline().strip(), reader.readline().strip()]
        out[host] = lines
        if lines[1] == "start":
            rank = lines[0].split()[1]
            conn.sendall(f"exit {rank} 0\ndone\n".encode())


def test_an_early_agent_waits_past_the_hello_bound_for_a_late_one(tmp_path, monkeypatch) -> None:
    """The first agents of a large cluster wait for the last ones to start (minutes at 500 workers): an admitted
    agent's silence is no failure. Before, the admission's read timeout stayed on its connection and every agent
    that waited longer than it was counted as lost."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(standin_walkin, "HELLO_SECONDS", 0.3)
    port, said, seen = _free_port(), [], {}
    window = standin_walkin.Window(_topology(port, 2, 20), said.append, 1.0)
    result: list[int] = []
    runner = threading.Thread(target=lambda: result.append(window.run()))
    runner.start()
    first = threading.Thread(target=_agent, args=(port, "h1", seen))
    first.start()
    time.sleep(1.0)  # h1 is admitted and silent for more than three hello bounds
    _agent(port, "h2", seen)
    first.join(10)
    runner.join(10)
    assert result == [0], said
    assert seen == {"h1": ["ranks 0", "start"], "h2": ["ranks 1", "start"]}
    assert not [line for line in said if "lost rank" in line]
    assert (tmp_path / "target" / "cluster" / "standin" / "agents" / "h1.hex").is_file()


def test_an_agent_silent_before_its_hello_is_dropped(tmp_path, monkeypatch) -> None:
    """The hello bound still holds before admission: a connection that says nothing takes no rank."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(standin_walkin, "HELLO_SECONDS", 0.3)
    port, said = _free_port(), []
    window = standin_walkin.Window(_topology(port, 1, 1.5), said.append, 1.0)
    result: list[int] = []
    runner = threading.Thread(target=lambda: result.append(window.run()))
    runner.start()
    with _connect(port):
        runner.join(10)
    assert result == [1]
    assert any("quorum not met: 0/1" in line for line in said), said


def test_the_window_backlog_holds_every_expected_agent(monkeypatch) -> None:
    """Agents started all at once (plain parallel ssh, 500 workers) dial faster than a loaded launcher accepts; the
    demo's agent dials once, for 5 s. With a backlog of 128, 118 of 500 agents could not connect (bench/README.md,
    stop 36): the window's backlog is its target ranks, at least 128."""
    backlogs = []

    class Recording(socket.socket):
        def listen(self, backlog=128):
            backlogs.append(backlog)
            super().listen(backlog)

    monkeypatch.setattr(standin_walkin.socket, "socket", Recording)
    for ranks in (300, 4):
        window = standin_walkin.Window(_topology(_free_port(), ranks, 0.2), lambda _line: None, 1.0)
        assert window.run() == 1  # nobody joined within the join timeout
    assert backlogs == [300, 128]
