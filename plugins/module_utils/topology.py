# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster topology: built from inventory variables, validated as flodl
validates it, ranks populated, serialised byte-for-byte as fdl-cli does.

The dict shape is flodl's ``cluster:`` block (flodl-contract.md §2c), so the
same value validates here, ships to the launcher and round-trips through
``fdl.cluster.yml``. Errors name the inventory host and the ``flodl_*``
variable an operator has to fix.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils.hexcodec import hex_encode
from ansible_collections.flodl.cluster.plugins.module_utils.variants import AMD, CPU, variant_vendor

DEFAULT_CONTROLLER_PORT = 1337
CONVENTION_DATA_PATH = "/flodl/data"
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
JOIN_KEYS = (
    "min_rank_start",
    "join_timeout",
    "target_ranks",
    "max_join_timeout",
    "open_admission",
    "discovery",
    "token",
    "tunnel_only",
    "start",
)
JOIN_STARTS = ("auto", "manual", "hybrid")
SSH_KEYS = ("target", "port", "user", "identity_file", "options")
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class TopologyError(ValueError):
    """One or more configuration problems, one line each."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


# --------------------------------------------------------------------------
# reserved keys and small predicates
# --------------------------------------------------------------------------


def is_reserved_env_key(key: str) -> bool:
    """Keys the launcher sets per rank; a user value would silently win (shell last-wins)."""
    return key.startswith(RESERVED_PREFIX) or key in RESERVED_EXACT


def worker_label(index: int, host: str) -> str:
    return f"cluster.workers[{index}] ({json.dumps(host)})"


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _int_if_decimal(value: Any) -> Any:
    """``"2222"`` -> 2222 (``-e var=value`` and INI vars arrive as text); anything else unchanged."""
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value.strip())
    return value


# --------------------------------------------------------------------------
# inventory -> cluster dict
# --------------------------------------------------------------------------


def _ssh_options_from_args(args: str | None) -> list[str]:
    """``-o Key=Value`` pairs from ``ansible_ssh_common_args``/``extra_args``."""
    if not args:
        return []
    import shlex

    tokens = shlex.split(str(args))
    options: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == "-o" and i + 1 < len(tokens):
            options.append(tokens[i + 1])
            i += 2
            continue
        if tok.startswith("-o") and len(tok) > 2:
            options.append(tok[2:])
        i += 1
    return options


def derive_ssh(host: str, hostvars: Mapping[str, Any]) -> dict[str, Any]:
    """``flodl_ssh`` from Ansible's connection vars; explicit ``flodl_ssh`` keys win."""
    derived: dict[str, Any] = {}
    target = hostvars.get("ansible_host")
    if not _blank(target) and str(target) != host:
        derived["target"] = str(target)
    port = hostvars.get("ansible_port")
    if port is not None and str(port).strip():
        derived["port"] = _int_if_decimal(port)
    user = hostvars.get("ansible_user")
    if not _blank(user):
        derived["user"] = str(user)
    key = hostvars.get("ansible_ssh_private_key_file")
    if not _blank(key):
        derived["identity_file"] = str(key)
    options = _ssh_options_from_args(hostvars.get("ansible_ssh_common_args"))
    options += _ssh_options_from_args(hostvars.get("ansible_ssh_extra_args"))
    if options:
        derived["options"] = options
    explicit = hostvars.get("flodl_ssh")
    if isinstance(explicit, Mapping):
        derived.update({k: v for k, v in explicit.items() if v is not None})
        if "port" in derived:
            derived["port"] = _int_if_decimal(derived["port"])
    elif explicit is not None:
        derived["__invalid__"] = explicit
    return derived


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


def worker_from_hostvars(inventory_hostname: str, hostvars: Mapping[str, Any]) -> dict[str, Any]:
    """One fdl ``workers[]`` entry from an inventory host's variables (unvalidated)."""
    host = hostvars.get("flodl_host")
    worker: dict[str, Any] = {
        "host": inventory_hostname if _blank(host) else str(host),
        "local_devices": hostvars.get("flodl_local_devices"),
        "nccl_socket_ifname": hostvars.get("flodl_nccl_socket_ifname"),
        "path": hostvars.get("flodl_path"),
    }
    if "flodl_ranks" in hostvars:
        worker["ranks"] = hostvars["flodl_ranks"]
    ssh = derive_ssh(worker["host"], hostvars)
    if ssh:
        worker["ssh"] = ssh
    tunnel = hostvars.get("flodl_tunnel")
    if tunnel is not None:
        worker["tunnel"] = tunnel
    for var, key in _WORKER_OPTIONAL:
        if hostvars.get(var) is not None:
            worker[key] = hostvars[var]
    env = hostvars.get("flodl_env")
    if env is not None:
        worker["env"] = env
    return worker


def cluster_from_inventory(
    workers: Iterable[tuple[str, Mapping[str, Any]]],
    cluster_vars: Mapping[str, Any],
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
        "workers": [worker_from_hostvars(name, hv) for name, hv in workers],
    }
    env = cluster_vars.get("flodl_cluster_env")
    if env is not None:
        cluster["env"] = env
    share = cluster_vars.get("flodl_cluster_gpu_ram_share")
    if share is not None:
        cluster["gpu_ram_share"] = share
    return cluster


# --------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------


def _check_env(label: str, var: str, env: Any, problems: list[str]) -> None:
    if env is None:
        return
    if not isinstance(env, Mapping):
        problems.append(f"{label}: {var} must be a map of NAME: \"value\" strings, got {type(env).__name__}")
        return
    for key in sorted(env, key=str):
        value = env[key]
        if not isinstance(key, str) or not _ENV_KEY.fullmatch(key):
            problems.append(
                f"{label}: {var} key {json.dumps(str(key))} is not a valid environment name "
                "(letters, digits and _; not starting with a digit); the launcher would refuse it"
            )
        elif is_reserved_env_key(key):
            problems.append(
                f"{label}: {var} key {json.dumps(key)} is reserved (launcher-owned) and cannot be set via env "
                "— it would override the launcher's per-rank value; remove it"
            )
        if not isinstance(value, str):
            problems.append(
                f"{label}: {var}[{json.dumps(str(key))}] must be a string, got {type(value).__name__} "
                f"{value!r}; quote it in YAML"
            )


def _check_share(label: str, var: str, value: Any, problems: list[str]) -> None:
    if value is None:
        return
    try:
        bad = not _is_number(value) or not math.isfinite(float(value)) or float(value) < 0
    except OverflowError:
        bad = True
    if bad:
        problems.append(
            f"{label}: {var} must be a non-negative fraction of host RAM (e.g. 0.5), got {value!r}"
        )


def _check_port(label: str, var: str, value: Any, problems: list[str]) -> None:
    if not _is_int(value) or not 0 < value < 65536:
        problems.append(f"{label}: {var} must be a TCP port number 1-65535, got {value!r}")


def _check_join(join: Any, problems: list[str]) -> None:
    label = "controller"
    if not isinstance(join, Mapping):
        problems.append(f"{label}: flodl_controller_join must be a map, got {type(join).__name__}")
        return
    for key in join:
        if key not in JOIN_KEYS:
            problems.append(
                f"{label}: flodl_controller_join has unknown key {json.dumps(str(key))}; "
                f"allowed: {', '.join(JOIN_KEYS)}"
            )
    start = join.get("start")
    if start is not None and start not in JOIN_STARTS:
        problems.append(
            f"{label}: flodl_controller_join.start must be one of auto | manual | hybrid, got {start!r}"
        )


def _check_ssh(label: str, ssh: Mapping[str, Any], problems: list[str]) -> None:
    if "__invalid__" in ssh:
        problems.append(f"{label}: flodl_ssh must be a map (target, port, user, identity_file, options)")
        return
    for key in ssh:
        if key not in SSH_KEYS:
            problems.append(
                f"{label}: flodl_ssh has unknown key {json.dumps(str(key))}; allowed: {', '.join(SSH_KEYS)}"
            )
    if "port" in ssh:
        _check_port(label, "flodl_ssh.port (or ansible_port)", ssh["port"], problems)
    options = ssh.get("options", [])
    if not isinstance(options, list) or not all(isinstance(o, str) and "=" in o for o in options):
        problems.append(f"{label}: flodl_ssh.options must be a list of Key=Value strings, got {options!r}")


def _check_local_devices(label: str, devices: Any, problems: list[str]) -> None:
    if devices == "all":
        return
    if devices is None:
        problems.append(f"{label}: flodl_local_devices is required: `all` or a list of GPU indices like [0, 1]")
        return
    if isinstance(devices, str) or not isinstance(devices, list):
        problems.append(
            f"{label}: flodl_local_devices must be `all` or a list of GPU indices like [0, 1], got {devices!r}"
        )
        return
    if not devices:
        problems.append(f"{label}: flodl_local_devices is an empty list; a worker needs at least one device")
    bad = [d for d in devices if not _is_int(d) or not 0 <= d <= 255]
    if bad:
        problems.append(f"{label}: flodl_local_devices entries must be GPU indices 0-255, got {bad!r}")


def _worker_problem_label(index: int, worker: Mapping[str, Any]) -> str:
    return f"host {str(worker.get('host') or '').strip() or '?'} (worker {index})"


def validate_cluster(cluster: Mapping[str, Any]) -> None:
    """Every rule fdl-cli and the launcher apply before a host is touched.

    Problems are collected, not raised one at a time: an operator fixing an
    inventory at 3 am wants the whole list in one run.
    """
    problems: list[str] = []
    controller = cluster.get("controller") or {}
    if _blank(controller.get("host")):
        problems.append("controller: flodl_controller_host is required: the address workers dial back to")
    if _blank(controller.get("path")):
        problems.append("controller: flodl_controller_path is required: the controller's view of the project root")
    if controller.get("port") is not None:
        _check_port("controller", "flodl_controller_port", controller["port"], problems)
    join = controller.get("join")
    if join is not None:
        _check_join(join, problems)
    discovery = isinstance(join, Mapping) and join.get("discovery") is True
    workers = cluster.get("workers") or []
    if not workers and not discovery:
        problems.append(
            "cluster: group flodl_workers is empty; add one inventory host per worker "
            "(an empty roster needs flodl_controller_join.discovery: true). With the "
            "flodl.cluster.fdl_cluster inventory, look for an 'Unable to parse' warning above: "
            "a broken fdl file leaves the group empty unless ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED=true"
        )
    _check_env("cluster", "flodl_cluster_env", cluster.get("env"), problems)
    _check_share("cluster", "flodl_cluster_gpu_ram_share", cluster.get("gpu_ram_share"), problems)
    # fdl-cli's order (§2d): reserved keys in the cluster env, then in every
    # worker env, then the per-worker field checks.
    for index, worker in enumerate(workers):
        _check_env(_worker_problem_label(index, worker), "flodl_env", worker.get("env"), problems)
    seen: dict[str, int] = {}
    for index, worker in enumerate(workers):
        host = str(worker.get("host") or "")
        label = _worker_problem_label(index, worker)
        if _blank(host):
            problems.append(f"{label}: flodl_host must not be blank")
        elif host in seen:
            problems.append(
                f"{label}: flodl_host {host!r} is also worker {seen[host]}; each machine appears once "
                "(the launcher refuses duplicate hosts)"
            )
        seen.setdefault(host, index)
        if "ranks" in worker:
            problems.append(
                f"{label}: declares ranks (flodl_ranks), which is not user configuration; ranks are "
                "computed from local devices in worker order. Remove the variable."
            )
        nic = worker.get("nccl_socket_ifname")
        if nic is not None and not isinstance(nic, str):
            problems.append(f"{label}: flodl_nccl_socket_ifname must be a string, got {nic!r}")
        elif len(workers) > 1 and _blank(nic):
            problems.append(
                f"{label}: flodl_nccl_socket_ifname is required with more than one worker "
                "(the NIC NCCL uses between hosts, e.g. enp1s0)"
            )
        if _blank(worker.get("path")):
            problems.append(f"{label}: flodl_path is required: the project checkout on that host")
        _check_local_devices(label, worker.get("local_devices"), problems)
        _check_share(label, "flodl_gpu_ram_share", worker.get("gpu_ram_share"), problems)
        if "tunnel" in worker and not isinstance(worker["tunnel"], bool):
            problems.append(f"{label}: flodl_tunnel must be true or false, got {worker['tunnel']!r}")
        if isinstance(worker.get("ssh"), Mapping):
            _check_ssh(label, worker["ssh"], problems)
        for key in ("arch", "data_path", "docker"):
            if key in worker and not isinstance(worker[key], str):
                problems.append(f"{label}: flodl_{key} must be a string, got {worker[key]!r}")
    if problems:
        raise TopologyError(problems)


# --------------------------------------------------------------------------
# ranks
# --------------------------------------------------------------------------


def needs_gpu_count(worker: Mapping[str, Any]) -> bool:
    return worker.get("local_devices") == "all"


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
# serialisation (flodl-contract.md §2f)
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


def _pretty(value: Any, indent: str, out: list[str]) -> None:
    # serde_json's PrettyFormatter: two spaces, one item per line, [] / {} when empty.
    if isinstance(value, Mapping):
        if not value:
            out.append("{}")
            return
        inner = indent + "  "
        out.append("{\n")
        for index, (key, item) in enumerate(value.items()):
            out.append(inner + json.dumps(str(key), ensure_ascii=False) + ": ")
            _pretty(item, inner, out)
            out.append(",\n" if index < len(value) - 1 else "\n")
        out.append(indent + "}")
    elif isinstance(value, (list, tuple)):
        if not value:
            out.append("[]")
            return
        inner = indent + "  "
        out.append("[\n")
        for index, item in enumerate(value):
            out.append(inner)
            _pretty(item, inner, out)
            out.append(",\n" if index < len(value) - 1 else "\n")
        out.append(indent + "]")
    elif isinstance(value, float):
        out.append(serde_float(value))
    else:
        out.append(json.dumps(value, ensure_ascii=False))


def serde_pretty(value: Any) -> str:
    """``serde_json::to_string_pretty`` bytes for plain JSON data (strings escape as serde does)."""
    out: list[str] = []
    _pretty(value, "", out)
    return "".join(out)


def cluster_json(cluster: Mapping[str, Any]) -> str:
    """Pretty JSON exactly as fdl-cli's serde_json emits it (no trailing newline)."""
    return serde_pretty(ordered_cluster(cluster))


def cluster_hex(cluster: Mapping[str, Any]) -> str:
    """``FLODL_INTERNAL_FULL_CLUSTER_JSON``: lowercase hex of :func:`cluster_json`."""
    return hex_encode(cluster_json(cluster))


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


def ssh_target(worker: Mapping[str, Any]) -> str:
    ssh = worker.get("ssh") or {}
    return str(ssh.get("target") or worker["host"])
