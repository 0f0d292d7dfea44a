# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rules of one worker entry of a ``cluster:`` block (keys, host, devices, NIC, path, ssh)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._core.safety import blank
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.field_checks import (
    FieldChecks,
    check_abs_path,
    check_arch,
    is_int,
    kind,
)
from ansible_collections.flodl.cluster.plugins.module_utils._core.problems import Naming, Place
from ansible_collections.flodl.cluster.plugins.module_utils._core.safety import host_name_problem, ssh_target_problem

WORKER_KEYS = (
    "host", "local_devices", "nccl_socket_ifname", "path", "ssh", "tunnel", "arch", "data_path", "gpu_ram_share",
    "docker", "env",
)
SSH_KEYS = ("target", "port", "user", "identity_file", "options")


def check_ssh(ssh: Any, place: Place, naming: Naming, out: FieldChecks) -> None:
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


def _check_local_devices(devices: Any, place: Place, out: FieldChecks) -> None:
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
    bad = [(i, d) for i, d in enumerate(devices) if not is_int(d) or not 0 <= d <= 255]
    for position, item in bad[:3]:
        out.add(place.sub(f"[{position}]"), f"must be a GPU index 0-255, got {kind(item)}", fix)
    if len(bad) > 3:
        out.add(place, f"{len(bad) - 3} more entries are not GPU indices 0-255", fix)
    dupes = sorted({d for d in devices if is_int(d) and devices.count(d) > 1})
    if dupes:
        out.add(place, f"lists GPU {', '.join(map(str, dupes))} more than once; each index is one rank",
                "list every device once")


def check_worker(index: int, worker: Any, many: bool, naming: Naming, out: FieldChecks) -> None:
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
    elif many and blank(nic):
        out.add(at("nccl_socket_ifname"), "is required with more than one worker",
                "name the NIC NCCL uses between hosts, e.g. enp1s0")
    elif naming.fdl and nic is None:
        out.add(at("nccl_socket_ifname"), "required key is missing", 'use "" for a single worker')
    out.string(worker.get("path"), at("path"), required=True, what="the project checkout on that host")
    check_abs_path(worker.get("path"), at("path"), "the project checkout on that host", out)
    if "ssh" in worker and worker["ssh"] is not None:
        check_ssh(worker["ssh"], at("ssh"), naming, out)
    out.boolean(worker.get("tunnel"), at("tunnel"))
    for key in ("arch", "data_path", "docker"):
        out.string(worker.get(key), at(key))
    check_arch(worker.get("arch"), at("arch"), out)
    out.share(worker.get("gpu_ram_share"), at("gpu_ram_share"))
