# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side view of a run: inventory variables -> validated topology.

Every phase's action plugin starts here, so validation (topology, reserved
keys, ``FLODL_NET_TIMEOUT_SCALE``, per-phase required variables) always
happens on the controller before any host is contacted.
"""
from __future__ import annotations

import functools
import json
import math
import os
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ansible_collections.flodl.cluster.plugins.module_utils import argspec, knobs
from ansible_collections.flodl.cluster.plugins.module_utils.ansible_flags import become_problem
from ansible_collections.flodl.cluster.plugins.module_utils.connect_bound import DEFAULT_SECONDS as DEFAULT_CONNECT_SECONDS
from ansible_collections.flodl.cluster.plugins.module_utils.identity import controller_hostname
from ansible_collections.flodl.cluster.plugins.module_utils.netscale import (
    ENV_NET_TIMEOUT_SCALE,
    NetScaleError,
    parse_net_timeout_scale,
)
from ansible_collections.flodl.cluster.plugins.module_utils.prebuild import target_subdir
from ansible_collections.flodl.cluster.plugins.module_utils.project_dirs import write_dir_problems
from ansible_collections.flodl.cluster.plugins.module_utils.remote_cleanup import plan_payload
from ansible_collections.flodl.cluster.plugins.module_utils.remote_launch import (
    RemoteLaunchError,
    env_payload,
    reach_script,
    wrapper_script,
)
from ansible_collections.flodl.cluster.plugins.module_utils.safety import (
    absolute_path_problem,
    cargo_bin_problem,
    default_arg_max,
    env_size_problems,
    parse_bool,
    relative_path_problem,
)
from ansible_collections.flodl.cluster.plugins.module_utils.sshargs import (
    CONNECTION_VARS,
    SECRET_CONNECTION_VARS,
    ResolvedConnection,
    connection_from_vars,
    derive_worker_ssh,
    own_worker_ssh_block,
    worker_ssh_block,
)
from ansible_collections.flodl.cluster.plugins.module_utils.ssh import launcher_argv, probe_argv
from ansible_collections.flodl.cluster.plugins.plugin_utils.connection import resolve_connection
from ansible_collections.flodl.cluster.plugins.plugin_utils.inventory_sources import empty_group_problem
from ansible_collections.flodl.cluster.plugins.plugin_utils.processes import run_for_output
from ansible_collections.flodl.cluster.plugins.module_utils.topology import (
    TopologyError,
    cluster_from_inventory,
    too_few_ranks,
    remote_workers,
    validate_cluster,
)

WORKERS_GROUP = "flodl_workers"
PHASES = ("preflight", "prebuild", "launch", "teardown")
# The role whose meta/argument_specs.yml covers a phase's variables (teardown has no role).
PHASE_ROLES = {"preflight": "preflight", "prebuild": "prebuild", "launch": "launch"}
_ROLES_DIR = Path(__file__).resolve().parents[2] / "roles"

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
)
# Phases that need every worker at once; preflight and teardown honour --limit.
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
GANG_PHASES = frozenset({"prebuild", "launch"})


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
    project_dir: str = ""
    cmd_run: str | None = None  # the fdl command's run: line (flodl_cmd_run), run as fdl-cli runs it
    connect_timeout: int = DEFAULT_CONNECT_SECONDS  # flodl_launch_connect_timeout, for the launcher's ssh
    play_hosts: list[str] = field(default_factory=list)  # the workers this play runs on (after --limit)
    inventory_names: dict[str, str] = field(default_factory=dict)  # logical host -> inventory host
    warnings: list[str] = field(default_factory=list)

    @property
    def remotes(self) -> list[dict[str, Any]]:
        return remote_workers(self.cluster, self.controller_identity)

    @property
    def project_root(self) -> str:
        return str(self.cluster["controller"]["path"])

    def in_play(self, worker: Mapping[str, Any]) -> bool:
        return self.inventory_names.get(str(worker.get("host")), "") in self.play_hosts


# (host name, that host's variables) -> the connection Ansible resolved for it.
ConnectionResolver = Callable[[str, Mapping[str, Any]], ResolvedConnection]


def var(task_vars: Mapping[str, Any], templar: Any, name: str, default: Any = None) -> Any:
    """A variable as the task sees it, templated and as plain Python values."""
    if name not in task_vars:
        return default
    value = task_vars[name]
    if templar is not None:
        value = templar.template(value)
    return plain(value)


def _worker_vars(task_vars: Mapping[str, Any], templar: Any) -> list[tuple[str, dict[str, Any], Mapping[str, Any]]]:
    groups = task_vars.get("groups") or {}
    hostvars = task_vars.get("hostvars") or {}
    out: list[tuple[str, dict[str, Any], Mapping[str, Any]]] = []
    for name in groups.get(WORKERS_GROUP, []):
        raw = hostvars[name]
        values: dict[str, Any] = {}
        for var in WORKER_VARS:
            if var in raw:
                value = raw[var]
                if templar is not None:
                    value = templar.template(value)
                values[var] = plain(value)
        out.append((str(name), values, raw))
    return out


@functools.lru_cache(maxsize=None)
def role_options(role: str) -> dict[str, Any]:
    """The options of a role's ``main`` entry point, as shipped in this collection."""
    path = _ROLES_DIR / role / "meta" / "argument_specs.yml"
    with open(path, encoding="utf-8") as handle:
        return dict(yaml.safe_load(handle)["argument_specs"]["main"]["options"])


def phase_options(phases: list[str]) -> dict[str, dict[str, Any]]:
    """The union of the argument specs of the roles that run ``phases`` (what cluster_train validates)."""
    return argspec.union_options(role_options(PHASE_ROLES[p]) for p in PHASES if p in phases and p in PHASE_ROLES)


def argspec_problems(
    task_vars: Mapping[str, Any],
    templar: Any,
    phases: list[str],
    workers: list[tuple[str, dict[str, Any]]],
    ours: list[str],
) -> tuple[list[str], dict[str, list[str]]]:
    """The roles' argument specs over the run, beyond what ``ours`` (the run's own rules) already found.

    The run's own variables are checked once, each worker's variables on that worker: (run problems,
    problems per inventory worker).
    """
    options = phase_options(phases)
    run_params = {name: var(task_vars, templar, name) for name in options if name not in WORKER_VARS and name in task_vars}
    run_found, host_found = argspec.run_problems(options, run_params, workers, WORKER_VARS)
    run_level = argspec.uncovered(run_found, ["controller"], ours, "controller")
    per_host: dict[str, list[str]] = {}
    logical = {name: str(values.get("flodl_host") or name) for name, values in workers}
    for name, found in host_found.items():
        left = argspec.uncovered(found, [f"host {name} ", f"host {logical[name]} "], ours, f"host {name}")
        if left:
            per_host[name] = left
    return run_level, per_host


# Where a problem names a worker: "host <h> (worker <i>): ..." (validate.INVENTORY) or "host <h>: ...".
_WORKER_PLACE = re.compile(r"host (?:.+? \(worker (?P<index>\d+)\)|(?P<host>[^\s:]+):)")


def attribute_to_workers(
    problems: list[str], inventory_order: list[str], inventory_names: Mapping[str, str]
) -> dict[str, list[str]]:
    """The problems that name a worker, per inventory host (by worker index, else by logical host name)."""
    out: dict[str, list[str]] = {}
    for problem in problems:
        place = _WORKER_PLACE.match(problem)
        if not place:
            continue
        if place.group("index") is not None:
            index = int(place.group("index"))
            name = inventory_order[index] if index < len(inventory_order) else None
        else:
            host = place.group("host")
            name = inventory_names.get(host, host if host in inventory_order else None)
        if name is not None:
            out.setdefault(name, []).append(problem)
    return out


def as_bool(value: Any) -> bool | None:
    """Ansible's boolean rules (survey and ``-e`` values arrive as text); None when not a boolean."""
    return parse_bool(value)


def build_context(
    task_vars: Mapping[str, Any],
    templar: Any,
    phases: list[str],
    resolve: ConnectionResolver | None = None,
) -> RunContext:
    """Read and validate the run for ``phases``; raise TopologyError listing every problem."""
    if resolve is None:
        def resolve(_name: str, hostvars: Mapping[str, Any]) -> ResolvedConnection:
            names = {n for group in CONNECTION_VARS.values() for n in group}
            names |= {"ansible_connection", *SECRET_CONNECTION_VARS}
            return connection_from_vars({n: var(hostvars, templar, n) for n in names if n in hostvars})
    cluster_vars = {name: var(task_vars, templar, name) for name in CLUSTER_VARS}
    cluster_vars = {k: v for k, v in cluster_vars.items() if v is not None}
    identity = controller_hostname(os.environ, run_for_output)
    problems: list[str] = []
    workers: list[tuple[str, dict[str, Any]]] = []
    ssh_blocks: dict[str, dict[str, Any] | None] = {}
    inventory_names: dict[str, str] = {}
    worker_rows = _worker_vars(task_vars, templar)
    if not worker_rows and GANG_PHASES.intersection(phases):
        # The playbook ran on localhost for want of workers: nothing else about the run matters.
        raise TopologyError([empty_group_problem(task_vars.get("ansible_inventory_sources"), phases)])
    for name, values, raw in worker_rows:
        host = str(values.get("flodl_host") or name)
        inventory_names[host] = name
        workers.append((name, values))
        if host == identity:
            # Never reached over ssh, but a declared block is part of the topology (fdl-cli keeps it).
            ssh_blocks[name] = own_worker_ssh_block(values)
            continue
        ssh_blocks[name], found = worker_ssh_block(host, values, resolve(name, raw))
        problems += found
    cluster = cluster_from_inventory(workers, cluster_vars, ssh_blocks)
    try:
        validate_cluster(cluster)
    except TopologyError as exc:
        problems[:0] = exc.problems

    scale_text = _net_timeout_scale(task_vars, templar, problems)
    prebuild, cmd, cmd_dir = _controller_settings(task_vars, templar, phases, problems)
    problems += env_problems(cluster)
    if prebuild and ("prebuild" in phases or "preflight" in phases):
        for index, worker in enumerate(cluster["workers"]):
            if worker.get("host") != identity and not worker.get("arch"):
                problems.append(
                    f"host {worker.get('host')} (worker {index}): flodl_arch is required for prebuild: "
                    "the libtorch variant under <path>/libtorch/, e.g. precompiled/cu128 "
                    "(or set flodl_prebuild: false)"
                )
    lock_raw = var(task_vars, templar, "flodl_run_lock")
    if lock_raw is not None and as_bool(lock_raw) is None:
        problems.append(f"controller: flodl_run_lock must be true or false, got {type(lock_raw).__name__}")
    problems += knob_problems(task_vars, templar, phases, prebuild)
    if "launch" in phases:
        problems += [p for p in [too_few_ranks(cluster)] if p]
    checkout_problem = absolute_path_problem(var(task_vars, templar, "flodl_project_dir"), "controller: flodl_project_dir",
                                             "the project checkout on the controller (the directory of fdl.yml)")
    problems += [checkout_problem] if checkout_problem else []
    all_workers = [name for name, _values in workers]
    play_hosts = [str(h) for h in task_vars.get("ansible_play_hosts_all", all_workers)]
    if task_vars.get("inventory_hostname", all_workers[0] if all_workers else None) not in all_workers:
        # A play on another host (a runbook on localhost) cannot tell a limit: it speaks for every worker.
        play_hosts = all_workers
    problems += gang_problems(phases, all_workers, play_hosts)
    build_host = str(var(task_vars, templar, "flodl_build_host", "localhost") or "localhost")
    if prebuild and build_host not in LOCAL_HOSTS and build_host not in (task_vars.get("hostvars") or {}):
        problems.append(
            f"controller: flodl_build_host {build_host!r} is not an inventory host; add it to the inventory "
            "(with how Ansible reaches it) or leave flodl_build_host unset to build on the controller"
        )
    problems += _write_dir_problems(task_vars, templar, phases, cluster, identity, prebuild)
    # The roles' argument specs, as Ansible checks them at role start, for what the rules above do not cover;
    # their verdict is per worker, so each worker can report its own.
    run_level, per_host = argspec_problems(task_vars, templar, phases, [(n, v) for n, v, _raw in worker_rows], problems)
    if problems or run_level or per_host:
        every = problems + run_level + [p for found in per_host.values() for p in found]
        for name, found in attribute_to_workers(problems, [n for n, _v in workers], inventory_names).items():
            per_host[name] = found + per_host.get(name, [])
        raise TopologyError(every, per_host=per_host or None)

    fdl_env = var(task_vars, templar, "flodl_fdl_env")
    launch_command = var(task_vars, templar, "flodl_launch_command")
    cmd_run = var(task_vars, templar, "flodl_cmd_run")
    connect_raw = var(task_vars, templar, "flodl_launch_connect_timeout")
    connect = knobs.number(connect_raw) if connect_raw is not None and str(connect_raw).strip() else None
    project_dir = var(task_vars, templar, "flodl_project_dir") or cluster["controller"]["path"]
    return RunContext(
        cluster=cluster,
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
        project_dir=str(project_dir),
        play_hosts=[h for h in play_hosts if h in all_workers],
        inventory_names=inventory_names,
    )


def _write_dir_problems(task_vars: Mapping[str, Any], templar: Any, phases: list[str], cluster: Mapping[str, Any],
                        identity: str, prebuild: bool) -> list[str]:
    """Links out of the project where the run lock, logs and build dirs go (the checkout is their root)."""
    if not {"prebuild", "launch"} & set(phases):
        return []
    path = cluster["controller"].get("path")
    checkout = var(task_vars, templar, "flodl_project_dir") or path
    if not isinstance(checkout, str) or not checkout.startswith("/"):
        return []  # the validator reports the path itself
    builds = prebuild and "prebuild" in phases
    rels = [target_subdir(str(w["host"]), w["arch"]) for w in cluster["workers"]
            if builds and w.get("host") != identity and isinstance(w.get("arch"), str) and w["arch"]]
    return write_dir_problems(checkout, rels)


def _net_timeout_scale(task_vars: Mapping[str, Any], templar: Any, problems: list[str]) -> str | None:
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
        problems.append(f"controller: {scale_source}: {exc}")
    return str(scale_raw)


def _controller_settings(task_vars: Mapping[str, Any], templar: Any, phases: list[str],
                         problems: list[str]) -> tuple[bool, Any, str]:
    """(``flodl_prebuild``, ``flodl_cmd``, ``flodl_cmd_dir`` without its slashes), their problems appended."""
    prebuild_raw = var(task_vars, templar, "flodl_prebuild", True)
    prebuild = as_bool(prebuild_raw)
    if prebuild is None:
        problems.append(f"controller: flodl_prebuild must be true or false, got {prebuild_raw!r}")
        prebuild = True
    cmd = var(task_vars, templar, "flodl_cmd")
    needs_cmd = "launch" in phases or ("prebuild" in phases and prebuild)
    if needs_cmd and (cmd is None or not str(cmd).strip()):
        problems.append(
            "controller: flodl_cmd is required: the fdl command name, which is also the cargo --bin target "
            "(e.g. flodl_cmd: train)"
        )
    elif cmd is not None:
        problems += [p for p in [cargo_bin_problem(cmd, "controller: flodl_cmd")] if p]
    # Relative to the project root; a leading "/" has always meant the root too.
    cmd_dir = str(var(task_vars, templar, "flodl_cmd_dir", "") or "").strip("/")
    problems += [p for p in [relative_path_problem(cmd_dir, "controller: flodl_cmd_dir", "the project root")] if p]
    return prebuild, cmd, cmd_dir


# Run-level variables whose own check already refuses a NUL (with its place in the value).
_CHECKED_VARS = ("flodl_cmd", "flodl_cmd_dir", "flodl_project_dir", "flodl_net_timeout_scale")


def knob_problems(task_vars: Mapping[str, Any], templar: Any, phases: list[str], prebuild: bool) -> list[str]:
    """The later phases' own knobs, checked with the run (before contact) instead of when their role starts."""
    values = {name: var(task_vars, templar, name) for name in knobs.NAMES}
    # The other run-level options of the phases' roles (the cluster's and workers' own go through the validator).
    others = {name: var(task_vars, templar, name) for name in phase_options(phases)
              if name in task_vars and name not in (*WORKER_VARS, *CLUSTER_VARS, *knobs.NAMES, *_CHECKED_VARS)}
    return knobs.knob_problems(values, phases, prebuild) + knobs.nul_problems(others)


def gang_problems(phases: list[str], workers: list[str], play_hosts: list[str]) -> list[str]:
    """prebuild and launch need the whole cluster: a --limit, AWX limit or job slice must not cut it."""
    gang = sorted(GANG_PHASES.intersection(phases))
    missing = [w for w in workers if w not in play_hosts]
    if not gang or not missing:
        return []
    return [
        f"cluster: this play runs on {len(workers) - len(missing)} of {len(workers)} workers; missing "
        f"{', '.join(missing)} (cut by --limit, an AWX limit or a job slice). {' and '.join(gang)} "
        "start(s) every rank of one training run together, so a partial cluster cannot run: drop the limit "
        "(and job slicing) for this playbook; preflight and teardown accept a limit"
    ]


def _ansible_resolver(action: Any, task_vars: Mapping[str, Any]) -> ConnectionResolver:
    cli_password = bool(getattr(action._play_context, "password", None))
    # The play's connection keyword is the workers' only when the play runs on them.
    on_workers = task_vars.get("inventory_hostname") in ((task_vars.get("groups") or {}).get(WORKERS_GROUP) or [])

    def resolve(_name: str, host_vars: Mapping[str, Any]) -> ResolvedConnection:
        return resolve_connection(action._task, action._templar, host_vars, cli_password, on_workers)

    return resolve


def read_run(action: Any, task_vars: Mapping[str, Any], phases: list[str], connections: bool = True,
             become_ok: bool = False) -> RunContext:
    """The run as a phase's action plugin sees it, each worker reached as Ansible would reach it.

    ``connections=False`` for a phase that reaches no worker (prebuild builds on the build host): the
    workers' connections are not resolved and their ssh blocks stay as ``flodl_ssh`` gives them.
    ``become`` is refused unless ``become_ok`` (a step Ansible runs as a module, which honours it).
    """
    if not become_ok and getattr(action._play_context, "become", False):
        raise TopologyError([become_problem(str(task_vars.get("inventory_hostname", "localhost")),
                                            getattr(action._play_context, "become_user", None))])
    if not connections:
        return build_context(task_vars, action._templar, phases, lambda _name, _vars: ResolvedConnection())
    return build_context(task_vars, action._templar, phases, _ansible_resolver(action, task_vars))


def ssh_block_of(action: Any, task_vars: Mapping[str, Any], host: str) -> dict[str, Any]:
    """flodl's ssh block for any inventory host (the build host, the launch host)."""
    host_vars = (task_vars.get("hostvars") or {}).get(host) or {}
    return derive_worker_ssh(host, _ansible_resolver(action, task_vars)(host, host_vars)).ssh


def launch_docker(given: Any, task_vars: Mapping[str, Any], templar: Any, ctx: RunContext) -> str | None:
    """The compose service of the default launch command, or None for a native launch.

    ``flodl_launch_docker`` (or the task argument) names a service; a boolean
    (also a survey's ``"false"``/``"true"`` text) turns the controller's build
    service off or on. Unset follows ``flodl_controller_docker``.
    """
    value = given if given is not None else var(task_vars, templar, "flodl_launch_docker")
    build_service = ctx.cluster["controller"].get("docker")
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
        raise TopologyError([f"controller: flodl_launch_docker must be a compose service name or a boolean, "
                             f"got {type(value).__name__}"])
    return value.strip()


def env_problems(cluster: Mapping[str, Any]) -> list[str]:
    """Rank environments that exec would refuse (E2BIG), found now instead of after every build.

    The launch environment itself (the topology's variables) is measured on its rendered bytes by
    plugin_utils.launch_precheck, in a play that launches.
    """
    arg_max = default_arg_max()
    problems = env_size_problems(_str_env(cluster.get("env")), "cluster: flodl_cluster_env", arg_max=arg_max)
    for worker in cluster.get("workers") or []:
        problems += env_size_problems(_str_env(worker.get("env")), f"host {worker.get('host')}: flodl_env",
                                      arg_max=arg_max)
    return problems


def _str_env(env: Any) -> dict[str, str]:
    """The string entries of an env map (the validator reports the rest)."""
    if not isinstance(env, Mapping):
        return {}
    return {k: v for k, v in env.items() if isinstance(k, str) and isinstance(v, str)}


def run_lock_enabled(task_vars: Mapping[str, Any], templar: Any) -> bool:
    """``flodl_run_lock`` (default true): false starts a run even while another one is live."""
    return as_bool(var(task_vars, templar, "flodl_run_lock", True)) is not False


def is_local_host(name: str, task_vars: Mapping[str, Any], templar: Any) -> bool:
    """True for this machine: localhost, the controller's own name, or a host on the local connection."""
    if name in LOCAL_HOSTS or name == socket.gethostname():
        return True
    raw = ((task_vars.get("hostvars") or {}).get(name) or {}).get("ansible_connection")
    return raw is not None and str(templar.template(raw) if templar is not None else raw) == "local"


def remote_launch_argv(
    action: Any, task_vars: Mapping[str, Any], host: str, cwd: str, command: str,
    added: Mapping[str, Any], args: Mapping[str, Any], cleanup_plan: str | None = None,
) -> tuple[list[str], bytes]:
    """(ssh argv, stdin) that run the launch command on inventory host ``host``, reached as Ansible reaches it.

    ``cleanup_plan`` (module_utils.remote_cleanup) travels on stdin after the environment.
    """
    ssh = launch_ssh(action, task_vars, host)
    script = wrapper_script(cwd, command, float(args["grace_seconds"]), args["shell"], plan=cleanup_plan is not None)
    stdin = env_payload({str(k): str(v) for k, v in added.items()})
    if cleanup_plan is not None:
        stdin += plan_payload(cleanup_plan)
    return probe_argv({"host": host, "ssh": ssh}, script), stdin


def launch_host_of(task_vars: Mapping[str, Any], templar: Any) -> str | None:
    """``flodl_launch_host`` when it is another machine than this one, else None."""
    name = str(var(task_vars, templar, "flodl_launch_host", "localhost") or "localhost")
    return None if is_local_host(name, task_vars, templar) else name


def launch_ssh(action: Any, task_vars: Mapping[str, Any], host: str) -> dict[str, Any]:
    """The ssh block for the launch host, with the job's agent forwarded when asked."""
    if host not in (task_vars.get("hostvars") or {}):
        raise RemoteLaunchError(f"flodl_launch_host {host!r} is not an inventory host; add it (and how to reach it)")
    ssh = dict(ssh_block_of(action, task_vars, host))
    if as_bool(var(task_vars, action._templar, "flodl_launch_forward_agent", False)):
        # The launcher there reaches the workers with the job's own key (AWX machine credential, ssh-agent).
        ssh["options"] = [*ssh.get("options", []), "ForwardAgent=yes"]
    return ssh


def launch_host_probe(action: Any, task_vars: Mapping[str, Any], ctx: RunContext) -> tuple[str, list[str]] | None:
    """(launch host, argv) checking from the launch host that the launcher can reach every worker."""
    host = launch_host_of(task_vars, action._templar)
    if host is None:
        return None
    ssh = launch_ssh(action, task_vars, host)
    argvs = {
        str(w["host"]): launcher_argv(w, "true", project_root=ctx.project_dir, connect_timeout=ctx.connect_timeout)
        for w in ctx.remotes
        if ctx.inventory_names.get(str(w["host"])) != host and str(w["host"]) != host
    }
    return host, probe_argv({"host": host, "ssh": ssh}, reach_script(argvs))
