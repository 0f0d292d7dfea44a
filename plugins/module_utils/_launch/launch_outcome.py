# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which worker a launch's failure belongs to, from what flodl's launcher printed, and each worker's entry.

flodl's launcher runs on one host but names the host and global rank of a rank that exits non-zero, on
its stderr: ``cluster launcher: host "h2" reports rank 2 exited with code 7; ...`` (the host as Rust's
``{:?}`` prints a string). The launch step reads every output line for it, so that PLAY RECAP charges
that worker, not the host the run-once step ran on.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._core.phase_result import entry

# A Rust debug string: quotes and backslashes escaped, other characters as ``\n``, ``\u{..}``.
_REPORT = re.compile(r'host "((?:[^"\\]|\\.)*)" reports rank (\d+) exited with code (-?\d+)')
_ESCAPE = re.compile(r"\\(u\{[0-9a-fA-F]{1,6}\}|.)")
_NAMED = {"n": "\n", "r": "\r", "t": "\t", "0": "\0"}
MAX_REPORTS = 1024  # a launcher printing reports in a loop must not grow the result without end
# What the launcher's own teardown does to the ranks it stops (SIGTERM, SIGKILL, as a code or a shell's
# 128+N): a consequence of the failure, not its cause, when some rank reported a code of its own.
TEARDOWN_CODES = frozenset({-1, -9, -15, 137, 143})


@dataclass(frozen=True)
class RankExit:
    host: str
    rank: int
    code: int


def _unescape(text: str) -> str:
    def one(m: re.Match) -> str:
        code = m.group(1)
        if code.startswith("u{"):
            return chr(int(code[2:-1], 16))
        return _NAMED.get(code, code)
    return _ESCAPE.sub(one, text)


def rank_exit(line: str) -> RankExit | None:
    """The rank exit one line of the launcher's output reports, if it is such a line."""
    if "reports rank" not in line:  # most lines: no regular expression at all
        return None
    m = _REPORT.search(line)
    return RankExit(_unescape(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


class RankExits:
    """Every rank exit the launcher reported, in order, each (host, rank) once; fed line by line."""

    def __init__(self) -> None:
        self.seen: list[RankExit] = []
        self._keys: set[tuple[str, int]] = set()

    def see(self, line: str) -> None:
        found = rank_exit(line)
        if found is not None and found.code != 0 and (found.host, found.rank) not in self._keys \
                and len(self.seen) < MAX_REPORTS:
            self._keys.add((found.host, found.rank))
            self.seen.append(found)

    def as_data(self) -> list[dict[str, Any]]:
        return [{"host": x.host, "rank": x.rank, "code": x.code} for x in self.seen]


def charged(exits: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The reports that are a failure's cause: all of them, but the teardown's kills when another is left."""
    own = [x for x in exits if int(x["code"]) not in TEARDOWN_CODES]
    return own or list(exits)


def _ranks_text(exits: list[Mapping[str, Any]]) -> str:
    return ", ".join(f"rank {x['rank']} exited with code {x['code']}" for x in exits)


def launch_entries(planned: Mapping[str, Mapping[str, Any]], result: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each worker's launch entry once the launch ended: ``planned`` is launch_env's ``per_host`` (by inventory
    name, each with its flodl ``host`` and ``ranks``), ``result`` the launch step's (``rank_exits``, ``failed``).

    A failed launch fails the workers the launcher named (their rank and code); one that names nobody fails
    every worker, since the launcher's own failure belongs to the whole run. The others are ok, stopped with
    the run. A passing launch keeps every worker ok, with any tolerated rank exit said.
    """
    ended = str(result.get("msg") or "").split("\n", 1)[0]
    failed = bool(result.get("failed"))
    exits = list(result.get("rank_exits") or [])
    blamed = charged(exits) if failed else exits
    names = {str((found.get("data") or {}).get("host", name)): name for name, found in planned.items()}
    mine: dict[str, list[Mapping[str, Any]]] = {}
    for x in blamed:
        mine.setdefault(names.get(str(x["host"]), ""), []).append(x)
    hosts = [n for n in mine if n]
    out: dict[str, dict[str, Any]] = {}
    for name, found in planned.items():
        data = dict(found.get("data") or {})
        own = mine.get(name, [])
        ranks = data.get("ranks")
        if own:
            data["rank_exits"] = [dict(x) for x in own]
        if failed and own:
            out[name] = entry("failed", f"flodl's launcher reports: {_ranks_text(own)}; {ended}", **data)
        elif failed and not hosts:
            out[name] = entry("failed", f"the launch failed and flodl's launcher named no failing host: {ended}",
                              **data)
        elif failed:
            out[name] = entry("ok", f"ranks {ranks}: stopped with the run, which failed on {', '.join(hosts)}; "
                              f"{ended}", **data)
        elif own:
            out[name] = entry("ok", f"ranks {ranks}; flodl's launcher reports {_ranks_text(own)}, and the run "
                              f"went on; {ended}", **data)
        else:
            out[name] = entry("ok", f"{found.get('msg') or f'ranks {ranks}'}; {ended}", **data)
    return out


def reported(result: Mapping[str, Any], planned: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The launch step's result with each worker's entry: a failed launch fails those entries instead of the
    step, which ran on one worker that is not to blame (``launch_failed`` says the launch failed)."""
    out = dict(result, per_host=launch_entries(planned, result))
    if out.pop("failed", False):
        failing = sorted(n for n, e in out["per_host"].items() if e["status"] == "failed")
        # failed=False said outright: Ansible fails a result without the key whose rc is not 0.
        out.update(failed=False, launch_failed=True, _ansible_verbose_always=True,
                   msg=f"{out.get('msg', '')}\nworkers failed by this launch: {', '.join(failing)}")
    return out
