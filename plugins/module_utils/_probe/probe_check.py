# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a threshold-style probe check is: one definition that every host's probe, parse and verdict iterate over.

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
