# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The registry of probe checks (module_utils._probe.probe_check), and what every host runs of it.

``PARTS``: the checks what a probe asks (a ``probe_check.Ask``) turns on, each a mark, an sh part and a parser
defined once (preflight_probe.parse_probe reads every one of them). ``CHECKS``: the threshold-style checks, below.

The workers' probe, the launch host's session, the controller's local run and the build host's probe are each
:func:`scripts` of what they ask, with the armed checks' parts; the one parser fills each answer (:func:`answer`);
every verdict calls the armed checks' judges (:func:`findings`). Adding a check: its module here in ``_probe``, a
line in ``CHECKS``, its knob in module_utils._run.knobs.NUMBERS (phase preflight) and in the preflight role's
argument spec.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._probe import (
    abi, data_path, free_space, gpu_count, live_ranks, pkill, project_checkout)
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import (
    Armed, Ask, Finding, ProbeCheck, ProbePart)
from ansible_collections.flodl.cluster.plugins.module_utils._run.run_model import RunSettings

CHECKS: tuple[ProbeCheck[Any], ...] = (free_space.CHECK,)
PARTS: tuple[ProbePart[Any], ...] = (data_path.DIR, data_path.READ, project_checkout.PART, abi.ARCH, abi.LIBC,
                                     pkill.PART, gpu_count.PART, live_ranks.PART)


def line_part(line: str) -> tuple[ProbePart[Any], str] | None:
    """(the part, the text after its mark) when ``line`` (stripped) is a one-line part's ``<mark>=<text>``."""
    for part in PARTS:
        if not part.section and line.startswith(part.mark + "="):
            return part, line[len(part.mark) + 1:]
    return None


def section_part(line: str) -> ProbePart[Any] | None:
    """The part whose section ``line`` (stripped) opens, if any."""
    return next((part for part in PARTS if part.section and line == part.mark), None)


def armed(settings: RunSettings, place: str) -> tuple[Armed, ...]:
    """The checks this run makes at ``place``: each whose knob is set above 0, with that value as its threshold."""
    found = ((check, settings.preflight_number(check.knob)) for check in CHECKS if place in check.places)
    return tuple(Armed(check, value) for check, value in found if value is not None and value > 0)


def scripts(ask: Ask, checks: Sequence[Armed] = (), paths: Sequence[str] | None = None) -> list[str]:
    """The sh parts ``ask`` turns on, in ``PARTS`` order, then the armed ``checks``' parts, each measuring the first
    of ``paths`` that is a directory (by default the asked data path)."""
    where = tuple(paths) if paths is not None else tuple(p for p in (ask.data_path,) if p is not None)
    asked = (part.asked(ask) for part in PARTS)
    return [*(s for s in asked if s is not None), *(a.check.part(where) for a in checks)]


def answer(line: str) -> tuple[str, Any] | None:
    """(check name, parsed answer) when ``line`` (stripped) is a registered check's mark line, else None."""
    for check in CHECKS:
        if line.startswith(check.mark + "="):
            return check.name, check.parse(line[len(check.mark) + 1:])
    return None


def findings(host: str, answers: Mapping[str, Any], checks: Sequence[Armed], place: str) -> list[Finding]:
    """Each armed check's judgement of its answer on ``host`` (None when the host printed none: its own rule)."""
    judged = (a.check.judge(host, answers.get(a.check.name), a.threshold, place) for a in checks)
    return [f for f in judged if f is not None]


def shown(answers: Mapping[str, Any], checks: Sequence[Armed]) -> dict[str, Any]:
    """What a host's report shows of the armed checks' answers, beside its data path."""
    out: dict[str, Any] = {}
    for a in checks:
        out.update(a.check.shown(answers.get(a.check.name)))
    return out


def unanswered(checks: Sequence[Armed]) -> str:
    """What was not checked on a host whose probe did not answer, and the knobs: ``free space ... (knob)``."""
    what = " and ".join(a.check.what for a in checks)
    verb = "was" if len(checks) == 1 else "were"
    return f"{what} {verb} not checked ({', '.join(a.check.knob for a in checks)})"
