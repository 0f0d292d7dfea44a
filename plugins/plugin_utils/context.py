# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side view of a run: inventory variables -> validated topology.

Every phase's action plugin starts here, so validation (topology, reserved
keys, ``FLODL_NET_TIMEOUT_SCALE``, per-phase required variables) always
happens on the controller before any host is contacted.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils.identity import controller_hostname
from ansible_collections.flodl.cluster.plugins.module_utils.netscale import (
    ENV_NET_TIMEOUT_SCALE,
    NetScaleError,
    parse_net_timeout_scale,
)
from ansible_collections.flodl.cluster.plugins.plugin_utils.processes import run_for_output
from ansible_collections.flodl.cluster.plugins.module_utils.topology import (
    TopologyError,
    cluster_from_inventory,
    remote_workers,
    validate_cluster,
)

WORKERS_GROUP = "flodl_workers"
PHASES = ("preflight", "prebuild", "launch", "teardown")

# Cluster-scope variables read from the play's own host (group all / extra vars).
CLUSTER_VARS = (
    "flodl_controller_host",
    "flodl_controller_port",
    "flodl_controller_path",
    "flodl_controller_docker",
    "flodl_controller_arch",
    "flodl_controller_data_path",
    "flodl_controller_join",
    "flodl_cluster_env",
    "flodl_cluster_gpu_ram_share",
)
WORKER_VARS = (
    "flodl_host",
    "flodl_path",
    "flodl_local_devices",
    "flodl_nccl_socket_ifname",
    "flodl_arch",
    "flodl_data_path",
    "flodl_env",
    "flodl_gpu_ram_share",
    "flodl_tunnel",
    "flodl_docker",
    "flodl_ssh",
    "flodl_ranks",
    "ansible_host",
    "ansible_port",
    "ansible_user",
    "ansible_ssh_private_key_file",
    "ansible_ssh_common_args",
    "ansible_ssh_extra_args",
)


INVALID_CONFIG = "flodl cluster configuration is invalid; no host was contacted"


def fail_result(result: dict[str, Any], problems: list[str], what: str = INVALID_CONFIG) -> dict[str, Any]:
    """Fail an action with every problem on its own line (and as a list for callers)."""
    result.update(
        failed=True,
        msg=f"{what} ({len(problems)} problem(s)):\n  " + "\n  ".join(problems),
        problems=problems,
    )
    return result


def plain(value: Any) -> Any:
    """Native Python containers/scalars (drops Ansible's tagged wrapper types)."""
    return json.loads(json.dumps(value))


@dataclass
class RunContext:
    """Everything a phase needs to know about the run, already validated."""

    cluster: dict[str, Any]
    controller_identity: str
    prebuild: bool
    net_timeout_scale: str | None
    cmd: str | None
    cmd_dir: str
    fdl_env: str | None
    build_host: str
    launch_command: str | None
    warnings: list[str] = field(default_factory=list)

    @property
    def remotes(self) -> list[dict[str, Any]]:
        return remote_workers(self.cluster, self.controller_identity)

    @property
    def project_root(self) -> str:
        return str(self.cluster["controller"]["path"])


def _var(task_vars: Mapping[str, Any], templar: Any, name: str, default: Any = None) -> Any:
    if name not in task_vars:
        return default
    value = task_vars[name]
    if templar is not None:
        value = templar.template(value)
    return plain(value)


def _worker_vars(task_vars: Mapping[str, Any], templar: Any) -> list[tuple[str, dict[str, Any]]]:
    groups = task_vars.get("groups") or {}
    hostvars = task_vars.get("hostvars") or {}
    out: list[tuple[str, dict[str, Any]]] = []
    for name in groups.get(WORKERS_GROUP, []):
        raw = hostvars[name]
        values: dict[str, Any] = {}
        for var in WORKER_VARS:
            if var in raw:
                value = raw[var]
                if templar is not None:
                    value = templar.template(value)
                values[var] = plain(value)
        out.append((str(name), values))
    return out


_TRUE_WORDS = frozenset({"true", "yes", "on", "1", "y", "t"})
_FALSE_WORDS = frozenset({"false", "no", "off", "0", "n", "f"})


def _as_bool(value: Any) -> bool | None:
    """Ansible-style boolean: ``-e flodl_prebuild=false`` arrives as the text ``"false"``.

    ``bool("false")`` is True, which would silently run the build the
    operator asked to skip. ``None`` when the value is not a boolean.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE_WORDS | _FALSE_WORDS:
        return value.strip().lower() in _TRUE_WORDS
    return None


def build_context(task_vars: Mapping[str, Any], templar: Any, phases: list[str]) -> RunContext:
    """Read and validate the run for ``phases``; raise TopologyError listing every problem."""
    cluster_vars = {name: _var(task_vars, templar, name) for name in CLUSTER_VARS}
    cluster_vars = {k: v for k, v in cluster_vars.items() if v is not None}
    workers = _worker_vars(task_vars, templar)
    cluster = cluster_from_inventory(workers, cluster_vars)
    problems: list[str] = []
    try:
        validate_cluster(cluster)
    except TopologyError as exc:
        problems.extend(exc.problems)

    scale_raw = _var(task_vars, templar, "flodl_net_timeout_scale")
    scale_source = "flodl_net_timeout_scale"
    if scale_raw is None and ENV_NET_TIMEOUT_SCALE in os.environ:
        scale_raw = os.environ[ENV_NET_TIMEOUT_SCALE]
        scale_source = f"controller environment {ENV_NET_TIMEOUT_SCALE}"
    scale_text: str | None = None
    if scale_raw is not None:
        scale_text = str(scale_raw)
        try:
            parse_net_timeout_scale(scale_text)
        except NetScaleError as exc:
            problems.append(f"controller: {scale_source}: {exc}")

    identity = controller_hostname(os.environ, run_for_output)
    prebuild_raw = _var(task_vars, templar, "flodl_prebuild", True)
    prebuild = _as_bool(prebuild_raw)
    if prebuild is None:
        problems.append(
            f"controller: flodl_prebuild must be true or false, got {prebuild_raw!r}"
        )
        prebuild = True
    cmd = _var(task_vars, templar, "flodl_cmd")
    needs_cmd = "launch" in phases or ("prebuild" in phases and prebuild)
    if needs_cmd and (cmd is None or not str(cmd).strip()):
        problems.append(
            "controller: flodl_cmd is required: the fdl command name, which is also the cargo --bin target "
            "(e.g. flodl_cmd: train)"
        )
    if prebuild and ("prebuild" in phases or "preflight" in phases):
        for index, worker in enumerate(cluster["workers"]):
            if worker.get("host") != identity and not worker.get("arch"):
                problems.append(
                    f"host {worker.get('host')} (worker {index}): flodl_arch is required for prebuild: "
                    "the libtorch variant under <path>/libtorch/, e.g. precompiled/cu128 "
                    "(or set flodl_prebuild: false)"
                )
    if problems:
        raise TopologyError(problems)

    cmd_dir = str(_var(task_vars, templar, "flodl_cmd_dir", "") or "").strip("/")
    fdl_env = _var(task_vars, templar, "flodl_fdl_env")
    launch_command = _var(task_vars, templar, "flodl_launch_command")
    return RunContext(
        cluster=cluster,
        controller_identity=identity,
        prebuild=prebuild,
        net_timeout_scale=scale_text,
        cmd=str(cmd) if cmd is not None else None,
        cmd_dir=cmd_dir,
        fdl_env=str(fdl_env) if fdl_env is not None and str(fdl_env).strip() else None,
        build_host=str(_var(task_vars, templar, "flodl_build_host", "localhost") or "localhost"),
        launch_command=str(launch_command) if launch_command else None,
    )
