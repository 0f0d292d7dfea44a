# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a probe check is: one definition that every host's probe, parse and verdict iterate over.

Two kinds. A ``ProbeCheck`` is threshold-style (below); a ``ProbePart`` is a check that what a probe asks of a host
(an ``Ask``) turns on: the data path, a worker's checkout (``flodl_path``), arch and libc and pkill
(``flodl_prebuild``), the GPU count (``local_devices: all``), the live ranks (a launch that follows); its mark, its
sh part and its parser.

A check measures something on the first existing directory of a few paths (a sh part printing one mark line),
reads the line back (its parser) and judges the answer against a threshold (its finding). Its knob, a number in
module_utils._run.knobs.NUMBERS of the preflight phase, turns it on (above 0) and is its threshold. The checks
are listed in module_utils._probe.check_registry; a ``Finding`` is what any of preflight's checks notices.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Optional, TypeVar

ERROR = "error"
WARNING = "warning"
NOTE = "note"

# Where a check runs: each worker's data path and the controller's (here, or on the launch host in its session);
# the build's target dir on the build host (the first of target/cluster, target, the project root that exists).
DATA_PATH = "data_path"
TARGET_DIR = "target_dir"
PLACES = (DATA_PATH, TARGET_DIR)

A = TypeVar("A")  # what a check's parser makes of its line


@dataclass(frozen=True)
class Finding:
    """One thing preflight noticed about a host: ``level`` is error, warning or note."""

    level: str
    check: str
    message: str


@dataclass(frozen=True)
class ProbeCheck(Generic[A]):
    """One check, whole: its mark, script part, parser, judge, the knob that arms it and where it runs."""

    name: str  # its findings' ``check``, and its key in a probe's answers
    knob: str  # the preflight number (knobs.NUMBERS) that arms it above 0 and is its threshold
    mark: str  # its one answer line is ``<mark>=<text>``; the mark starts with ``__FLODL_``
    places: frozenset[str]  # of PLACES
    what: str  # what it measures, for a host whose probe did not answer ("free space")
    part: Callable[[Sequence[str]], str]  # sh: measure the first of the paths that is a directory, print the mark
    parse: Callable[[str], A]  # the text after ``<mark>=``
    judge: Callable[[str, Optional[A], float, str], Optional[Finding]]  # (host, answer or None, threshold, place)
    shown: Callable[[Optional[A]], Mapping[str, Any]]  # what a report shows of the answer beside the data path


@dataclass(frozen=True)
class Armed:
    """A check this run makes: its knob is set above 0, and that value is the threshold."""

    check: ProbeCheck[Any]
    threshold: float


@dataclass(frozen=True)
class Ask:
    """What one probe asks a host. Each part reads the field that turns it on (``ProbePart.asked``); the callers
    fill only what they know of the host: a worker its whole entry, the build host and the controller their arch."""

    data_path: Optional[str] = None  # the data path's two parts
    project: Optional[str] = None  # the worker's checkout (flodl_path)
    arch: bool = False  # the CPU arch alone (the build host, the controller)
    prebuilt: bool = False  # a binary built elsewhere runs there (flodl_prebuild): arch, libc and pkill
    gpus: bool = False  # the GPU count (local_devices: all)
    running: Optional[str] = None  # the rank binary whose live processes are counted (a launch that follows)


@dataclass(frozen=True)
class ProbePart(Generic[A]):
    """A check that is not a threshold: its mark, its sh part and the parser of what the part printed.

    ``section``: the part prints its mark alone on a line, then a command's own lines, which its parser reads
    (to the next mark); else it prints one ``<mark>=<text>`` line and its parser reads ``[text]``. What the
    parser makes of it fills the probe output's field ``name`` (preflight_probe.ProbeOutput), the report's key.
    """

    name: str
    mark: str  # starts with ``__FLODL_``
    section: bool
    asked: Callable[[Ask], Optional[str]]  # its sh part when the ask turns it on, else None
    parse: Callable[[Sequence[str]], A]


def first_line(lines: Sequence[str]) -> str:
    """The first non-empty line, stripped ("" when the command printed nothing)."""
    found = [ln.strip() for ln in lines if ln.strip()]
    return found[0] if found else ""
