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
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils.addresses import same_machine_findings
from ansible_collections.flodl.cluster.plugins.module_utils.problems import FDL, INVENTORY, Naming, Place, Problem, texts, worded
from ansible_collections.flodl.cluster.plugins.module_utils.problems import at as _at
from ansible_collections.flodl.cluster.plugins.module_utils.safety import (
    absolute_path_problem,
    host_name_problem,
    relative_path_problem,
    ssh_target_problem,
)

# Naming, INVENTORY and FDL live with the problems they name (module_utils.problems); importable from here too.
__all__ = [
    "CLUSTER_KEYS", "CONTROLLER_KEYS", "FDL", "INVENTORY", "JOIN_KEYS", "Naming", "RESERVED_EXACT", "RESERVED_PREFIX",
    "SSH_KEYS", "WORKER_KEYS", "cluster_findings", "cluster_problems", "is_reserved_env_key", "kind",
]

RESERVED_EXACT = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "GPU_DEVICE_ORDINAL",
        "FLODL_HOST_NAME",
        "FDL_ENV",
    }
)
RESERVED_PREFIX = "FLODL_INTERNAL_"
CLUSTER_KEYS = ("controller", "workers", "env", "gpu_ram_share")
CONTROLLER_KEYS = ("host", "port", "path", "docker", "arch", "data_path", "join")
WORKER_KEYS = (
    "host", "local_devices", "nccl_socket_ifname", "path", "ssh", "tunnel", "arch", "data_path", "gpu_ram_share",
    "docker", "env",
)
JOIN_KEYS = (
    "min_rank_start", "join_timeout", "target_ranks", "max_join_timeout", "open_admission", "discovery", "token",
    "tunnel_only", "start",
)
JOIN_UINTS = ("min_rank_start", "join_timeout", "target_ranks", "max_join_timeout")
JOIN_BOOLS = ("open_admission", "discovery", "tunnel_only")
JOIN_STARTS = ("auto", "manual", "hybrid")
SSH_KEYS = ("target", "port", "user", "identity_file", "options")
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_reserved_env_key(key: str) -> bool:
    """Keys the launcher sets per rank; a user value would silently win (shell last-wins)."""
    return key.startswith(RESERVED_PREFIX) or key in RESERVED_EXACT


def kind(value: Any, secret: bool = False) -> str:
    """What a value is, for messages; never more than a short scalar of it, nothing of a secret."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({json.dumps(value)})"
    if secret and isinstance(value, (int, float, str)):
        return f"a{'n integer' if isinstance(value, int) else ' number' if isinstance(value, float) else ' string'}"
    if isinstance(value, int):
        digits = str(value)
        return f"an integer ({digits})" if len(digits) <= 20 else f"an integer ({len(digits)} digits)"
    if isinstance(value, float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({json.dumps(shown)})"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Problems:
    def __init__(self) -> None:
        self.items: list[Problem] = []

    def add(self, place: Place, problem: str, fix: str = "") -> None:
        self.items.append(_at(place, problem, fix))

    def raw(self, problem: str | None, place: Place) -> None:
        """A problem already worded with its place (module_utils.safety), which is ``place``'s."""
        if problem:
            self.items.append(worded(problem, place.worker, place.variable))

    def unknown_keys(self, value: Mapping[str, Any], allowed: tuple[str, ...], place: Any) -> None:
        for key in value:
            if key not in allowed:
                self.add(place(str(key)), f"unknown key {json.dumps(str(key))}",
                         "remove it or fix its spelling; allowed: " + ", ".join(allowed))

    def string(self, value: Any, place: Place, required: bool = False, what: str = "") -> None:
        if value is None:
            if required:
                self.add(place, f"is required{': ' + what if what else ''}")
            return
        if not isinstance(value, str):
            self.add(place, f"must be a string, got {kind(value)}", "quote the value")
        elif required and not value.strip():
            self.add(place, f"must not be blank{': ' + what if what else ''}")
        elif "\0" in value:
            self.add(place, "contains a NUL character, which no path, command line or environment value can carry",
                     "remove it")

    def boolean(self, value: Any, place: Place) -> None:
        if value is not None and not isinstance(value, bool):
            self.add(place, f"must be true or false, got {kind(value)}")

    def uint(self, value: Any, place: Place) -> None:
        if value is not None and (not _is_int(value) or value < 0):
            self.add(place, f"must be a non-negative integer, got {kind(value)}")

    def port(self, value: Any, place: Place) -> None:
        if value is not None and (not _is_int(value) or not 0 < value < 65536):
            self.add(place, f"must be a TCP port number 1-65535, got {kind(value)}")

    def share(self, value: Any, place: Place) -> None:
        if value is None:
            return
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        try:
            bad = not number or not math.isfinite(float(value)) or float(value) < 0
        except OverflowError:
            bad = True
        if bad:
            self.add(place, f"must be a non-negative fraction of host RAM (e.g. 0.5), got {kind(value)}",
                     "use a finite number >= 0 (values above 1.0 are allowed)")

    def env(self, env: Any, place: Place, naming: Naming) -> None:
        if env is None:
            return
        if not isinstance(env, Mapping):
            self.add(place, f"must be a map of NAME: \"value\" strings, got {kind(env)}")
            return
        for key in sorted(env, key=str):
            value = env[key]
            at = naming.sub(place, str(key)) if naming.fdl else place.sub(f"[{json.dumps(str(key))}]")
            if not isinstance(key, str) or not _ENV_KEY.fullmatch(key):
                self.add(at, f"{json.dumps(str(key))} is not a valid environment name (letters, digits and _; "
                         "not starting with a digit)", "the launcher would refuse it; rename it")
            elif is_reserved_env_key(key):
                self.add(at, f"key {json.dumps(key)} is reserved (launcher-owned) and cannot be set via env: it "
                         "would override the launcher's per-rank value", "remove it")
            if isinstance(value, str) and "\0" in value:
                # execve cannot carry it: the ranks would never start. Never the value (it may be a credential).
                self.add(at, "the value contains a NUL character, which no process environment (execve) can carry",
                         "remove it")
            if not isinstance(value, str):
                # Env values may be credentials: their type only, never the value.
                scalar = isinstance(value, (bool, int, float)) and len(str(value)) <= 20
                self.add(at, f"environment values must be strings, got {kind(value, secret=True)}",
                         f'quote the value, e.g. {key}: "{_plain(value)}"' if scalar else "write it as a quoted string")


def _plain(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)[:40]


def _check_join(join: Any, naming: Naming, out: _Problems) -> None:
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


def _check_ssh(ssh: Any, place: Place, naming: Naming, out: _Problems) -> None:
    if not isinstance(ssh, Mapping) or "__invalid__" in ssh:
        out.add(place, "must be a map (target, port, user, identity_file, options)")
        return
    out.unknown_keys(ssh, SSH_KEYS, lambda k: naming.sub(place, k))
    for key in ("target", "user", "identity_file"):
        out.string(ssh.get(key), naming.sub(place, key))
    target = ssh.get("target")
    if isinstance(target, str) and target.strip():
        where = naming.sub(place, "target")
        out.raw(ssh_target_problem(target, str(where)), where)
    out.port(ssh.get("port"), naming.sub(place, "port"))
    options = ssh.get("options")
    if options is None:
        return
    if not isinstance(options, list):
        out.add(naming.sub(place, "options"), f"must be a list of Key=Value strings, got {kind(options)}")
        return
    for position, item in enumerate(options):
        if not isinstance(item, str) or "=" not in item:
            out.add(naming.sub(place, "options").sub(f"[{position}]"), f"must be a Key=Value string, got {kind(item)}",
                    'write each option as a string, e.g. "ConnectTimeout=5"')
        else:
            out.string(item, naming.sub(place, "options").sub(f"[{position}]"))


def _check_local_devices(devices: Any, place: Place, out: _Problems) -> None:
    fix = "use `all` or a list of GPU indices like [0, 1]"
    if devices == "all":
        return
    if devices is None:
        out.add(place, "is required", fix)
        return
    if isinstance(devices, str) or not isinstance(devices, list):
        out.add(place, f"must be `all` or a list of GPU indices, got {kind(devices)}", fix)
        return
    if not devices:
        out.add(place, "is an empty list; a worker needs at least one device", fix)
    bad = [(i, d) for i, d in enumerate(devices) if not _is_int(d) or not 0 <= d <= 255]
    for position, item in bad[:3]:
        out.add(place.sub(f"[{position}]"), f"must be a GPU index 0-255, got {kind(item)}", fix)
    if len(bad) > 3:
        out.add(place, f"{len(bad) - 3} more entries are not GPU indices 0-255", fix)
    dupes = sorted({d for d in devices if _is_int(d) and devices.count(d) > 1})
    if dupes:
        out.add(place, f"lists GPU {', '.join(map(str, dupes))} more than once; each index is one rank",
                "list every device once")


def _check_arch(arch: Any, place: Place, out: _Problems) -> None:
    # A variant is a directory under <path>/libtorch/; anything else builds against a stranger's tree.
    if isinstance(arch, str):
        out.raw(relative_path_problem(arch, str(place), "<path>/libtorch/", allow_empty=False), place)


def _check_abs_path(path: Any, place: Place, what: str, out: _Problems) -> None:
    # The launcher cds there and execs under it: relative or control characters fail after every build.
    if isinstance(path, str) and path.strip() and "\0" not in path:
        out.raw(absolute_path_problem(path, str(place), what), place)


def _check_worker(index: int, worker: Any, many: bool, naming: Naming, out: _Problems) -> None:
    if not isinstance(worker, Mapping):
        out.add(naming.worker(index, None, ""), f"must be a map, got {kind(worker)}")
        return
    host = worker.get("host")

    def at(key: str) -> Place:
        return naming.worker(index, host, key)

    if "ranks" in worker:
        out.add(naming.worker(index, host, "ranks"), "declares ranks, which is not user configuration; ranks are "
                "computed from local devices in worker order", "remove the key" if naming.fdl else "remove the variable")
    out.unknown_keys({k: v for k, v in worker.items() if k != "ranks"}, WORKER_KEYS, at)
    out.string(host, at("host"), required=True, what="the worker's hostname")
    if isinstance(host, str) and host.strip():
        # It names a directory under target/cluster/ and reaches ssh: nothing but a plain name.
        out.raw(host_name_problem(host, str(at("host"))), at("host"))
    _check_local_devices(worker.get("local_devices"), at("local_devices"), out)
    nic = worker.get("nccl_socket_ifname")
    if nic is not None and not isinstance(nic, str):
        out.add(at("nccl_socket_ifname"), f"must be a string, got {kind(nic)}")
    elif many and _blank(nic):
        out.add(at("nccl_socket_ifname"), "is required with more than one worker",
                "name the NIC NCCL uses between hosts, e.g. enp1s0")
    elif naming.fdl and nic is None:
        out.add(at("nccl_socket_ifname"), "required key is missing", 'use "" for a single worker')
    out.string(worker.get("path"), at("path"), required=True, what="the project checkout on that host")
    _check_abs_path(worker.get("path"), at("path"), "the project checkout on that host", out)
    if "ssh" in worker and worker["ssh"] is not None:
        _check_ssh(worker["ssh"], at("ssh"), naming, out)
    out.boolean(worker.get("tunnel"), at("tunnel"))
    for key in ("arch", "data_path", "docker"):
        out.string(worker.get(key), at(key))
    _check_arch(worker.get("arch"), at("arch"), out)
    out.share(worker.get("gpu_ram_share"), at("gpu_ram_share"))


def cluster_problems(cluster: Any, naming: Naming = INVENTORY) -> list[str]:
    """Every problem of a ``cluster:`` block as text, in fdl-cli's order; [] when it is valid."""
    return texts(cluster_findings(cluster, naming))


def cluster_findings(cluster: Any, naming: Naming = INVENTORY) -> list[Problem]:
    """Every problem of a ``cluster:`` block, in fdl-cli's order, each with its worker; [] when it is valid."""
    out = _Problems()
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
    _check_abs_path(controller.get("path"), naming.controller("path"), "the project as the controller sees it", out)
    out.port(controller.get("port"), naming.controller("port"))
    for key in ("docker", "arch", "data_path"):
        out.string(controller.get(key), naming.controller(key))
    _check_arch(controller.get("arch"), naming.controller("arch"), out)
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
        _check_worker(index, worker, len(workers) > 1, naming, out)
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
