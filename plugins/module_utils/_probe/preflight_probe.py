# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight's one-round-trip host probe: the POSIX-sh script and the parse of what it printed.

Pure functions only (no I/O): the action plugin ``flodl.cluster.preflight_check`` runs the
script over ssh and feeds the raw output here; what the answers mean is
module_utils/_preflight/preflight_findings.py and module_utils/_preflight/preflight_verdict.py.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import posix_quote
from ansible_collections.flodl.cluster.plugins.module_utils._probe import check_registry
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import Armed, Ask

SENTINEL_PREFIX = "__FLODL_"  # every part's marks start so; no command output does
MARK_END = "__FLODL_END__"

# A host's preflight status: one vocabulary for workers, the launch host and the controller.
STATUS_OK = "ok"
STATUS_WARNING = "warning"
STATUS_ERROR = "error"
STATUS_UNREACHABLE = "unreachable"


def restatus(report: dict[str, Any]) -> None:
    """A host report's status after messages were added to its lists (its ``errors``, ``warnings``): an error fails
    it, a warning turns ``ok`` into ``warning``; a worse status stays."""
    if report["errors"]:
        report["status"] = STATUS_ERROR
    elif report["warnings"] and report["status"] == STATUS_OK:
        report["status"] = STATUS_WARNING


def probe_script(ask: Ask, checks: Sequence[Armed] = (), paths: Sequence[str] | None = None) -> str:
    """The whole POSIX-sh probe for one host: one ssh, every answer sentinel-delimited, read back by
    :func:`parse_probe`. The parts ``ask`` turns on, then the armed ``checks`` (module_utils._probe.check_registry.armed)
    on the first of ``paths`` that exists (by default the asked data path), then the end mark.
    """
    return "; ".join([*check_registry.scripts(ask, checks, paths), f"echo {MARK_END}"])


def remote_command(script: str) -> str:
    """Run the probe under ``sh`` whatever the remote login shell is (fish, csh...)."""
    return "sh -c " + posix_quote(script)


@dataclass
class ProbeOutput:
    """What a probe printed; ``None`` for a section that did not run or did not answer."""

    dir_ok: bool | None = None
    read_ok: bool | None = None
    project: str | None = None  # "1", "2" or "0" (project_script); None when not asked
    uname: str | None = None
    ldd: str | None = None
    pkill: str | None = None
    gpus: str | None = None
    running: int | None = None  # live_ranks: processes of this project's rank binary; None when not asked
    answers: dict[str, Any] = field(default_factory=dict)  # probe check name -> its parsed answer, when printed
    complete: bool = False
    sections: dict[str, list[str]] = field(default_factory=dict)


def parse_probe(stdout: str) -> ProbeOutput:
    """Split the probe's stdout on its sentinels (exact lines, so shell noise cannot fake one)."""
    out = ProbeOutput()
    current: str | None = None
    parsed: dict[str, Any] = {}  # a registry part's name -> what its parser made of its line or section
    for raw in stdout.splitlines():
        line = raw.strip()
        found = check_registry.answer(line)
        if found is not None:
            out.answers[found[0]] = found[1]
            current = None  # a mark ends a section, whichever part printed it
            continue
        one = check_registry.line_part(line)
        if one is not None:
            parsed[one[0].name] = one[0].parse([one[1]])
            current = None
            continue
        if check_registry.section_part(line) is not None:
            current = line
            out.sections[current] = []
            continue
        if line == MARK_END:
            out.complete = True
            current = None
            continue
        if line.startswith(SENTINEL_PREFIX):
            current = None  # another part's mark (the launch host's own end) ends a section too
            continue
        if current is not None:
            out.sections[current].append(raw.rstrip("\r"))

    for part in check_registry.PARTS:
        if part.section and part.mark in out.sections:
            parsed[part.name] = part.parse(out.sections[part.mark])
    for name, value in parsed.items():
        setattr(out, name, value)  # ProbeOutput's field of that name: the report reads it there
    return out


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else ""
