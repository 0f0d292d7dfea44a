# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side view of a run: what a phase's action plugin calls first.

``read_run`` gives the phase its run model: the one the play's first step built (plugin_utils._run.run_handoff),
else a new one, read and validated by plugin_utils._run.run_reader before any host is contacted, each worker's
connection resolved as Ansible would; how any inventory host is reached (the build host, the launch host).
The launch host itself is plugin_utils._host.launch_target. The reader's names are re-exported here for the
plugins that import them from this module.
"""
from __future__ import annotations

import socket
from dataclasses import replace
from collections.abc import Mapping
from typing import Any

from ansible.utils.display import Display

from ansible_collections.flodl.cluster.plugins.module_utils._run.ansible_flags import become_problem
from ansible_collections.flodl.cluster.plugins.module_utils._core.problems import Problem, worded
from ansible_collections.flodl.cluster.plugins.module_utils._run.run_model import RunContext, to_model
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.sshargs import ResolvedConnection, derive_worker_ssh
from ansible_collections.flodl.cluster.plugins.plugin_utils._run import run_handoff, vault_values
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.connection import AnsibleConnections
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.run_reader import ConnectionResolver, build_context
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.run_settings import run_lock_enabled, run_lock_ttl, walks_in
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.run_rules import (
    CLUSTER_VARS,
    GANG_PHASES,
    LOCAL_HOSTS,
    PHASE_ROLES,
    PHASES,
    WORKER_VARS,
    WORKERS_GROUP,
    become_findings,
    env_problems,
    gang_problems,
    phase_options,
    role_options,
)
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.task_vars import INVALID_CONFIG, as_bool, fail_result, plain, var

__all__ = [
    "CLUSTER_VARS", "GANG_PHASES", "INVALID_CONFIG", "LOCAL_HOSTS", "PHASES", "PHASE_ROLES", "RunContext",
    "WORKERS_GROUP", "WORKER_VARS", "as_bool", "build_context", "env_problems", "fail_result", "gang_problems",
    "phase_options", "plain", "read_run", "role_options", "run_lock_enabled", "run_lock_ttl", "var", "walks_in",
]

display = Display()


def _ansible_resolver(action: Any, task_vars: Mapping[str, Any]) -> ConnectionResolver:
    cli_password = bool(getattr(action._play_context, "password", None))
    # The play's connection keyword is the workers' only when the play runs on them.
    on_workers = task_vars.get("inventory_hostname") in ((task_vars.get("groups") or {}).get(WORKERS_GROUP) or [])

    connections = AnsibleConnections(action._task, action._templar, cli_password, on_workers)

    def resolve(_name: str, host_vars: Mapping[str, Any]) -> ResolvedConnection:
        return connections.resolve(host_vars)

    return resolve


def read_run(action: Any, task_vars: Mapping[str, Any], phases: list[str], connections: bool = True,
             become_ok: bool = False) -> RunContext:
    """The run as a phase's action plugin sees it, each worker reached as Ansible would reach it.

    The model an earlier step of this run built is taken as it is (validated once, each connection resolved
    once: plugin_utils._run.run_handoff); else it is read here, and the step returns it (``run_handoff.fields``).
    ``connections=False`` for a phase that reaches no worker (prebuild builds on the build host): the
    workers' connections are not resolved and their ssh blocks stay as ``flodl_ssh`` gives them.
    ``become`` is refused on every worker it applies to (each worker's own problem) unless ``become_ok`` (a
    step Ansible runs as a module, which honours it).
    """
    templar = action._templar
    print_ = run_handoff.run_fingerprint(task_vars, templar)
    # The step that built a model checked each worker's own ansible_become; this step's become is its own.
    becomes = not become_ok and _step_becomes(action) and not walks_in(task_vars, templar, phases)
    received = None if becomes else run_handoff.received(task_vars, templar, phases, connections, print_)
    if received is not None:
        ctx, source = received
        vault_values.add(ctx.vaulted)  # withheld from whatever this step shows or returns
        ctx = replace(ctx, trace=run_handoff.trace(source, validations=0, resolved=0))
        display.vvv(f"flodl run model: from {source} (not validated again, no connection resolved)")
        return ctx
    # walk_in starts each worker's agent over Ansible's own connection, become included: nothing to refuse there.
    become = [] if become_ok or walks_in(task_vars, templar, phases) else _become_findings(action, task_vars)
    resolved: list[str] = []
    base = _ansible_resolver(action, task_vars)

    def resolve(name: str, host_vars: Mapping[str, Any]) -> ResolvedConnection:
        if not connections:
            return ResolvedConnection()
        resolved.append(name)
        return base(name, host_vars)

    ctx = build_context(task_vars, templar, phases, resolve, before=become)
    vault_values.add(ctx.vaulted)  # withheld from whatever this step shows or returns
    ctx = replace(ctx, trace=run_handoff.trace("built", validations=1, resolved=len(resolved)),
                  handoff=to_model(ctx, phases, connections, print_) if connections else None)
    display.vvv(f"flodl run model: built for {', '.join(sorted(set(phases)))} (validated once, "
                f"{len(resolved)} worker connection(s) resolved)")
    return ctx


def _step_becomes(action: Any) -> bool:
    """Become on this step: its host's (the play context) or the play's, block's or task's keyword (--become)."""
    task_become = as_bool(getattr(action._task, "become", None))
    return bool(getattr(action._play_context, "become", False)) or task_become is True


def _become_findings(action: Any, task_vars: Mapping[str, Any]) -> list[Problem]:
    """Become wherever Ansible would apply it: each worker's own problem; the step's own host if not a worker."""
    here = str(task_vars.get("inventory_hostname", "localhost"))
    context = action._play_context
    first = (here, (getattr(context, "become", None), getattr(context, "become_user", None),
                    getattr(context, "become_method", None)))
    workers = [str(h) for h in (task_vars.get("groups") or {}).get(WORKERS_GROUP) or []]
    if here not in workers:
        # A runbook's play on another host: its become is not the workers', but this step would run under it.
        found = [worded(become_problem(here, first[1][1]), None, "ansible_become")] if first[1][0] else []
        return found + become_findings(task_vars, action._templar, None)
    task = action._task
    play = (getattr(task, "become", None), getattr(task, "become_user", None), getattr(task, "become_method", None))
    return become_findings(task_vars, action._templar, play, first)


def ssh_block_of(action: Any, task_vars: Mapping[str, Any], host: str) -> dict[str, Any]:
    """flodl's ssh block for any inventory host (the build host, the launch host)."""
    host_vars = (task_vars.get("hostvars") or {}).get(host) or {}
    return derive_worker_ssh(host, _ansible_resolver(action, task_vars)(host, host_vars)).ssh


def is_local_host(name: str, task_vars: Mapping[str, Any], templar: Any) -> bool:
    """True for this machine: localhost, the controller's own name, or a host on the local connection."""
    if name in LOCAL_HOSTS or name == socket.gethostname():
        return True
    hostvars = task_vars.get("hostvars") or {}
    # Membership first: Ansible's hostvars answer an unknown name with a marker that fails outside a template.
    raw = (hostvars.get(name) or {}).get("ansible_connection") if name in hostvars else None
    return raw is not None and str(templar.template(raw) if templar is not None else raw) == "local"
