# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster as the bytes fdl-cli ships (docs/launcher-contract.md §2f): flodl's struct key
order and omission rules, printed by module_utils._core.serde_json_text.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._core.serde_json_text import serde_pretty
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import DEFAULT_CONTROLLER_PORT
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.validate import JOIN_KEYS


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


def cluster_json(cluster: Mapping[str, Any]) -> str:
    """Pretty JSON exactly as fdl-cli's serde_json emits it (no trailing newline)."""
    return serde_pretty(ordered_cluster(cluster))
