# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster's ranks: how many each worker contributes (its device list, or its counted GPUs
for ``all``) and the sequential numbering flodl's launcher expects.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.variants import CPU, GpuCounts, variant_vendor


def device_count(worker: Mapping[str, Any], probed: Mapping[str, GpuCounts] | None = None) -> int:
    """Ranks a worker contributes: its list length, or the probed count for ``all``.

    ``probed`` maps host to its GpuCounts. The worker's variant
    picks the vendor; without one a host that reports both is ambiguous.
    """
    devices = worker.get("local_devices")
    if devices != "all":
        return len(devices)
    host = worker["host"]
    if probed is None or host not in probed:
        raise TopologyError([f"host {host}: flodl_local_devices is `all` but its GPUs were not counted"])
    nvidia, amd = probed[host]
    arch = worker.get("arch")
    vendor = variant_vendor(arch) if arch else None
    if vendor not in (None, CPU):
        count = GpuCounts(nvidia, amd).of(vendor)
    elif nvidia and amd:
        raise TopologyError(
            [
                f"host {host}: flodl_local_devices is `all` and the host has {nvidia} NVIDIA and {amd} AMD GPUs; "
                "one libtorch build serves one vendor, so the rank count cannot be inferred; "
                "set flodl_arch to a GPU variant (e.g. precompiled/cu128 or precompiled/rocm70) "
                "or list the devices explicitly"
            ]
        )
    else:
        count = nvidia + amd
    if count == 0:
        raise TopologyError(
            [
                f"host {host}: flodl_local_devices is `all` but the host reports 0 GPUs "
                f"(nvidia-smi: {nvidia}, AMD KFD: {amd}); check the driver or list devices explicitly"
            ]
        )
    return count


def too_few_ranks(cluster: Mapping[str, Any]) -> str | None:
    """Before contact: a cluster whose explicit device lists add up to fewer than 2 ranks can never launch.

    An ``all`` worker is counted at launch; with one, the total is not known yet and nothing is said.
    """
    workers = [w for w in cluster.get("workers") or [] if isinstance(w, Mapping)]
    lists = [w.get("local_devices") for w in workers]
    if not workers or not all(isinstance(d, list) for d in lists):
        return None
    total = sum(len(d) for d in lists)
    if total >= 2:
        return None
    return (f"cluster: {total} rank(s) in total from the workers' flodl_local_devices; flodl's launcher needs at "
            "least 2, so the launch would be refused after every build. Add a worker or a device, or run the "
            "command without the cluster launcher")


def populate_ranks(
    cluster: Mapping[str, Any], probed: Mapping[str, GpuCounts] | None = None
) -> dict[str, Any]:
    """A copy with ``ranks`` filled sequentially in worker order; needs >= 2 ranks."""
    out = json.loads(json.dumps(cluster))
    problems: list[str] = []
    next_rank = 0
    for worker in out["workers"]:
        try:
            count = device_count(worker, probed)
        except TopologyError as exc:
            problems.extend(exc.problems)
            continue
        worker["ranks"] = list(range(next_rank, next_rank + count))
        next_rank += count
    if problems:
        raise TopologyError(problems)
    if out["workers"] and next_rank < 2:
        raise TopologyError(
            [
                f"cluster: {next_rank} rank(s) in total; a cluster needs at least 2 "
                "(add a worker or a device, or run without the cluster launcher)"
            ]
        )
    return out
