# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the launch runs: the launch host (``flodl_launch_host``), how it is reached, the argv that runs the
launch command there, and the launch's compose service.

Apart from plugin_utils._run.context so that a play without a launch (the preflight playbook) never imports the
launch side of the collection: every module a step imports is compiled from source in ansible-playbook.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_cleanup import plan_payload
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_launch import (
    RemoteLaunchError,
    env_payload,
    wrapper_script,
)
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.ssh import probe_argv
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import (
    RunContext,
    as_bool,
    is_local_host,
    ssh_block_of,
)


def launch_docker(given: Any, ctx: RunContext) -> str | None:
    """The compose service of the default launch command, or None for a native launch.

    ``flodl_launch_docker`` (or the task argument) names a service; a boolean
    (also a survey's ``"false"``/``"true"`` text) turns the controller's build
    service off or on. Unset follows ``flodl_controller_docker``.
    """
    if given is None and ctx.settings.launch_docker_type:  # neither text nor a boolean, as the reader found it
        raise TopologyError([_NOT_A_SERVICE + ctx.settings.launch_docker_type])
    value = given if given is not None else ctx.settings.launch_docker
    build_service = ctx.cluster.controller.docker
    if value is None:
        return str(build_service) if build_service else None
    flag = as_bool(value) if isinstance(value, (bool, str)) else None
    if flag is False or (isinstance(value, str) and not value.strip()):
        return None
    if flag is True:
        if not build_service:
            raise TopologyError([
                "controller: flodl_launch_docker is true but flodl_controller_docker names no compose service; "
                "name the service in flodl_launch_docker (e.g. cuda) or set flodl_controller_docker"
            ])
        return str(build_service)
    if not isinstance(value, str):
        raise TopologyError([_NOT_A_SERVICE + type(value).__name__])
    return value.strip()


_NOT_A_SERVICE = "controller: flodl_launch_docker must be a compose service name or a boolean, got "


def remote_launch_argv(
    action: Any, task_vars: Mapping[str, Any], host: str, cwd: str, command: str,
    added: Mapping[str, Any], args: Mapping[str, Any], cleanup_plan: str | None = None,
) -> tuple[list[str], bytes]:
    """(ssh argv, stdin) that run the launch command on inventory host ``host``, reached as Ansible reaches it.

    ``cleanup_plan`` (module_utils._ssh.remote_cleanup) travels on stdin after the environment.
    """
    ssh = launch_ssh(action, task_vars, host, bool(args["forward_agent"]))
    script = wrapper_script(cwd, command, float(args["grace_seconds"]), args["shell"], plan=cleanup_plan is not None)
    stdin = env_payload({str(k): str(v) for k, v in added.items()})
    if cleanup_plan is not None:
        stdin += plan_payload(cleanup_plan)
    return probe_argv({"host": host, "ssh": ssh}, script), stdin


def launch_host_of(ctx: RunContext, task_vars: Mapping[str, Any], templar: Any) -> str | None:
    """``flodl_launch_host`` when it is another machine than this one, else None."""
    name = ctx.settings.launch_host
    return None if is_local_host(name, task_vars, templar) else name


def launch_ssh(action: Any, task_vars: Mapping[str, Any], host: str, forward_agent: bool) -> dict[str, Any]:
    """The ssh block for the launch host, with the job's agent forwarded when asked (``flodl_launch_forward_agent``,
    as the run's reader read it: ``RunSettings.launch_forward_agent``, or the launch launch_env prepared)."""
    if host not in (task_vars.get("hostvars") or {}):
        raise RemoteLaunchError(f"flodl_launch_host {host!r} is not an inventory host; add it (and how to reach it)")
    ssh = dict(ssh_block_of(action, task_vars, host))
    if forward_agent:
        # The launcher there reaches the workers with the job's own key (AWX machine credential, ssh-agent).
        ssh["options"] = [*ssh.get("options", []), "ForwardAgent=yes"]
    return ssh
