# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Before any host is contacted: would the launch environment this run renders fit what exec accepts?

The launch environment is rendered here with the launch step's own function, from what is known before
contact, and measured with module_utils._launch.launch_size. Three things are only known later, and stand in as
follows (docs/launch.md, "The environment limit"):

- a ``local_devices: all`` worker counts one rank (its GPUs are counted by the probe): a lower bound;
- names are not looked up (the launch step does that): ``controller.host`` counts as written and
  ``FLODL_INTERNAL_CLUSTER_EXTRA_HOSTS`` as empty;
- the prebuild envelope is the one the build plan will produce, and the ssh socket directory a stand-in
  of the same length as the one the probe makes.

With explicit device lists and an IP literal as ``controller.host`` the topology variables are measured
exactly; either way the launch step measures the final bytes again, right before executing, with the
same message.
"""
from __future__ import annotations

import json
import os
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._launch import launch_command as lc
from ansible_collections.flodl.cluster.plugins.module_utils._launch import launch_env as le
from ansible_collections.flodl.cluster.plugins.module_utils._launch import launch_size
from ansible_collections.flodl.cluster.plugins.module_utils._walk_in import walk_in as wi
from ansible_collections.flodl.cluster.plugins.module_utils._run.identity import controller_user
from ansible_collections.flodl.cluster.plugins.module_utils._run.prebuild import PrebuildError, plan_prebuild
from ansible_collections.flodl.cluster.plugins.module_utils._run.prebuild_layout import envelope_json
from ansible_collections.flodl.cluster.plugins.module_utils._core.safety import default_arg_max
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.variants import GpuCounts, variant_vendor
from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import launch_io
from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import sshreuse_io
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.processes import effective_user
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import RunContext
from ansible_collections.flodl.cluster.plugins.plugin_utils._host.launch_target import launch_docker, launch_host_of


def one_rank_each(ctx: RunContext) -> dict[str, GpuCounts]:
    """GPU counts giving every ``all`` worker one rank of its variant's vendor."""
    return {w.host: GpuCounts.one_rank(variant_vendor(w.arch or "")) for w in ctx.cluster.workers if w.all_devices}


def _no_lookup(name: str) -> list[str]:
    raise OSError(f"{name} is looked up by the launch step")


def planned_envelope(ctx: RunContext) -> str | None:
    """``FLODL_INTERNAL_PREBUILD_PER_HOST`` as the build plan will produce it (None without prebuild)."""
    if not ctx.prebuild or not ctx.cmd:
        return None
    try:
        workers = [{"host": w.host, "path": w.path, "arch": w.arch} for w in ctx.remotes]  # the module's shape
        plan = plan_prebuild(ctx.project_root, ctx.cmd, workers, cmd_dir=ctx.cmd_dir, project_dir=ctx.project_dir)
    except PrebuildError:
        return None  # the prebuild phase reports it
    envelope = plan.envelope()
    return envelope_json(envelope) if envelope else None


def size_problems(action: Any, task_vars: Any, ctx: RunContext, phases: list[str]) -> list[str]:
    """Each variable (or the whole environment) the launch would be refused for, as text; [] when it fits."""
    if "launch" not in phases or le.recursion_guard(os.environ) is not None:
        return []
    templar = action._templar
    try:
        docker_service = launch_docker(None, ctx)
    except TopologyError:
        return []  # the launch phase reports it
    remote = launch_host_of(ctx, task_vars, templar)
    reuse = remote is None and sshreuse_io.reuse_wanted(action, task_vars, ctx, phases)
    testing = ctx.settings.testing_cluster
    given_root = ctx.settings.launch_container_root
    container_root = lc.CONTAINER_ROOT if given_root is None else given_root
    inputs = launch_io.launch_inputs(
        ctx, gpu_counts=one_rank_each(ctx), host_user=controller_user(os.environ, effective_user),
        docker_service=docker_service, container_root=container_root, envelope_text=planned_envelope(ctx),
        testing=testing, guarded=False, ssh_reuse_dir=sshreuse_io.expected_dir() if reuse else None,
        local_counts=(1, 0))
    envelope = json.loads(inputs.prebuild_envelope_json) if inputs.prebuild_envelope_json else {}

    def to_walk_in(plan):  # what a walk-in launcher gets (module_utils._walk_in.walk_in): its own size, not the roster's
        plan.env = wi.plan(plan.env, plan.topology or {}, envelope, ctx.inventory_names, 0.0)[0]
    try:
        _plan, fitted = launch_size.render_checked(inputs, _no_lookup, inherited=os.environ, arg_max=default_arg_max(),
                                                   then=to_walk_in if ctx.settings.walks_in(phases) else None)
    except (TopologyError, ValueError):
        return []  # an incomplete topology is the launch phase's to report
    return [p.text() for p in fitted.problems]
