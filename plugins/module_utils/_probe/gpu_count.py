# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU count (``flodl_local_devices: all``), as one probe part: its script and its parser.

The workers' probe and the launch host's session run it as a section; the controller here and the launch's own
count run the bare script. What a count means for a worker (no rank without a GPU) is
module_utils._preflight.preflight_findings.check_gpus, which reads the worker's devices. Pure functions only.
"""
from __future__ import annotations

from collections.abc import Sequence

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.variants import GpuCounts
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import ProbePart

MARK_GPUS = "__FLODL_GPUS__"
# docs/launcher-contract.md §7a, verbatim: prints "<nvidia> <amd>".
GPU_COUNT_SCRIPT = (
    "n=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l); "
    "a=$(grep -l '^vendor_id 4098$' /sys/class/kfd/kfd/topology/nodes/*/properties 2>/dev/null | wc -l); "
    'echo "$n $a"'
)


def gpu_part() -> str:
    """The GPU count as a section of its own: its mark, then the script's lines (the last one counts)."""
    return f"echo {MARK_GPUS}; {GPU_COUNT_SCRIPT}"


def section_text(lines: Sequence[str]) -> str:
    """The section as the script printed it (check_gpus and :func:`parse_gpu_counts` read its last line)."""
    return "\n".join(lines)


def parse_gpu_counts(text: str) -> GpuCounts:
    """The counts from the last non-empty line (``<nvidia> <amd>``); anything else raises ValueError."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    if not lines:
        raise ValueError("the GPU count printed nothing")
    fields = lines[-1].split()
    if len(fields) != 2 or not all(f.isdigit() for f in fields):
        raise ValueError(f"expected two counts '<nvidia> <amd>', got {lines[-1]!r}")
    return GpuCounts(int(fields[0]), int(fields[1]))


PART: ProbePart[str] = ProbePart(name="gpus", mark=MARK_GPUS, section=True, parse=section_text,
                                 asked=lambda ask: gpu_part() if ask.gpus else None)
