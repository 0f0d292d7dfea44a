# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-worker summary lines that stay bounded as the cluster grows.

Each worker already gets its own task line and PLAY RECAP line from Ansible. A summary that adds one
more line per worker per phase makes a 128-worker run print hundreds of lines nobody reads. Up to
``FOLD_ABOVE`` workers (or with ``-v``) every worker keeps its own line; above that, a worker with a
problem still gets its own line, first, and the healthy ones are folded into one line per distinct
state ("ok — x86_64, glibc 2.36 (120 workers): h1, h2, ...").
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

FOLD_ABOVE = 32


@dataclass(frozen=True)
class Row:
    """One worker's summary: its own line, and what it shares with healthy workers in the same state."""

    host: str
    line: str
    state: str
    problem: bool = False


def should_fold(count: int, verbose: bool) -> bool:
    return not verbose and count > FOLD_ABOVE


def fold(rows: Sequence[Row], verbose: bool, indent: str = "  ") -> list[str]:
    """The lines to print: problems first, one each; the healthy rows folded by state above the threshold."""
    ordered = [r for r in rows if r.problem] + [r for r in rows if not r.problem]
    if not should_fold(len(rows), verbose):
        return [f"{indent}{r.line}" for r in ordered]
    lines = [f"{indent}{r.line}" for r in ordered if r.problem]
    groups: dict[str, list[str]] = {}
    for r in ordered:
        if not r.problem:
            groups.setdefault(r.state, []).append(r.host)
    for state, hosts in groups.items():
        lines.append(f"{indent}{state} ({len(hosts)} workers): {', '.join(hosts)}")
    lines.append(f"{indent}(healthy workers folded by state above {FOLD_ABOVE} workers; -v prints one line each)")
    return lines


def folded_summary(result: Mapping[str, Any], verbose: bool) -> list[str]:
    """A step result's ``summary`` (a header, then a line per host) with its ``summary_rows`` folded."""
    summary = [str(line) for line in result.get("summary") or []]
    rows = result.get("summary_rows")
    if not summary or not isinstance(rows, list) or len(rows) != len(summary) - 1:
        return summary
    return summary[:1] + fold([Row(host=str(r["host"]), line=str(r["line"]), state=str(r["state"]),
                                   problem=bool(r["problem"])) for r in rows], verbose, indent="")
