# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is a rank of this project already running on a worker? One probe part: its script and its parser.

A second run on the same hosts would have its launcher's pre-spawn cleanup stop the first run's ranks (every
process of the same binary path), so a launch that follows preflight adds this part to each worker's probe, and
the status playbook runs it alone. Pure functions only; the refusal is module_utils._run.runlock.refusal_message.
"""
from __future__ import annotations

from collections.abc import Sequence

from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import always_quote
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import ProbePart, first_line

MARK_RUNNING = "__FLODL_RUNNING__"


def running_script(binary: str) -> str:
    """POSIX sh printing ``__FLODL_RUNNING__=<n>``: processes whose executable is ``binary``.

    Reads /proc/<pid>/exe (so the probe's own command line, which holds the path, never counts), including a
    binary replaced on disk since it started (`` (deleted)``). Two processes in all: ``ls`` and ``awk``. The
    path travels in the environment, so no character of it is parsed by awk or by a pattern.
    """
    if not binary.startswith("/") or any(ch in binary for ch in "\n\r\0"):
        raise ValueError("running_script needs an absolute path without newlines or NUL")
    awk = (
        'BEGIN{s=" -> " ENVIRON["FLODL_RUNNING_BIN"]; d=s " (deleted)"; n=0} '
        "{l=length($0); if (substr($0, l-length(s)+1) == s || substr($0, l-length(d)+1) == d) n++} "
        f'END{{print "{MARK_RUNNING}=" n}}'
    )
    return (
        "LC_ALL=C ls -l /proc/[0-9]*/exe 2>/dev/null "
        f"| FLODL_RUNNING_BIN={always_quote(binary)} awk {always_quote(awk)}"
    )


def parse_count(lines: Sequence[str]) -> int | None:
    """The count after the mark; None when garbled."""
    count = first_line(lines)
    return int(count) if count.isdigit() else None


PART: ProbePart[int | None] = ProbePart(
    name="running", mark=MARK_RUNNING, section=False, parse=parse_count,
    asked=lambda ask: running_script(ask.running) if ask.running is not None else None)
