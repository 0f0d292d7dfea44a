# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster topology: built from inventory variables, validated as flodl
validates it, ranks populated, serialised byte-for-byte as fdl-cli does.

The dict shape is flodl's ``cluster:`` block (docs/launcher-contract.md §2c), so the
same value validates here, ships to the launcher and round-trips through
``fdl.cluster.yml``. Errors name the inventory host and the ``flodl_*``
variable an operator has to fix.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils.problems import INVENTORY
from ansible_collections.flodl.cluster.plugins.module_utils.validate import JOIN_KEYS, cluster_problems
from ansible_collections.flodl.cluster.plugins.module_utils.variants import AMD, CPU, variant_vendor

DEFAULT_CONTROLLER_PORT = 1337
CONVENTION_DATA_PATH = "/flodl/data"


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


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


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
    (module_utils.sshargs); None leaves the key out.
    """
    host = hostvars.get("flodl_host")
    worker: dict[str, Any] = {
        "host": inventory_hostname if _blank(host) else str(host),
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
    """Every rule fdl-cli and the launcher apply before a host is touched (module_utils.validate).

    Raises TopologyError with every problem, named by inventory variable.
    """
    problems = cluster_problems(cluster, INVENTORY)
    if problems:
        raise TopologyError(problems)


# --------------------------------------------------------------------------
# ranks
# --------------------------------------------------------------------------


def device_count(worker: Mapping[str, Any], probed: Mapping[str, tuple[int, int]] | None = None) -> int:
    """Ranks a worker contributes: its list length, or the probed count for ``all``.

    ``probed`` maps host to (nvidia, amd) GPU counts. The worker's variant
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
        count = amd if vendor == AMD else nvidia
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
    cluster: Mapping[str, Any], probed: Mapping[str, tuple[int, int]] | None = None
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


# --------------------------------------------------------------------------
# serialisation (docs/launcher-contract.md §2f)
# --------------------------------------------------------------------------


def _ordered_ssh(ssh: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("target", "port", "user", "identity_file"):
        if ssh.get(key) is not None:
            out[key] = ssh[key]
    if ssh.get("options"):
        out["options"] = list(ssh["options"])
    return out


def _sorted_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: env[k] for k in sorted(env)}


def _as_float(value: Any) -> float:
    # serde writes f64, so an integer share still prints as 1.0.
    return float(value)


def _ordered_worker(worker: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "host": worker["host"],
        "ranks": list(worker.get("ranks", [])),
        "local_devices": worker["local_devices"],
        "nccl_socket_ifname": worker.get("nccl_socket_ifname") or "",
        "path": worker["path"],
    }
    # A mapping under "ssh" means the file declared the block: upstream keeps
    # it, empty or not (Option<Ssh> is Some). No key (or None) omits it.
    if isinstance(worker.get("ssh"), Mapping):
        out["ssh"] = _ordered_ssh(worker["ssh"])
    if worker.get("tunnel") is True:
        out["tunnel"] = True
    for key in ("arch", "data_path"):
        if worker.get(key) is not None:
            out[key] = worker[key]
    if worker.get("gpu_ram_share") is not None:
        out["gpu_ram_share"] = _as_float(worker["gpu_ram_share"])
    if worker.get("docker") is not None:
        out["docker"] = worker["docker"]
    if worker.get("env"):
        out["env"] = _sorted_env(worker["env"])
    return out


def ordered_cluster(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """The cluster with flodl's struct key order and omission rules applied."""
    ctl = cluster["controller"]
    port = ctl.get("port")
    controller: dict[str, Any] = {
        "host": ctl["host"],
        "port": DEFAULT_CONTROLLER_PORT if port is None else port,
        "path": ctl["path"],
    }
    for key in ("docker", "arch", "data_path"):
        if ctl.get(key) is not None:
            controller[key] = ctl[key]
    if ctl.get("join") is not None:
        controller["join"] = {k: ctl["join"][k] for k in JOIN_KEYS if ctl["join"].get(k) is not None}
    out: dict[str, Any] = {
        "controller": controller,
        "workers": [_ordered_worker(w) for w in cluster.get("workers", [])],
    }
    if cluster.get("env"):
        out["env"] = _sorted_env(cluster["env"])
    if cluster.get("gpu_ram_share") is not None:
        out["gpu_ram_share"] = _as_float(cluster["gpu_ram_share"])
    return out


def serde_float(value: float) -> str:
    """A finite f64 as serde_json (ryu) prints it: shortest digits, Rust's layout.

    Positional when the decimal exponent of the first digit is in -5..15
    (``0.00001``, ``1000000000000000.0``), else scientific with a bare
    exponent (``1e-6``, ``1.5e-7``, ``1e16``); integral values keep ``.0``.
    Python's ``repr`` already yields the shortest round-trip digits, so only
    the layout is redone here. Non-finite values are ``null`` in serde_json.
    """
    if not math.isfinite(value):
        return "null"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0.0"
    digits_t, exp = _shortest_digits(abs(value))
    digits = "".join(digits_t)
    length = len(digits)
    point = length + exp  # position of the decimal point relative to the digits
    if 0 <= exp and point <= 16:
        return sign + digits + "0" * exp + ".0"
    if 0 < point <= 16:
        return sign + digits[:point] + "." + digits[point:]
    if -5 < point <= 0:
        return sign + "0." + "0" * -point + digits
    mantissa = digits if length == 1 else digits[0] + "." + digits[1:]
    return f"{sign}{mantissa}e{point - 1}"


def _shortest_digits(value: float) -> tuple[list[str], int]:
    """(significant digits without trailing zeros, exponent of the last digit) of ``repr(value)``."""
    text = repr(value)
    mantissa, _sep, exp_text = text.partition("e")
    exp = int(exp_text) if exp_text else 0
    whole, _dot, frac = mantissa.partition(".")
    digits = list((whole + frac).lstrip("0"))
    exp -= len(frac)
    while len(digits) > 1 and digits[-1] == "0":
        digits.pop()
        exp += 1
    return digits, exp


def _serde(value: Any, indent: str | None, out: list[str]) -> None:
    # serde_json's formatters: PrettyFormatter (two spaces, one item per line) when ``indent`` is a string,
    # CompactFormatter (no whitespace at all) when it is None; [] / {} when empty, keys in the value's order.
    if isinstance(value, (Mapping, list, tuple)):
        mapping = isinstance(value, Mapping)
        items = list(value.items()) if mapping else list(value)
        if not items:
            out.append("{}" if mapping else "[]")
            return
        inner = None if indent is None else indent + "  "
        out.append(("{" if mapping else "[") + ("" if inner is None else "\n"))
        for index, item in enumerate(items):
            if index:
                out.append("," if inner is None else ",\n")
            if inner is not None:
                out.append(inner)
            if mapping:
                key, item = item
                out.append(json.dumps(str(key), ensure_ascii=False) + (":" if inner is None else ": "))
            _serde(item, inner, out)
        out.append(("" if indent is None else "\n" + indent) + ("}" if mapping else "]"))
    elif isinstance(value, float):
        out.append(serde_float(value))
    else:
        out.append(json.dumps(value, ensure_ascii=False))


def serde_pretty(value: Any) -> str:
    """``serde_json::to_string_pretty`` bytes for plain JSON data (strings escape as serde does)."""
    out: list[str] = []
    _serde(value, "", out)
    return "".join(out)


def serde_compact(value: Any) -> str:
    """``serde_json::to_string`` bytes for plain JSON data (same key order and floats as the pretty form)."""
    out: list[str] = []
    _serde(value, None, out)
    return "".join(out)


def cluster_json(cluster: Mapping[str, Any]) -> str:
    """Pretty JSON exactly as fdl-cli's serde_json emits it (no trailing newline)."""
    return serde_pretty(ordered_cluster(cluster))


# --------------------------------------------------------------------------
# lookups phases share
# --------------------------------------------------------------------------


def effective_data_path(entry: Mapping[str, Any]) -> tuple[str, bool]:
    """(path to check, whether it was declared) for a worker or the controller."""
    declared = entry.get("data_path")
    if _blank(declared):
        return CONVENTION_DATA_PATH, False
    return str(declared), True


def remote_workers(cluster: Mapping[str, Any], controller_identity: str) -> list[dict[str, Any]]:
    """Workers that are not the controller's own box, compared by logical host label.

    Not by address: a container on the controller machine is a distinct
    host with its own variant and must be probed and built separately.
    """
    return [w for w in cluster.get("workers", []) if w.get("host") != controller_identity]
