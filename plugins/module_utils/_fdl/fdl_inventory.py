# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check a merged fdl ``cluster:`` block and map it onto inventory variables.

The names are those of the public interface (docs/public-interface.md);
:func:`build_inventory` is the ``fdl_cluster`` inventory plugin's one call.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ansible_collections.flodl.cluster.plugins.module_utils._fdl.fdl_commands import cluster_command, command_dir, run_line
from ansible_collections.flodl.cluster.plugins.module_utils._fdl.fdl_config import DEFAULT_ENV, FdlConfig, load_config
from ansible_collections.flodl.cluster.plugins.module_utils._fdl.fdl_error import FdlConfigError
from ansible_collections.flodl.cluster.plugins.module_utils._core.problems import FDL
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.validate import cluster_problems

# (fdl worker key, host variable) in docs/public-interface.md order; required ones are
# always emitted, the rest only when the merged file sets them.
_WORKER_VARS = (
    ("host", "flodl_host"),
    ("path", "flodl_path"),
    ("local_devices", "flodl_local_devices"),
    ("nccl_socket_ifname", "flodl_nccl_socket_ifname"),
    ("arch", "flodl_arch"),
    ("data_path", "flodl_data_path"),
    ("env", "flodl_env"),
    ("gpu_ram_share", "flodl_gpu_ram_share"),
    ("tunnel", "flodl_tunnel"),
    ("docker", "flodl_docker"),
    ("ssh", "flodl_ssh"),
)
_CONTROLLER_VARS = (
    ("host", "flodl_controller_host"),
    ("port", "flodl_controller_port"),
    ("path", "flodl_controller_path"),
    ("docker", "flodl_controller_docker"),
    ("arch", "flodl_controller_arch"),
    ("data_path", "flodl_controller_data_path"),
    ("join", "flodl_controller_join"),
)


def validate_cluster(cluster: Any, files: Sequence[Any] = ()) -> Dict[str, Any]:
    """Check a merged ``cluster:`` block with the collection's one validator; return it unchanged.

    Every problem is reported at once, named by fdl key path
    (``cluster.workers[1] ("gpu-b").local_devices``), with the files merged.
    """
    problems = cluster_problems(cluster, FDL)
    if problems:
        raise FdlConfigError(problems[0], files=files, problems=problems)
    return cluster


def cluster_block(config: FdlConfig) -> Dict[str, Any]:
    """The validated ``cluster:`` block of a merged configuration."""
    cluster = config.data.get("cluster")
    if cluster is None:
        raise FdlConfigError(
            "no `cluster:` block in the merged configuration",
            files=config.files, key="cluster",
            fix="declare cluster: (controller + workers) in fdl.%s.yml" % (config.env or DEFAULT_ENV),
        )
    return validate_cluster(cluster, config.files)


def identity_for_ansible(identity_file: str, project_dir: Any) -> str:
    """A relative key resolves against the project root; absolute and ``~`` are kept."""
    if identity_file.startswith("/") or identity_file.startswith("~"):
        return identity_file
    return str(Path(project_dir).absolute() / identity_file)


def ssh_common_args(options: Sequence[str]) -> str:
    """``-o K=V`` for each ssh option, each value shell-quoted (Ansible splits with shlex)."""
    return " ".join("-o " + shlex.quote(option) for option in options)


def _copy(value: Any) -> Any:
    return json.loads(json.dumps(value))


def worker_hostvars(worker: Dict[str, Any], project_dir: Any) -> Dict[str, Any]:
    """Host variables of one (validated) worker entry."""
    hostvars: Dict[str, Any] = {}
    for source, variable in _WORKER_VARS:
        if worker.get(source) is not None:
            hostvars[variable] = _copy(worker[source])
    ssh = worker.get("ssh") or {}
    hostvars["ansible_host"] = ssh.get("target") or worker["host"]
    if ssh.get("port") is not None:
        hostvars["ansible_port"] = ssh["port"]
    if ssh.get("user"):
        hostvars["ansible_user"] = ssh["user"]
    if ssh.get("identity_file"):
        hostvars["ansible_ssh_private_key_file"] = identity_for_ansible(ssh["identity_file"], project_dir)
    if ssh.get("options"):
        hostvars["ansible_ssh_common_args"] = ssh_common_args(ssh["options"])
    return hostvars


def inventory_from_cluster(
    cluster: Dict[str, Any],
    project_dir: Any,
    env_name: Optional[str],
    commands: Any = None,
    files: Sequence[Any] = (),
) -> Tuple[List[Tuple[str, Dict[str, Any]]], Dict[str, Any]]:
    """Map a merged ``cluster:`` block to ``(workers, cluster_vars)``.

    ``workers`` is ``[(inventory_hostname, hostvars), ...]`` in rank order;
    ``cluster_vars`` belong on group ``all``. ``commands`` is the merged
    top-level ``commands:`` map, used for ``flodl_cmd``/``flodl_cmd_dir``;
    ``files`` only serve error messages.
    """
    validate_cluster(cluster, files)
    workers = [(worker["host"], worker_hostvars(worker, project_dir)) for worker in cluster["workers"]]

    cluster_vars: Dict[str, Any] = {}
    controller = cluster["controller"]
    for source, variable in _CONTROLLER_VARS:
        if controller.get(source) is not None:
            cluster_vars[variable] = _copy(controller[source])
    if cluster.get("env") is not None:
        cluster_vars["flodl_cluster_env"] = _copy(cluster["env"])
    if cluster.get("gpu_ram_share") is not None:
        cluster_vars["flodl_cluster_gpu_ram_share"] = cluster["gpu_ram_share"]
    if env_name:
        cluster_vars["flodl_fdl_env"] = env_name
    # The checkout holding fdl.yml: fdl-cli launches and builds natively there.
    cluster_vars["flodl_project_dir"] = str(Path(project_dir).absolute())
    cmd = cluster_command(commands)
    if cmd is not None:
        cluster_vars["flodl_cmd"] = cmd
        spec = commands.get(cmd)
        script = run_line(spec)
        if script is not None:
            # fdl-cli runs a run: script itself (natively, or in the command's own compose service).
            cluster_vars["flodl_cmd_run"] = script
            docker = spec.get("docker")
            cluster_vars["flodl_launch_docker"] = docker if isinstance(docker, str) and docker.strip() else False
        directory = command_dir(cmd, spec, project_dir)
        if directory:
            cluster_vars["flodl_cmd_dir"] = directory
    return workers, cluster_vars


def build_inventory(
    project_dir: Any, env: Optional[str] = DEFAULT_ENV, warnings: Optional[List[str]] = None
) -> Tuple[List[Tuple[str, Dict[str, Any]]], Dict[str, Any]]:
    """Load, merge, check and map a project in one call; loader warnings go to ``warnings`` when given."""
    config = load_config(project_dir, env)
    if warnings is not None:
        warnings.extend(config.warnings)
    cluster = cluster_block(config)
    return inventory_from_cluster(
        cluster, config.project_dir, config.env, commands=config.data.get("commands"), files=config.files
    )
