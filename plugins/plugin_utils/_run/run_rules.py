# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run's variables by scope, and the rules that apply to a run beyond the cluster validator.

Per phase: the roles' argument specs (Ansible's validator, each worker's variables on that worker),
the phases' knobs, the gang check, rank environments that exec would refuse, the directories a run
writes. Each returns :class:`Problem` values; plugin_utils._run.run_reader collects them.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ansible_collections.flodl.cluster.plugins.module_utils._core.constants import WORKERS_GROUP
from ansible_collections.flodl.cluster.plugins.module_utils._run import argspec, knobs
from ansible_collections.flodl.cluster.plugins.module_utils._run.action_specs import PHASES
from ansible_collections.flodl.cluster.plugins.module_utils._run.ansible_flags import worker_become_problem
from ansible_collections.flodl.cluster.plugins.module_utils._run.prebuild_layout import target_subdir
from ansible_collections.flodl.cluster.plugins.module_utils._core.problems import Problem, run_level, worded
from ansible_collections.flodl.cluster.plugins.module_utils._files.project_dirs import write_dir_problems
from ansible_collections.flodl.cluster.plugins.module_utils._core.safety import default_arg_max, env_size_problems
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.task_vars import as_bool, var

# The role whose meta/argument_specs.yml covers a phase's variables (teardown has no role).
PHASE_ROLES = {"preflight": "preflight", "prebuild": "prebuild", "launch": "launch"}
_ROLES_DIR = Path(__file__).resolve().parents[3] / "roles"

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
# Every other run-level variable the reader reads (with CLUSTER_VARS: what a run model's fingerprint covers).
RUN_VARS = (
    "flodl_net_timeout_scale", "flodl_prebuild", "flodl_cmd", "flodl_cmd_dir", "flodl_run_lock", "flodl_project_dir",
    "flodl_build_host", "flodl_fdl_env", "flodl_launch_command", "flodl_cmd_run", *knobs.NAMES,
    # Read into RunSettings (plugin_utils._run.run_settings) beyond the knobs.
    "flodl_prebuild_env", "flodl_testing_cluster", "flodl_launch_container_root", "flodl_launch_docker",
    "flodl_launch_host", "flodl_ssh_reuse", "flodl_run_id", "flodl_launch",
)
# Phases that need every worker at once; preflight and teardown honour --limit.
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
GANG_PHASES = frozenset({"prebuild", "launch"})
# Run-level variables whose own check already refuses a NUL (with its place in the value).
_CHECKED_VARS = ("flodl_cmd", "flodl_cmd_dir", "flodl_project_dir", "flodl_net_timeout_scale")


@functools.lru_cache(maxsize=None)
def role_options(role: str) -> dict[str, Any]:
    """The options of a role's ``main`` entry point, as shipped in this collection."""
    path = _ROLES_DIR / role / "meta" / "argument_specs.yml"
    with open(path, encoding="utf-8") as handle:
        # libyaml's safe loader where PyYAML has it: the same data, a tenth of the time (40 ms for the three specs).
        loaded = yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return dict(loaded["argument_specs"]["main"]["options"])


def phase_options(phases: list[str]) -> dict[str, dict[str, Any]]:
    """The union of the argument specs of the roles that run ``phases`` (what cluster_train validates)."""
    return argspec.union_options(role_options(PHASE_ROLES[p]) for p in PHASES if p in phases and p in PHASE_ROLES)


def argspec_problems(
    task_vars: Mapping[str, Any],
    templar: Any,
    phases: list[str],
    workers: list[tuple[str, dict[str, Any]]],
    ours: list[Problem],
) -> list[Problem]:
    """The roles' argument specs over the run, beyond what ``ours`` (the run's own rules) already found.

    The run's own variables are checked once, each worker's variables on that worker (in inventory
    order: the worker's index in the cluster).
    """
    options = phase_options(phases)
    run_params = {name: var(task_vars, templar, name) for name in options if name not in WORKER_VARS and name in task_vars}
    run_found, host_found = argspec.run_problems(options, run_params, workers, WORKER_VARS)
    found = argspec.uncovered(run_found, None, ours, "controller")
    for index, (name, _values) in enumerate(workers):
        if name in host_found:
            found += argspec.uncovered(host_found[name], index, ours, f"host {name}")
    return found


def knob_problems(task_vars: Mapping[str, Any], templar: Any, phases: list[str], prebuild: bool) -> list[Problem]:
    """The later phases' own knobs, checked with the run (before contact) instead of when their role starts."""
    values = {name: var(task_vars, templar, name) for name in knobs.NAMES}
    # The other run-level options of the phases' roles (the cluster's and workers' own go through the validator).
    others = {name: var(task_vars, templar, name) for name in phase_options(phases)
              if name in task_vars and name not in (*WORKER_VARS, *CLUSTER_VARS, *knobs.NAMES, *_CHECKED_VARS)}
    return knobs.knob_findings(values, phases, prebuild) + knobs.nul_findings(others)


def gang_problems(phases: list[str], workers: list[str], play_hosts: list[str]) -> list[Problem]:
    """prebuild and launch need the whole cluster: a --limit, AWX limit or job slice must not cut it."""
    gang = sorted(GANG_PHASES.intersection(phases))
    missing = [w for w in workers if w not in play_hosts]
    if not gang or not missing:
        return []
    return run_level([
        f"cluster: this play runs on {len(workers) - len(missing)} of {len(workers)} workers; missing "
        f"{', '.join(missing)} (cut by --limit, an AWX limit or a job slice). {' and '.join(gang)} "
        "start(s) every rank of one training run together, so a partial cluster cannot run: drop the limit "
        "(and job slicing) for this playbook; preflight and teardown accept a limit"
    ])


def write_dir_findings(checkout: Any, phases: list[str], cluster: Mapping[str, Any], identity: str,
                       prebuild: bool) -> list[Problem]:
    """Links out of the project where the run lock, logs and build dirs go (the checkout is their root)."""
    if not {"prebuild", "launch"} & set(phases):
        return []
    if not isinstance(checkout, str) or not checkout.startswith("/"):
        return []  # the validator reports the path itself
    builds = prebuild and "prebuild" in phases
    rels = [target_subdir(str(w["host"]), w["arch"]) for w in cluster["workers"]
            if builds and w.get("host") != identity and isinstance(w.get("arch"), str) and w["arch"]]
    return run_level(write_dir_problems(checkout, rels))


def env_problems(cluster: Mapping[str, Any]) -> list[Problem]:
    """Rank environments that exec would refuse (E2BIG), found now instead of after every build.

    The launch environment itself (the topology's variables) is measured on its rendered bytes by
    plugin_utils._launch.launch_precheck, in a play that launches.
    """
    arg_max = default_arg_max()
    problems = run_level(env_size_problems(_str_env(cluster.get("env")), "cluster: flodl_cluster_env",
                                           arg_max=arg_max), "flodl_cluster_env")
    for index, worker in enumerate(cluster.get("workers") or []):
        problems += [worded(p, index, "flodl_env") for p in env_size_problems(
            _str_env(worker.get("env")), f"host {worker.get('host')}: flodl_env", arg_max=arg_max)]
    return problems


def _str_env(env: Any) -> dict[str, str]:
    """The string entries of an env map (the validator reports the rest)."""
    if not isinstance(env, Mapping):
        return {}
    return {k: v for k, v in env.items() if isinstance(k, str) and isinstance(v, str)}


def local_name_problem(name: str, index: int, raw: Mapping[str, Any], templar: Any) -> Problem | None:
    """A worker named ``localhost`` (or a loopback address) that is not this machine: refused.

    Ansible and this collection take that name for the controller: the default build host
    (``flodl_build_host`` unset is ``localhost``) and anything delegated there would reach the worker instead.
    A worker on the ``local`` connection is this machine, so the name holds.
    """
    if name not in LOCAL_HOSTS or str(var(raw, templar, "ansible_connection", "") or "") == "local":
        return None
    address = var(raw, templar, "ansible_host")
    reached = f"reached over ssh at {address}" if address else "reached over ssh"
    return worded(
        f"host {name} (worker {index}): the inventory name {name!r} is Ansible's name for this machine (the "
        f"controller), but this worker is {reached}: the prebuild's default build host (flodl_build_host unset "
        f"means localhost) and anything delegated to localhost would run on this worker instead of here; rename "
        "the inventory host (e.g. gpu-2, keeping ansible_host for its address), or, if it is this machine, make it "
        "the controller's own worker on ansible_connection: local", index, "inventory_hostname")


# (become, become_user, become_method) as Ansible applies them to a host; None where unset.
Become = tuple[Any, Any, Any]


def become_findings(task_vars: Mapping[str, Any], templar: Any, play: Become | None,
                    first: tuple[str, Become] | None = None) -> list[Problem]:
    """Each worker on which Ansible would become, as its own problem: no step nor the launcher honours it there.

    A worker's own ``ansible_become`` (templated) wins over ``play`` (the play's keyword or ``--become``, None
    when the play does not run on the workers), as Ansible's precedence has it. ``first``: the step's own
    host and its resolved become (the play context), which is exact for that host.
    """
    hostvars = task_vars.get("hostvars") or {}
    play_become, play_user, play_method = play or (None, None, None)
    found: list[Problem] = []
    for index, name in enumerate((task_vars.get("groups") or {}).get(WORKERS_GROUP, [])):
        raw = hostvars.get(name) or {}
        own_become, own_user, own_method = (var(raw, templar, f"ansible_become{suffix}")
                                            for suffix in ("", "_user", "_method"))
        own_var = "ansible_become" in raw
        if first is not None and first[0] == name:
            become, user, method = first[1]
        else:
            become = own_become if own_var else play_become
            user, method = own_user or play_user, own_method or play_method
        # Unset or blank is off; anything but a clear false (Ansible's rules) counts as on.
        if become is None or become == "" or as_bool(become) is False:
            continue
        found.append(worker_become_problem(str(name), index, user, method, own_var))
    return found
