"""STAND-IN for flodl's join window with walk-in agents -- a demo/test reference, NOT flodl.

Used by ``standin_launcher.py`` when the topology's ``controller.join.discovery`` is true. It checks
what upstream's launcher requires of such a topology (docs/launcher-contract.md, errata E13/E14):
``workers`` present (it may be empty), ``discovery: true`` with an explicit ``min_rank_start``, a
``join.token`` of exactly 32 hex characters, and ``target_ranks`` >= ``min_rank_start``. Then it binds
``controller.host:controller.port`` and admits the agents that dial in.

The wire between this stand-in and the demo's ``train`` in agent mode is the demo's own (flodl's is
binary and HMAC-framed): one line each way, ASCII.

* agent -> window: ``hello <FLODL_INTERNAL_AGENT_JSON as the agent got it>``; the window decodes the
  hex, checks ``host``/``controller_host``/``controller_port``/``salt_hex`` (= the token) and the
  agent's ``FLODL_HOST_NAME`` (sent as ``name <host>`` first), and refuses a second agent of a host;
* window -> agent: ``ranks <r,r,...>`` (contiguous, in join order), later ``start``;
* agent -> window: ``exit <rank> <code>`` per rank, then ``done``.

The spec each admitted agent presented is written, byte for byte, to
``<cwd>/target/cluster/standin/agents/<host>.hex``, so tests prove what each agent was given.
Lines printed follow upstream's wording where the collection reads them:
``host "h2" joined with ranks [1]``, ``host "h2" reports rank 1 exited with code 7``, and
``cluster join: FAILED — quorum not met: 1/3 ranks joined within ...``.
"""
from __future__ import annotations

import binascii
import json
import os
import re
import socket
import threading
import time

_HEX32 = re.compile(r"[0-9a-f]{32}")
# An agent's first two lines must come this quickly. Once admitted it is silent until every rank is in (a large
# cluster's agents start over minutes), so its connection then has no read timeout: the join window and the
# agent's own kill bound (the collection's agent timeout) bound that wait.
HELLO_SECONDS = 30.0


class WalkInError(Exception):
    pass


def check_topology(topo: dict) -> tuple[dict, int, int]:
    """(join block, min_rank_start, target_ranks), or WalkInError with upstream's reason."""
    if not isinstance(topo.get("workers"), list):
        raise WalkInError("workers (array) required")
    join = (topo.get("controller") or {}).get("join") or {}
    if join.get("discovery") is not True:
        raise WalkInError("not a discovery window")
    if not isinstance(join.get("min_rank_start"), int):
        raise WalkInError("discovery: true requires an explicit min_rank_start")
    token = join.get("token")
    if not isinstance(token, str) or not _HEX32.fullmatch(token):
        raise WalkInError("join.token must decode to exactly 16 bytes (32 hex characters)")
    target = join.get("target_ranks", join["min_rank_start"])
    if not isinstance(target, int) or target < join["min_rank_start"]:
        raise WalkInError("target_ranks must be >= min_rank_start")
    return join, int(join["min_rank_start"]), int(target)


class Window:
    def __init__(self, topo: dict, say, scale: float) -> None:
        self.join, self.quorum, self.target = check_topology(topo)
        self.host = str(topo["controller"]["host"])
        self.port = int(topo["controller"]["port"])
        self.say = say
        self.timeout = float(self.join.get("join_timeout", 300)) * scale
        self.lock = threading.Lock()
        self.ranks_taken = 0
        self.agents: dict[str, socket.socket] = {}
        self.reports: dict[str, list[tuple[int, int]]] = {}
        self.pending: dict[str, list[int]] = {}
        self.full = threading.Event()
        self.record_dir = os.path.join(os.getcwd(), "target", "cluster", "standin", "agents")

    def run(self) -> int:
        server = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((self.host, self.port))
        # A backlog for every agent expected: agents started all at once (plain parallel ssh, 500 workers) on a
        # loaded controller dial faster than this loop accepts, and the demo's agent gives up after 5 s.
        server.listen(max(128, self.target))
        server.settimeout(0.2)
        self.say(f"[standin-launcher] join window open on {self.host}:{self.port}: discovery, "
                 f"target {self.target} rank(s), quorum {self.quorum}, token-protected")
        deadline = time.monotonic() + self.timeout
        while not self.full.is_set() and time.monotonic() < deadline:
            try:
                conn, _addr = server.accept()
            except socket.timeout:
                continue
            threading.Thread(target=self._admit, args=(conn,), daemon=True).start()
        server.close()
        with self.lock:
            joined = self.ranks_taken
        if joined < self.quorum:
            self.say(f"cluster join: FAILED — quorum not met: {joined}/{self.quorum} ranks joined within the "
                     f"join_timeout ({self.timeout:g} s)")
            self._close_all()
            return 1
        self.say(f"[standin-launcher] target ranks reached: {joined} rank(s), starting")
        for conn in list(self.agents.values()):
            _send(conn, "start")
        return self._supervise()

    def _admit(self, conn: socket.socket) -> None:
        conn.settimeout(HELLO_SECONDS)
        reader = conn.makefile("r", encoding="ascii", newline="\n")
        try:
            name = reader.readline().strip().removeprefix("name ")
            hello = reader.readline().strip()
        except (OSError, UnicodeDecodeError):
            conn.close()
            return
        host, why = self._check(name, hello.removeprefix("hello "))
        with self.lock:
            if why is None and host in self.agents:
                why = f"duplicate host {host!r}"
            if why is None:
                devices = self._devices(hello.removeprefix("hello "))
                ranks = list(range(self.ranks_taken, self.ranks_taken + devices))
                if self.ranks_taken + devices > self.target:
                    why = "the window is full"
                else:
                    self.ranks_taken += devices
                    self.agents[host] = conn
                    self.pending[host] = ranks
        if why is not None:
            self.say(f"[standin-launcher] refused a walk-in agent ({name!r}): {why}")
            _send(conn, f"refused {why}")
            conn.close()
            return
        os.makedirs(self.record_dir, exist_ok=True)
        with open(os.path.join(self.record_dir, f"{host}.hex"), "w", encoding="ascii") as fh:
            fh.write(hello.removeprefix("hello "))
        conn.settimeout(None)
        self.say(f'host "{host}" joined with ranks [{", ".join(map(str, ranks))}]')
        _send(conn, "ranks " + ",".join(map(str, ranks)))
        with self.lock:
            if self.ranks_taken >= self.target:
                self.full.set()
        threading.Thread(target=self._listen, args=(host, reader), daemon=True).start()

    def _check(self, name: str, spec_hex: str) -> tuple[str, str | None]:
        try:
            spec = json.loads(binascii.unhexlify(spec_hex).decode("utf-8"))
        except (ValueError, binascii.Error):
            return name, "FLODL_INTERNAL_AGENT_JSON is not hex JSON"
        for key in ("host", "controller_host", "controller_port"):
            if key not in spec:
                return name, f"agent spec lacks {key}"
        if spec["host"] != name:
            return name, (f"resolved hostname {name!r} does not match envelope's worker.host {spec['host']!r}")
        if spec.get("salt_hex") != self.join["token"]:
            return name, "bad frame MAC (salt_hex is not this run's join token)"
        if str(spec["controller_host"]) != self.host or spec["controller_port"] != self.port:
            return name, "the spec names another controller"
        return str(spec["host"]), None

    @staticmethod
    def _devices(spec_hex: str) -> int:
        devices = json.loads(binascii.unhexlify(spec_hex).decode("utf-8")).get("local_devices")
        return len(devices) if isinstance(devices, list) and devices else 1

    def _listen(self, host: str, reader) -> None:
        got: list[tuple[int, int]] = []
        try:
            for line in reader:
                parts = line.split()
                if parts[:1] == ["exit"] and len(parts) == 3:
                    got.append((int(parts[1]), int(parts[2])))
                    if int(parts[2]) != 0:
                        self.say(f'host "{host}" reports rank {parts[1]} exited with code {parts[2]}')
                elif parts[:1] == ["done"]:
                    break
        except (OSError, ValueError):
            pass
        with self.lock:
            self.reports[host] = got

    def _supervise(self) -> int:
        while True:
            with self.lock:
                if len(self.reports) == len(self.agents):
                    break
            time.sleep(0.05)
        worst = 0
        for host, ranks in self.pending.items():
            codes = dict(self.reports.get(host, []))
            for rank in ranks:
                code = codes.get(rank)
                if code is None:
                    self.say(f'host "{host}" lost rank {rank}: its agent ended without reporting it')
                    code = 1
                worst = max(worst, code)
        self._close_all()
        return worst

    def _close_all(self) -> None:
        for conn in list(self.agents.values()):
            try:
                conn.close()
            except OSError:
                pass


def _send(conn: socket.socket, line: str) -> None:
    try:
        conn.sendall((line + "\n").encode("ascii"))
    except OSError:
        pass
