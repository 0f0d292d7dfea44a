# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether ``pkill`` exists on a worker (with ``flodl_prebuild``), as one probe part: its script, parser and finding.

The launcher clears a worker's stale ranks with pkill before it starts new ones. Pure functions only.
"""
from __future__ import annotations

from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import (
    WARNING, Finding, ProbePart, first_line)

MARK_PKILL = "__FLODL_PKILL__"
PKILL_SCRIPT = f"echo {MARK_PKILL}; command -v pkill >/dev/null 2>&1 && echo present || echo absent"


def pkill_part() -> str:
    """Its section: the mark, then ``present`` or ``absent``."""
    return PKILL_SCRIPT


def check_pkill(host: str, answer: str | None) -> Finding | None:
    """Only an explicit ``absent`` warns; an empty or garbled answer proves nothing."""
    if (answer or "").strip() != "absent":
        return None
    return Finding(
        WARNING,
        "pkill",
        f"{host}: pkill is not installed; stale ranks from an earlier run cannot be cleared before "
        "launch (teardown still works through the per-rank wrapper). Install procps to enable it.",
    )


PART: ProbePart[str] = ProbePart(name="pkill", mark=MARK_PKILL, section=True, parse=first_line,
                                 asked=lambda ask: pkill_part() if ask.prebuilt else None)
