# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``flodl_preflight_min_free_gb``: free space on each data path and on the build's target dir, as one probe check.

The part (``df -Pk``) runs on the workers, on the launch host in its session, here for the controller, and on the
build host with its arch; its line is read by the same parser, and judged by one finding. Pure functions only.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import posix_quote
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import (
    DATA_PATH, ERROR, TARGET_DIR, WARNING, Finding, ProbeCheck)

KNOB = "flodl_preflight_min_free_gb"
MARK_FREE = "__FLODL_FREE_KB__"
KB_PER_GB = 1024 * 1024  # df -Pk counts 1024-byte blocks; a GB here is a GiB
# Per place: (what it is, why free space matters there, the fix).
SPACES = {
    DATA_PATH: ("the data path", "training writes its checkpoints and outputs there, and a file system that fills "
                "up fails the run hours in instead of now", "free space there (or point flodl_data_path at a "
                "larger mount)"),
    TARGET_DIR: ("the build's target dir", "each (host, libtorch variant) build writes a cargo target dir of its "
                 "own there, often several GB, and a full disk fails the builds part-way", "free space there "
                 "(`cargo clean` in old checkouts, or a larger mount for target/)"),
}


@dataclass(frozen=True)
class FreeSpace:
    """What the part printed: kB free (None when df printed no number) on ``path``'s file system."""

    kb: int | None
    path: str


def free_space_script(paths: Sequence[str]) -> str:
    """Free kB on the file system of the first of ``paths`` that is a directory: ``MARK=<kB> <dir>``.

    ``MARK=`` alone when none is (what is missing is another check's finding); ``MARK= <dir>`` when df printed
    no number. ``df -P`` keeps one line per file system, whatever the device name's length.
    """
    candidates = " ".join(posix_quote(p) for p in paths)
    return (f'd=; for c in {candidates}; do if [ -d "$c" ]; then d=$c; break; fi; done; '
            f'if [ -n "$d" ]; then k=$(df -Pk -- "$d" 2>/dev/null | awk \'NR==2 {{print $4}}\'); '
            f'echo "{MARK_FREE}=$k $d"; else echo "{MARK_FREE}="; fi')


def parse_free(value: str) -> FreeSpace:
    """``<kB> <dir>`` as free_space_script prints it after its mark."""
    kb, _sep, path = value.rstrip().partition(" ")
    return FreeSpace(int(kb) if kb.isdigit() else None, path.strip())


def check_free_space(host: str, space: FreeSpace | None, min_gb: float, place: str = DATA_PATH) -> Finding | None:
    """Below ``flodl_preflight_min_free_gb`` on ``place`` (DATA_PATH or TARGET_DIR) fails the host."""
    if not min_gb or space is None or not space.path:
        return None  # not asked, or nothing to measure (the missing directory is its own finding)
    what, why, fix = SPACES[place]
    if space.kb is None:
        return Finding(WARNING, "free_space", f"{host}: could not read the free space of {what} {space.path} (df "
                       f"printed no number), so {KNOB} was not checked there; make `df -Pk` work on that host.")
    if space.kb >= min_gb * KB_PER_GB:
        return None
    return Finding(ERROR, "free_space", f"{host}: only {space.kb / KB_PER_GB:.2f} GB free on {what} {space.path}, "
                   f"below {KNOB} ({min_gb:g} GB); {why}. Fix: {fix}, or lower {KNOB}.")


def shown(space: FreeSpace | None) -> Mapping[str, Any]:
    """``free_gb`` beside the data path in a host's report, when df gave a number."""
    return {"free_gb": round(space.kb / KB_PER_GB, 2)} if space is not None and space.kb is not None else {}


CHECK: ProbeCheck[FreeSpace] = ProbeCheck(
    name="free_space", knob=KNOB, mark=MARK_FREE, places=frozenset((DATA_PATH, TARGET_DIR)), what="free space",
    part=free_space_script, parse=parse_free, judge=check_free_space, shown=shown)
