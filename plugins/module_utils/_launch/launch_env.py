# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The launch phase's plan: the environment flodl's launcher reads, the command and its cwd.

fdl-cli's last job before the training command starts is to put the whole
topology, the command name and a few helpers into its own environment
(docs/launcher-contract.md §1a, §3a step 6); the user binary inherits them and
flodl's launcher fans out from there. Everything here is a function of its
inputs: name resolution is injected (module_utils._cluster.name_resolution) so tests can
pin it, and nothing touches the filesystem or the network.

Also here: the recursion guard (§2b/§6) and the join token's redaction. The compose
overlay is module_utils._launch.compose_overlay, the default command module_utils._launch.launch_command.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.variants import GpuCounts
from ansible_collections.flodl.cluster.plugins.module_utils._core.constants import ENV_NET_TIMEOUT_SCALE
from ansible_collections.flodl.cluster.plugins.module_utils._run.ansible_flags import ENV_VERBOSITY
from ansible_collections.flodl.cluster.plugins.module_utils._launch.cluster_json import cluster_json, ordered_cluster
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.cluster_ranks import populate_ranks
from ansible_collections.flodl.cluster.plugins.module_utils._launch.compose_overlay import (
    OVERLAY_NAME,
    compose_overlay,
    compose_overlay_flags,
    is_compose_command,
    splice_compose_flags,
)
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.connect_bound import cluster_with_connect_bound
from ansible_collections.flodl.cluster.plugins.module_utils._core.hexcodec import hex_encode
from ansible_collections.flodl.cluster.plugins.module_utils._launch.launch_command import (
    CONTAINER_ROOT,
    default_launch_command,
    join_root,
    launcher_root,
    run_script_command,
)
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.name_resolution import (
    ENV_CLUSTER_EXTRA_HOSTS,
    Resolver,
    cluster_extra_hosts,
    format_extra_hosts,
    resolve_controller_host,
    system_resolver,
)
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.sshreuse import cluster_with_reuse
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import validate_cluster

ENV_FULL_CLUSTER_JSON = "FLODL_INTERNAL_FULL_CLUSTER_JSON"
ENV_FDL_CMD = "FLODL_INTERNAL_FDL_CMD"
ENV_FDL_ENV = "FDL_ENV"
ENV_HOST_USER = "FLODL_INTERNAL_HOST_USER"
ENV_PREBUILD_PER_HOST = "FLODL_INTERNAL_PREBUILD_PER_HOST"
ENV_TESTING_CLUSTER_JSON = "FLODL_TESTING_CLUSTER_JSON"
ENV_TESTING_GPU_JSON = "FLODL_TESTING_GPU_JSON"
ENV_HOSTNAME = "HOSTNAME"
# Role variables set by flodl itself on agents and ranks (§1b): their
# presence means this process is already inside a fan-out.
ENV_CLUSTER_JSON = "FLODL_INTERNAL_CLUSTER_JSON"
ENV_AGENT_JSON = "FLODL_INTERNAL_AGENT_JSON"
GUARD_VARS = (ENV_CLUSTER_JSON, ENV_AGENT_JSON)


def rewrite_identity_files(cluster: Mapping[str, Any], launcher_root: str) -> dict[str, Any]:
    """Relative ``ssh.identity_file`` values joined to the launcher's project root with ``/``.

    The launcher resolves paths from its own cwd and filesystem view (in a
    container, ``/workspace``), so a key path relative to the project must
    be made absolute as that process sees it. ``/...`` and ``~...`` stay.
    """
    out = json.loads(json.dumps(cluster))
    for worker in out.get("workers", []):
        ssh = worker.get("ssh")
        if not isinstance(ssh, dict):
            continue
        key = ssh.get("identity_file")
        if isinstance(key, str) and key and not key.startswith(("/", "~")):
            ssh["identity_file"] = f"{launcher_root}/{key}"
    return out


# --------------------------------------------------------------------------
# recursion guard
# --------------------------------------------------------------------------


def recursion_guard(env: Mapping[str, str]) -> str | None:
    """Why no cluster environment must be prepared here, or ``None``.

    A process that already holds a rank or agent role is itself a child of
    a fan-out; preparing a second topology would make the launcher refuse
    the mixed roles or, worse, fan out again from every rank.
    """
    present = [name for name in GUARD_VARS if name in env]
    if not present:
        return None
    return (
        f"{' and '.join(present)} {'is' if len(present) == 1 else 'are'} already set in the controller environment: "
        "this process runs inside a flodl fan-out (a rank or an agent), so no cluster environment is prepared "
        "and the command runs plainly"
    )


# --------------------------------------------------------------------------
# assembling the environment
# --------------------------------------------------------------------------


@dataclass
class LaunchInputs:
    """Everything the environment depends on (already validated by the context).

    ``project_root`` is ``controller.path``; ``project_dir`` the checkout
    holding ``fdl.yml`` (default: ``project_root``), where the command runs
    and what a relative identity file is joined to on a native launch.
    ``libtorch`` is :func:`libtorch_env.libtorch_env`'s result, added as is.
    ``controller_identity`` becomes ``HOSTNAME`` unless the caller has one; ``hostname``, when given,
    replaces it there (the launch host's identity: the play's own name is not the controller's), and
    an empty one exports none.
    ``testing_cluster`` (fdl-cli's behaviour, on by default) sets
    ``FLODL_TESTING_CLUSTER_JSON``; turn it off to leave the variable out.
    """

    cluster: Mapping[str, Any]
    project_root: str
    cmd: str
    cmd_dir: str = ""
    gpu_counts: Mapping[str, GpuCounts] = field(default_factory=dict)
    controller_env: Mapping[str, str] = field(default_factory=dict)
    fdl_env: str | None = None
    host_user: str | None = None
    launch_command: str | None = None
    docker_service: str | None = None
    container_root: str = CONTAINER_ROOT
    prebuild_envelope_json: str | None = None
    net_timeout_scale: str | None = None
    testing_cluster: bool = True
    local_gpu_counts: GpuCounts | None = None
    project_dir: str | None = None
    controller_identity: str | None = None
    libtorch: Mapping[str, str] = field(default_factory=dict)
    ssh_reuse_dir: str | None = None  # this run's master connections (module_utils._ssh.sshreuse); None: bytes as fdl's
    cmd_run: str | None = None  # the command's run: line (fdl-cli runs it from the project root)
    connect_timeout: int = 0  # ConnectTimeout for the launcher's ssh to each worker (module_utils._ssh.connect_bound); 0: none
    verbosity: str | None = None  # FLODL_VERBOSITY from Ansible's -v (module_utils._run.ansible_flags); None: not added
    hostname: str | None = None  # HOSTNAME from the launch host (None: controller_identity; "": none)
    # walk_in workers on a non-ssh Ansible connection (RunContext.ansible_only): no launcher reaches them by name,
    # so they are not looked up for FLODL_INTERNAL_CLUSTER_EXTRA_HOSTS (a container's name never resolves here).
    ansible_only: frozenset[str] = frozenset()


@dataclass
class LaunchPlan:
    """The prepared run: what to execute, where, with which added variables."""

    command: str
    cwd: str
    env: dict[str, str]
    guarded: bool = False
    topology: dict[str, Any] | None = None
    topology_json: str | None = None
    extra_hosts: list[tuple[str, str]] = field(default_factory=list)
    overlay_path: str | None = None
    overlay: str | None = None
    launcher_root: str | None = None
    warnings: list[str] = field(default_factory=list)


def testing_cluster_hex(cluster: Mapping[str, Any], local_counts: GpuCounts | None) -> str:
    """``FLODL_TESTING_CLUSTER_JSON``: canonical JSON, ranks from the *local* GPU count.

    Test binaries run in-process on this box, so ``all`` workers are
    counted here (never over ssh) and nothing is resolved or rewritten.
    """
    validate_cluster(cluster)
    probed = {
        str(w["host"]): (local_counts or (0, 0)) for w in cluster.get("workers", []) if w.get("local_devices") == "all"
    }
    populated = populate_ranks(cluster, probed)
    return hex_encode(cluster_json(populated))


def prepare_launch(inputs: LaunchInputs, resolver: Resolver = system_resolver) -> LaunchPlan:
    """The launch command, its cwd and the variables to add to the controller environment.

    Raises ``TopologyError`` (from rank population) when device counts are
    missing or zero; everything else is a warning, as in fdl-cli.
    """
    root = (inputs.project_dir or inputs.project_root).rstrip("/") or "/"
    reason = recursion_guard(inputs.controller_env)
    warnings: list[str] = []
    testing_hex = None
    if reason is None and inputs.testing_cluster:
        try:
            testing_hex = testing_cluster_hex(inputs.cluster, inputs.local_gpu_counts)
        except ValueError as exc:
            warnings.append(f"controller: {ENV_TESTING_CLUSTER_JSON} not set: {exc}")
    forward = [ENV_TESTING_CLUSTER_JSON] if testing_hex is not None else []
    if ENV_TESTING_GPU_JSON in inputs.controller_env:
        forward.append(ENV_TESTING_GPU_JSON)
    if inputs.launch_command:
        command, cwd_rel = inputs.launch_command, (inputs.cmd_dir or "").strip("/")
    elif inputs.cmd_run is not None:
        command, cwd_rel = run_script_command(inputs.cmd_run, inputs.docker_service, forward), ""
    else:
        command, cwd_rel = default_launch_command(
            inputs.cmd, inputs.cmd_dir, inputs.docker_service, inputs.container_root, forward
        )
    compose = is_compose_command(command)
    cwd = root if compose else join_root(root, cwd_rel)

    if reason is not None:
        return LaunchPlan(command=command, cwd=cwd, env={}, guarded=True, warnings=[reason])

    populated = populate_ranks(inputs.cluster, inputs.gpu_counts)
    ctl_host = str(populated["controller"]["host"])
    shipped, ctl_warnings = resolve_controller_host(ctl_host, resolver)
    warnings += ctl_warnings
    populated["controller"]["host"] = shipped
    root_seen = launcher_root(command, root, inputs.container_root)
    shipped_cluster = rewrite_identity_files(populated, root_seen)
    own = frozenset({inputs.controller_identity}) if inputs.controller_identity else frozenset()
    shipped_cluster = cluster_with_connect_bound(shipped_cluster, inputs.connect_timeout, own)
    if inputs.ssh_reuse_dir and not compose:  # a launcher in a container sees no socket of this box
        shipped_cluster = cluster_with_reuse(shipped_cluster, inputs.ssh_reuse_dir, own)
    text = cluster_json(shipped_cluster)

    env: dict[str, str] = {
        ENV_FULL_CLUSTER_JSON: hex_encode(text),
        ENV_FDL_CMD: inputs.cmd,
    }
    if inputs.host_user and inputs.host_user.strip():
        env[ENV_HOST_USER] = inputs.host_user.strip()
    else:
        warnings.append(
            f"controller: neither USER nor whoami named the controller user; {ENV_HOST_USER} is left unset "
            "(the launcher then lets ssh pick the login for workers without flodl_ssh.user)"
        )
    pairs, host_warnings = cluster_extra_hosts(
        [w for w in populated["workers"] if str(w.get("host")) not in inputs.ansible_only], resolver)
    warnings += host_warnings
    if pairs:
        env[ENV_CLUSTER_EXTRA_HOSTS] = format_extra_hosts(pairs)
    if inputs.fdl_env is not None and inputs.fdl_env.strip():
        env[ENV_FDL_ENV] = inputs.fdl_env
    if inputs.prebuild_envelope_json is not None and inputs.prebuild_envelope_json.strip():
        env[ENV_PREBUILD_PER_HOST] = inputs.prebuild_envelope_json
    if inputs.net_timeout_scale is not None:
        env[ENV_NET_TIMEOUT_SCALE] = inputs.net_timeout_scale
    if inputs.verbosity:
        env[ENV_VERBOSITY] = inputs.verbosity
    if testing_hex is not None:
        env[ENV_TESTING_CLUSTER_JSON] = testing_hex
    exported_name = inputs.controller_identity if inputs.hostname is None else inputs.hostname
    # A launch host's own HOSTNAME is its own: only a local launch inherits one from this environment.
    if exported_name and (inputs.hostname is not None or ENV_HOSTNAME not in inputs.controller_env):
        env[ENV_HOSTNAME] = exported_name
    env.update(inputs.libtorch)

    overlay_path = overlay = None
    if compose and pairs:
        overlay_path = join_root(root, OVERLAY_NAME)
        overlay = compose_overlay(pairs)
        command = splice_compose_flags(command, compose_overlay_flags(overlay_path))
    return LaunchPlan(
        command=command,
        cwd=cwd,
        env=env,
        topology=ordered_cluster(shipped_cluster),
        topology_json=text,
        extra_hosts=pairs,
        overlay_path=overlay_path,
        overlay=overlay,
        launcher_root=root_seen,
        warnings=warnings,
    )


# The variables that carry the join token when the topology holds one (module_utils._cluster.topology.holds_secret).
SECRET_VARS = (ENV_FULL_CLUSTER_JSON, ENV_TESTING_CLUSTER_JSON)
