# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster topology: built from inventory variables and validated as flodl validates it.

The dict shape is flodl's ``cluster:`` block (docs/launcher-contract.md §2c), so the
same value validates here, ships to the launcher and round-trips through
``fdl.cluster.yml``. Errors name the inventory host and the ``flodl_*``
variable an operator has to fix. Ranks are module_utils._cluster.cluster_ranks, the
bytes shipped module_utils._launch.cluster_json.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._core.safety import blank
from ansible_collections.flodl.cluster.plugins.module_utils._core.problems import INVENTORY
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.validate import cluster_problems

DEFAULT_CONTROLLER_PORT = 1337
CONVENTION_DATA_PATH = "/flodl/data"


# What stands for the join token (the run's HMAC salt) wherever the topology is printed or registered.
REDACTED = "<redacted>"


class TopologyError(ValueError):
    """One or more configuration problems, one line each."""

    def __init__(self, problems: list[str], per_host: dict[str, list[str]] | None = None):
        self.problems = list(problems)
        # Set when the problems belong to inventory hosts (argument specs): each host can report its own.
        self.per_host = per_host
        super().__init__("\n".join(self.problems))


# --------------------------------------------------------------------------
# small predicates
# --------------------------------------------------------------------------


def _int_if_decimal(value: Any) -> Any:
    """``"2222"`` -> 2222 (``-e var=value`` and INI vars arrive as text); anything else unchanged."""
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value.strip())
    return value


def _float_if_number(value: Any) -> Any:
    """``"0.5"`` -> 0.5, blank text -> None (a survey answer left empty: unset); anything else unchanged."""
    if not isinstance(value, str):
        return value
    if not value.strip():
        return None
    try:
        return float(value.strip())
    except ValueError:
        return value  # the validator names it


# --------------------------------------------------------------------------
# inventory -> cluster dict
# --------------------------------------------------------------------------


# (inventory variable, fdl key) for worker fields copied when set.
_WORKER_OPTIONAL = (
    ("flodl_arch", "arch"),
    ("flodl_data_path", "data_path"),
    ("flodl_gpu_ram_share", "gpu_ram_share"),
    ("flodl_docker", "docker"),
)
_CONTROLLER_OPTIONAL = (
    ("flodl_controller_docker", "docker"),
    ("flodl_controller_arch", "arch"),
    ("flodl_controller_data_path", "data_path"),
    ("flodl_controller_join", "join"),
)


def worker_from_hostvars(
    inventory_hostname: str, hostvars: Mapping[str, Any], ssh: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """One fdl ``workers[]`` entry from an inventory host's variables (unvalidated).

    ``ssh`` is the block derived from the host's Ansible connection
    (module_utils._ssh.sshargs); None leaves the key out.
    """
    host = hostvars.get("flodl_host")
    worker: dict[str, Any] = {
        "host": inventory_hostname if blank(host) else str(host),
        "local_devices": hostvars.get("flodl_local_devices"),
        "nccl_socket_ifname": hostvars.get("flodl_nccl_socket_ifname"),
        "path": hostvars.get("flodl_path"),
    }
    if "flodl_ranks" in hostvars:
        worker["ranks"] = hostvars["flodl_ranks"]
    if ssh is not None:
        worker["ssh"] = dict(ssh)
    tunnel = hostvars.get("flodl_tunnel")
    if tunnel is not None:
        worker["tunnel"] = tunnel
    for var, key in _WORKER_OPTIONAL:
        if hostvars.get(var) is not None:
            worker[key] = hostvars[var]
    if "gpu_ram_share" in worker:  # -e and survey values arrive as text
        worker["gpu_ram_share"] = _float_if_number(worker["gpu_ram_share"])
        if worker["gpu_ram_share"] is None:
            del worker["gpu_ram_share"]
    env = hostvars.get("flodl_env")
    if env is not None:
        worker["env"] = env
    return worker


def cluster_from_inventory(
    workers: Iterable[tuple[str, Mapping[str, Any]]],
    cluster_vars: Mapping[str, Any],
    ssh_blocks: Mapping[str, Mapping[str, Any] | None] | None = None,
) -> dict[str, Any]:
    """The fdl ``cluster:`` block an inventory describes, workers in inventory order."""
    port = cluster_vars.get("flodl_controller_port")
    controller: dict[str, Any] = {
        "host": cluster_vars.get("flodl_controller_host"),
        "port": DEFAULT_CONTROLLER_PORT if port is None else _int_if_decimal(port),
        "path": cluster_vars.get("flodl_controller_path"),
    }
    for var, key in _CONTROLLER_OPTIONAL:
        if cluster_vars.get(var) is not None:
            controller[key] = cluster_vars[var]
    cluster: dict[str, Any] = {
        "controller": controller,
        "workers": [worker_from_hostvars(name, hv, (ssh_blocks or {}).get(name)) for name, hv in workers],
    }
    env = cluster_vars.get("flodl_cluster_env")
    if env is not None:
        cluster["env"] = env
    share = _float_if_number(cluster_vars.get("flodl_cluster_gpu_ram_share"))
    if share is not None:
        cluster["gpu_ram_share"] = share
    return cluster


# --------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------


def validate_cluster(cluster: Mapping[str, Any]) -> None:
    """Every rule fdl-cli and the launcher apply before a host is touched (module_utils._cluster.validate).

    Raises TopologyError with every problem, named by inventory variable.
    """
    problems = cluster_problems(cluster, INVENTORY)
    if problems:
        raise TopologyError(problems)


# --------------------------------------------------------------------------
# lookups phases share
# --------------------------------------------------------------------------


def effective_data_path(declared: str | None) -> tuple[str, bool]:
    """(path to check, whether it was declared) for a worker's or the controller's ``data_path``."""
    if blank(declared):
        return CONVENTION_DATA_PATH, False
    return str(declared), True


def holds_secret(topology: Mapping[str, Any] | None) -> bool:
    """True when the topology carries ``controller.join.token`` (the run's HMAC salt)."""
    join = ((topology or {}).get("controller") or {}).get("join") or {}
    return isinstance(join, Mapping) and join.get("token") is not None


def redacted_topology(topology: Mapping[str, Any]) -> dict[str, Any]:
    """A copy safe to print or register: the join token replaced (the salt must stay out of logs)."""
    out = json.loads(json.dumps(topology))
    if holds_secret(out):
        out["controller"]["join"]["token"] = REDACTED
    return out
