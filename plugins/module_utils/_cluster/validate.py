# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one validator of a flodl ``cluster:`` block, for inventories and fdl files alike.

The same rules run on a cluster built from inventory variables and on the
merged ``cluster:`` block of an fdl project; only the names in the messages
differ (``host gpu-b (worker 1): flodl_local_devices`` for an inventory,
``cluster.workers[1] ("gpu-b").local_devices`` for an fdl file), chosen by a
:class:`Naming`. Every problem is collected: an operator fixing a cluster at
3 am wants the whole list in one run.

The rules are fdl-cli's strict load (unknown keys, types, required keys),
its validation before any host is touched, and the launcher's own checks
that a re-implementation should make up front (environment names, duplicate
hosts). The ones stricter than fdl-cli are listed in
docs/differences-from-fdl-cli.md.

This file holds the cluster and controller rules; one worker's rules are in
module_utils._cluster.worker_rules, the field checks both use in module_utils._cluster.field_checks.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.addresses import same_machine_findings
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.field_checks import FieldChecks, check_abs_path, check_arch, kind
from ansible_collections.flodl.cluster.plugins.module_utils._core.problems import INVENTORY, Naming, Place, Problem, texts
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.worker_rules import check_worker

CLUSTER_KEYS = ("controller", "workers", "env", "gpu_ram_share")
CONTROLLER_KEYS = ("host", "port", "path", "docker", "arch", "data_path", "join")
JOIN_KEYS = (
    "min_rank_start", "join_timeout", "target_ranks", "max_join_timeout", "open_admission", "discovery", "token",
    "tunnel_only", "start",
)
JOIN_UINTS = ("min_rank_start", "join_timeout", "target_ranks", "max_join_timeout")
JOIN_BOOLS = ("open_admission", "discovery", "tunnel_only")
JOIN_STARTS = ("auto", "manual", "hybrid")


def _check_join(join: Any, naming: Naming, out: FieldChecks) -> None:
    place = naming.controller("join")
    if not isinstance(join, Mapping):
        # A bare string here is often the token itself: say what it is, never what it holds.
        out.add(place, f"must be a map, got {kind(join, secret=True)}")
        return
    out.unknown_keys(join, JOIN_KEYS, lambda k: naming.sub(place, k))
    for key in JOIN_UINTS:
        out.uint(join.get(key), naming.sub(place, key))
    for key in JOIN_BOOLS:
        out.boolean(join.get(key), naming.sub(place, key))
    token = join.get("token")
    if token is not None and not isinstance(token, str):
        # The token is the run's HMAC salt: never shown.
        out.add(naming.sub(place, "token"), f"must be a string of 32 hex characters, got {kind(token, secret=True)}",
                "quote it")
    start = join.get("start")
    if start is not None and start not in JOIN_STARTS:
        out.add(naming.sub(place, "start"), f"must be one of auto | manual | hybrid, got {kind(start)}")


def cluster_problems(cluster: Any, naming: Naming = INVENTORY) -> list[str]:
    """Every problem of a ``cluster:`` block as text, in fdl-cli's order; [] when it is valid."""
    return texts(cluster_findings(cluster, naming))


def cluster_findings(cluster: Any, naming: Naming = INVENTORY) -> list[Problem]:
    """Every problem of a ``cluster:`` block, in fdl-cli's order, each with its worker; [] when it is valid."""
    out = FieldChecks()
    if not isinstance(cluster, Mapping):
        out.add(Place("cluster"), f"must be a map, got {kind(cluster)}")
        return out.items
    out.unknown_keys(cluster, CLUSTER_KEYS, naming.cluster)
    controller = cluster.get("controller")
    if not isinstance(controller, Mapping):
        out.add(naming.cluster("controller"), "is required: a map with host and path"
                if controller is None else f"must be a map, got {kind(controller)}")
        controller = {}
    out.unknown_keys(controller, CONTROLLER_KEYS, naming.controller)
    out.string(controller.get("host"), naming.controller("host"), required=True, what="the address workers dial back to")
    out.string(controller.get("path"), naming.controller("path"), required=True,
               what="the controller's view of the project root")
    check_abs_path(controller.get("path"), naming.controller("path"), "the project as the controller sees it", out)
    out.port(controller.get("port"), naming.controller("port"))
    for key in ("docker", "arch", "data_path"):
        out.string(controller.get(key), naming.controller(key))
    check_arch(controller.get("arch"), naming.controller("arch"), out)
    join = controller.get("join")
    if join is not None:
        _check_join(join, naming, out)
    discovery = isinstance(join, Mapping) and join.get("discovery") is True
    workers = cluster.get("workers")
    if workers is None and naming.fdl:
        out.add(naming.cluster("workers"), "required key is missing", "list the worker hosts under workers:")
        workers = []
    if not isinstance(workers, list):
        out.add(naming.cluster("workers"), f"must be a list of workers, got {kind(workers)}")
        workers = []
    if not workers and not discovery:
        if naming.fdl:
            out.add(naming.cluster("workers"), "is empty", "list the workers (an empty roster needs "
                    "controller.join.discovery: true)")
        else:
            out.add(naming.cluster("workers"), "is empty; add one inventory host per worker (an empty roster needs "
                    "flodl_controller_join.discovery: true). With the flodl.cluster.fdl_cluster inventory, look for "
                    "an 'Unable to parse' warning above: a broken fdl file leaves the group empty unless "
                    "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED=true")
    # fdl-cli's order: reserved keys in the cluster env, then in every worker env, then the field checks.
    out.env(cluster.get("env"), naming.cluster("env"), naming)
    out.share(cluster.get("gpu_ram_share"), naming.cluster("gpu_ram_share"))
    for index, worker in enumerate(workers):
        if isinstance(worker, Mapping):
            out.env(worker.get("env"), naming.worker(index, worker.get("host"), "env"), naming)
    seen: dict[str, int] = {}
    for index, worker in enumerate(workers):
        check_worker(index, worker, len(workers) > 1, naming, out)
        host = worker.get("host") if isinstance(worker, Mapping) else None
        if isinstance(host, str) and host.strip():
            if host in seen:
                out.add(naming.worker(index, host, "host"), f"{host!r} is also worker {seen[host]}",
                        "each machine appears once, with all its GPUs in local_devices (the launcher refuses "
                        "duplicate hosts)")
            seen.setdefault(host, index)
    for index, problem in same_machine_findings(workers, lambda i, h: str(naming.worker(i, h, "ssh"))):
        out.raw(problem, naming.worker(index, workers[index].get("host"), "ssh"))
    return out.items
