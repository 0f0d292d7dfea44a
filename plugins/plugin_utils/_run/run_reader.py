# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one reader: task variables -> validated run model (RunContext), before any host is contacted.

Every problem is a :class:`Problem` value carrying the worker it belongs to (its index in the cluster,
which is the inventory order); they are rendered to text once, when the run is refused.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._run import knobs
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.connect_bound import DEFAULT_SECONDS as DEFAULT_CONNECT_SECONDS
from ansible_collections.flodl.cluster.plugins.module_utils._run.identity import controller_hostname
from ansible_collections.flodl.cluster.plugins.module_utils._run.netscale import (
    ENV_NET_TIMEOUT_SCALE,
    NetScaleError,
    parse_net_timeout_scale,
)
from ansible_collections.flodl.cluster.plugins.module_utils._core.problems import INVENTORY, Problem, run_level, texts, worded
from ansible_collections.flodl.cluster.plugins.module_utils._run.run_model import RunContext
from ansible_collections.flodl.cluster.plugins.module_utils._core.safety import (
    absolute_path_problem,
    cargo_bin_problem,
    relative_path_problem,
)
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.sshargs import (
    CONNECTION_VARS,
    SECRET_CONNECTION_VARS,
    ResolvedConnection,
    connection_from_vars,
    is_ssh_connection,
    non_ssh_problems,
    own_worker_ssh_block,
    worker_ssh_block,
)
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.cluster_ranks import too_few_ranks
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.model import cluster_model
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError, cluster_from_inventory
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.validate import cluster_findings
from ansible_collections.flodl.cluster.plugins.module_utils._core.vault_redact import redact_text
from ansible_collections.flodl.cluster.plugins.plugin_utils._run import run_rules as rules
from ansible_collections.flodl.cluster.plugins.plugin_utils._run import vault_values
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.inventory_sources import empty_group_problem
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.run_settings import launch_mode_walk_in, read_settings
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.processes import run_for_output
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.task_vars import as_bool, plain, var

# (host name, that host's variables) -> the connection Ansible resolved for it.
ConnectionResolver = Callable[[str, Mapping[str, Any]], ResolvedConnection]


def _worker_vars(task_vars: Mapping[str, Any], templar: Any,
                 vaulted: dict[str, str]) -> list[tuple[str, dict[str, Any], Mapping[str, Any]]]:
    """Each worker's variables, templated; the vaulted values among them (and its own) added to ``vaulted``."""
    groups = task_vars.get("groups") or {}
    hostvars = task_vars.get("hostvars") or {}
    out: list[tuple[str, dict[str, Any], Mapping[str, Any]]] = []
    for name in groups.get(rules.WORKERS_GROUP, []):
        raw = hostvars[name]
        vault_values.in_host(raw, vaulted)
        values: dict[str, Any] = {}
        for key in rules.WORKER_VARS:
            if key in raw:
                value = raw[key]
                if templar is not None:
                    value = templar.template(value)
                vault_values.found_in(value, vaulted)
                values[key] = plain(value)
        out.append((str(name), values, raw))
    return out


def _vars_resolver(templar: Any) -> ConnectionResolver:
    """A worker's connection from its variables alone (unit tests, and no Ansible plugin at hand)."""
    def resolve(_name: str, hostvars: Mapping[str, Any]) -> ResolvedConnection:
        names = {n for group in CONNECTION_VARS.values() for n in group}
        names |= {"ansible_connection", *SECRET_CONNECTION_VARS}
        return connection_from_vars({n: var(hostvars, templar, n) for n in names if n in hostvars})
    return resolve


def build_context(
    task_vars: Mapping[str, Any],
    templar: Any,
    phases: list[str],
    resolve: ConnectionResolver | None = None,
    before: list[Problem] | None = None,
) -> RunContext:
    """Read and validate the run for ``phases``; raise TopologyError listing every problem.

    ``before``: problems the caller found (become, from the play context), refused with the rest.
    """
    resolve = resolve or _vars_resolver(templar)
    # What came from Ansible Vault: the task's own variables (a run-level knob, or what one refers to) and each
    # worker's, before templating and after (a reference to a vaulted variable keeps its mark).
    vaulted = vault_values.in_task_vars(task_vars)
    cluster_vars: dict[str, Any] = {}
    for name in (n for n in rules.CLUSTER_VARS if n in task_vars):
        value = templar.template(task_vars[name]) if templar is not None else task_vars[name]
        vault_values.found_in(value, vaulted)
        if (value := plain(value)) is not None:
            cluster_vars[name] = value
    identity = controller_hostname(os.environ, run_for_output)
    problems: list[Problem] = list(before or [])
    workers: list[tuple[str, dict[str, Any]]] = []
    ssh_blocks: dict[str, dict[str, Any] | None] = {}
    inventory_names: dict[str, str] = {}
    ansible_only: dict[str, str] = {}
    # walk_in starts each agent over the worker's own Ansible connection: ssh is not needed to reach it.
    walk_in = launch_mode_walk_in(task_vars, templar)
    worker_rows = _worker_vars(task_vars, templar, vaulted)
    if not worker_rows and rules.GANG_PHASES.intersection(phases):
        # The playbook ran on localhost for want of workers: nothing else about the run matters.
        raise TopologyError([empty_group_problem(task_vars.get("ansible_inventory_sources"), phases)])
    for index, (name, values, raw) in enumerate(worker_rows):
        host = str(values.get("flodl_host") or name)
        inventory_names[host] = name
        workers.append((name, values))
        problems += [p for p in [rules.local_name_problem(name, index, raw, templar)] if p is not None]
        if host == identity:
            # Never reached over ssh, but a declared block is part of the topology (fdl-cli keeps it).
            ssh_blocks[name] = own_worker_ssh_block(values)
            continue
        conn = resolve(name, raw)
        if walk_in and not is_ssh_connection(conn.connection):
            ansible_only[host] = str(conn.connection)
            ssh_blocks[name] = own_worker_ssh_block(values)  # only as declared: flodl's ssh never reaches it
            problems += [worded(p, index, "flodl_local_devices")
                         for p in non_ssh_problems(host, str(conn.connection), values)]
            continue
        ssh_blocks[name], found = worker_ssh_block(host, values, conn)
        problems += [worded(p, index) for p in found]
    cluster = cluster_from_inventory(workers, cluster_vars, ssh_blocks)
    problems[:0] = cluster_findings(cluster, INVENTORY)

    scale_text = _net_timeout_scale(task_vars, templar, problems)
    prebuild, cmd, cmd_dir = _controller_settings(task_vars, templar, phases, problems)
    problems += rules.env_problems(cluster)
    if prebuild and ("prebuild" in phases or "preflight" in phases):
        for index, worker in enumerate(cluster["workers"]):
            if worker.get("host") != identity and not worker.get("arch"):
                problems.append(worded(
                    f"host {worker.get('host')} (worker {index}): flodl_arch is required for prebuild: "
                    "the libtorch variant under <path>/libtorch/, e.g. precompiled/cu128 "
                    "(or set flodl_prebuild: false)", index, "flodl_arch"))
    lock_raw = var(task_vars, templar, "flodl_run_lock")
    if lock_raw is not None and as_bool(lock_raw) is None:
        problems.append(worded(f"controller: flodl_run_lock must be true or false, got {type(lock_raw).__name__}",
                               None, "flodl_run_lock"))
    problems += rules.knob_problems(task_vars, templar, phases, prebuild)
    if "launch" in phases:
        problems += run_level([too_few_ranks(cluster)])
    checkout = var(task_vars, templar, "flodl_project_dir")
    problems += run_level([absolute_path_problem(checkout, "controller: flodl_project_dir",
                                                 "the project checkout on the controller (the directory of fdl.yml)")],
                          "flodl_project_dir")
    all_workers = [name for name, _values in workers]
    play_hosts = [str(h) for h in task_vars.get("ansible_play_hosts_all", all_workers)]
    if task_vars.get("inventory_hostname", all_workers[0] if all_workers else None) not in all_workers:
        # A play on another host (a runbook on localhost) cannot tell a limit: it speaks for every worker.
        play_hosts = all_workers
    problems += rules.gang_problems(phases, all_workers, play_hosts)
    build_host = str(var(task_vars, templar, "flodl_build_host", "localhost") or "localhost")
    if prebuild and build_host not in rules.LOCAL_HOSTS and build_host not in (task_vars.get("hostvars") or {}):
        problems.append(worded(
            f"controller: flodl_build_host {build_host!r} is not an inventory host; add it to the inventory "
            "(with how Ansible reaches it) or leave flodl_build_host unset to build on the controller",
            None, "flodl_build_host"))
    problems += rules.write_dir_findings(checkout or cluster["controller"].get("path"), phases, cluster, identity,
                                         prebuild)
    # The roles' argument specs, as Ansible checks them at role start, for what the rules above do not cover.
    problems += rules.argspec_problems(task_vars, templar, phases, workers, problems)
    if problems:
        raise _refusal(problems, all_workers, sorted(vaulted))

    fdl_env = var(task_vars, templar, "flodl_fdl_env")
    launch_command = var(task_vars, templar, "flodl_launch_command")
    cmd_run = var(task_vars, templar, "flodl_cmd_run")
    connect_raw = var(task_vars, templar, "flodl_launch_connect_timeout")
    connect = knobs.number(connect_raw) if connect_raw is not None and str(connect_raw).strip() else None
    typed = cluster_model(cluster)  # validated above: typed once, here; the rules above read the unvalidated dict
    return RunContext(
        cluster=typed,
        controller_identity=identity,
        prebuild=prebuild,
        net_timeout_scale=scale_text,
        cmd=str(cmd) if cmd is not None else None,
        cmd_dir=cmd_dir,
        fdl_env=str(fdl_env) if fdl_env is not None and str(fdl_env).strip() else None,
        build_host=build_host,
        launch_command=str(launch_command) if launch_command else None,
        cmd_run=str(cmd_run).strip() if cmd_run is not None and str(cmd_run).strip() else None,
        connect_timeout=DEFAULT_CONNECT_SECONDS if connect is None else math.ceil(connect),
        project_dir=str(checkout or typed.controller.path),
        play_hosts=[h for h in play_hosts if h in all_workers],
        inventory_names=inventory_names,
        ansible_only=ansible_only,
        settings=read_settings(task_vars, templar),
        vaulted=vaulted,
    )


def _refusal(problems: list[Problem], inventory_order: list[str],
             secrets: Sequence[str] = ()) -> TopologyError:
    """The refusal, rendered: every problem in order, and each worker's own (by the problem's worker)."""
    per_host: dict[str, list[str]] = {}
    for problem in problems:
        if problem.worker is not None:
            per_host.setdefault(inventory_order[problem.worker], []).append(redact_text(problem.text(), secrets))
    return TopologyError([redact_text(t, secrets) for t in texts(problems)], per_host=per_host or None)


def _net_timeout_scale(task_vars: Mapping[str, Any], templar: Any, problems: list[Problem]) -> str | None:
    """``flodl_net_timeout_scale``, else the controller's ``FLODL_NET_TIMEOUT_SCALE``; a bad value is a problem."""
    scale_raw = var(task_vars, templar, "flodl_net_timeout_scale")
    if isinstance(scale_raw, str) and not scale_raw.strip():
        scale_raw = None  # a blank survey answer: unset (FLODL_NET_TIMEOUT_SCALE="" itself stays refused)
    scale_source = "flodl_net_timeout_scale"
    if scale_raw is None and ENV_NET_TIMEOUT_SCALE in os.environ:
        scale_raw = os.environ[ENV_NET_TIMEOUT_SCALE]
        scale_source = f"controller environment {ENV_NET_TIMEOUT_SCALE}"
    if scale_raw is None:
        return None
    try:
        parse_net_timeout_scale(str(scale_raw))
    except NetScaleError as exc:
        problems.append(worded(f"controller: {scale_source}: {exc}", None, "flodl_net_timeout_scale"))
    return str(scale_raw)


def _controller_settings(task_vars: Mapping[str, Any], templar: Any, phases: list[str],
                         problems: list[Problem]) -> tuple[bool, Any, str]:
    """(``flodl_prebuild``, ``flodl_cmd``, ``flodl_cmd_dir`` without its slashes), their problems appended."""
    prebuild_raw = var(task_vars, templar, "flodl_prebuild", True)
    prebuild = as_bool(prebuild_raw)
    if prebuild is None:
        problems.append(worded(f"controller: flodl_prebuild must be true or false, got {prebuild_raw!r}",
                               None, "flodl_prebuild"))
        prebuild = True
    cmd = var(task_vars, templar, "flodl_cmd")
    needs_cmd = "launch" in phases or ("prebuild" in phases and prebuild)
    if needs_cmd and (cmd is None or not str(cmd).strip()):
        problems.append(worded(
            "controller: flodl_cmd is required: the fdl command name, which is also the cargo --bin target "
            "(e.g. flodl_cmd: train)", None, "flodl_cmd"))
    elif cmd is not None:
        problems += run_level([cargo_bin_problem(cmd, "controller: flodl_cmd")], "flodl_cmd")
    # Relative to the project root; a leading "/" has always meant the root too.
    cmd_dir = str(var(task_vars, templar, "flodl_cmd_dir", "") or "").strip("/")
    problems += run_level([relative_path_problem(cmd_dir, "controller: flodl_cmd_dir", "the project root")],
                          "flodl_cmd_dir")
    return prebuild, cmd, cmd_dir
