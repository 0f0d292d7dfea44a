# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prepare the environment flodl's launcher reads, on the controller, once for the play."""
from __future__ import annotations

import json
import os

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.variants import GpuCounts
from ansible_collections.flodl.cluster.plugins.module_utils._run.action_specs import LAUNCH_ENV, without_blanks
from ansible_collections.flodl.cluster.plugins.module_utils._launch import compose_overlay as co
from ansible_collections.flodl.cluster.plugins.module_utils._launch import launch_env as le
from ansible_collections.flodl.cluster.plugins.module_utils._cluster import name_resolution as nr
from ansible_collections.flodl.cluster.plugins.module_utils._walk_in import walk_in as wi
from ansible_collections.flodl.cluster.plugins.module_utils._launch.launch_size import render_checked
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.lookups import start_lookups
from ansible_collections.flodl.cluster.plugins.module_utils._run.identity import controller_user
from ansible_collections.flodl.cluster.plugins.module_utils._launch.launch_text import plan_fields
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_launch import RemoteLaunchError
from ansible_collections.flodl.cluster.plugins.module_utils._core.phase_result import REFUSED
from ansible_collections.flodl.cluster.plugins.module_utils._core.safety import default_arg_max
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import launch_io
from ansible_collections.flodl.cluster.plugins.plugin_utils._run import run_handoff
from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import sshreuse_io
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import INVALID_CONFIG, is_local_host, read_run
from ansible_collections.flodl.cluster.plugins.plugin_utils._host.launch_host import launch_host_facts
from ansible_collections.flodl.cluster.plugins.plugin_utils._host.launch_target import launch_docker, launch_ssh
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.processes import effective_user
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.run_refusal import carried, refuse, refused_earlier
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.task_vars import registered
from ansible_collections.flodl.cluster.plugins.plugin_utils._run import vault_values

display = vault_values.RedactingDisplay(Display())
# What run_launcher runs from this result (module_utils._launch.prepared_launch): registered whole, so the launcher gets
# the real values; when one holds a vaulted value the result is no_log (plugin_utils._run.vault_values.withheld).
PREPARED = ("command", "cwd", "env", "log_dir", "ssh_control_dir")


class _Refused(Exception):
    """The run cannot be launched: every worker's report fails with these problems (plugin_utils._run.run_refusal)."""

    def __init__(self, problems: list[str], why: str = INVALID_CONFIG, per_worker: dict | None = None):
        super().__init__(why)
        self.problems, self.per_worker = list(problems), per_worker or {}
        self.why = REFUSED if why == INVALID_CONFIG else why


class ActionModule(ActionBase):
    """Validation first; the only host traffic is a GPU count for ``all`` workers preflight did not count.

    A refusal passes this run-once step with every worker's entry failed; an earlier step's refusal is carried on.
    """

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _requires_connection = False

    @vault_values.withholding(keep=PREPARED)
    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        self._task.args = without_blanks(self._task.args, LAUNCH_ENV)
        _spec, args = self.validate_argument_spec(**LAUNCH_ENV)
        earlier = refused_earlier(task_vars, "flodl_launch_env")
        if earlier is not None:  # the launch playbook's validation refused the run (its lock, say): nothing starts
            return carried(result, earlier)
        preflight = args["preflight"] or registered(task_vars, launch_io.PREFLIGHT_RESULT_VAR)
        guard = le.recursion_guard(os.environ)
        reuse_dir = None
        try:
            try:
                ctx = read_run(self, task_vars, ["launch"])
            except TopologyError as exc:
                reuse_dir = sshreuse_io.left_by(preflight)  # nothing is launched: closed below
                raise _Refused(exc.problems, per_worker=exc.per_host) from None
            # The masters the preflight probe left for this run's fan-out (none with flodl_ssh_reuse=false).
            reuse_dir = sshreuse_io.masters_for_launch(self, ctx, preflight, guard is not None)
            return self._prepare(result, task_vars, args, preflight, guard, reuse_dir, ctx)
        except _Refused as exc:
            sshreuse_io.close_masters(reuse_dir)  # nothing is launched: nothing will ride them
            return refuse(result, task_vars, exc.problems, exc.per_worker, exc.why)

    def _prepare(self, result, task_vars, args, preflight, guard, reuse_dir, ctx):
        try:
            docker_service = launch_docker(args["launch_docker"], ctx)
        except TopologyError as exc:
            raise _Refused(exc.problems, per_worker=exc.per_host) from None
        # Every name at once, one bounded wait (lookups.LOOKUP_BUDGET_SECONDS), started now: the lookups run
        # beside the reads below, and no name costs a DNS timeout.
        lookups = start_lookups(ctx.cluster.hosts, nr.system_resolver) if guard is None else None
        check = bool(self._task.check_mode)
        log_dir, unsafe = launch_io.log_dir_of(ctx, args["log_dir"])
        if unsafe:
            raise _Refused(unsafe, "the launch log directory is unsafe; nothing was started")
        testing = args["testing_cluster"]
        if testing is None:
            testing = ctx.settings.testing_cluster
        counts: dict[str, GpuCounts] = {}
        envelope_text = envelope_source = None
        if guard is None:
            try:
                counts, swept = launch_io.gpu_counts(ctx, preflight)
            except TopologyError as exc:
                raise _Refused(exc.problems, "could not count the GPUs of `local_devices: all` workers")
            if swept:
                display.display("flodl launch: counted GPUs over ssh (no preflight result in this play)")
            envelope_text, envelope_source = launch_io.read_envelope(
                ctx, args["prebuild_envelope"], registered(task_vars, launch_io.PREBUILD_RESULT_VAR))
        remote = None if is_local_host(args["launch_host"], task_vars, self._templar) else args["launch_host"]
        host_user = controller_user(os.environ, effective_user)
        if remote is not None:
            try:
                host_user = launch_ssh(self, task_vars, remote, ctx.settings.launch_forward_agent).get("user") or host_user
            except RemoteLaunchError as exc:
                raise _Refused([f"controller: {exc}"])
        facts = launch_host_facts(preflight, remote)
        inputs = launch_io.launch_inputs(
            ctx, gpu_counts=counts, host_user=host_user, docker_service=docker_service,
            container_root=args["container_root"], envelope_text=envelope_text, testing=bool(testing),
            guarded=guard is not None, ssh_reuse_dir=None if remote else reuse_dir,
            ansible_verbosity=display.verbosity, local_counts=facts[1] if remote else None)
        if remote:
            inputs.hostname = facts[0]  # the launch host's identity, from its preflight session
        walk_in_box: dict = {}

        def to_walk_in(plan):
            plan.env, plan.topology, walk_in_box["plan"], walk_in_box["problems"] = wi.plan(
                plan.env, plan.topology or {}, json.loads(envelope_text) if envelope_text else {},
                ctx.inventory_names, float(args["launch_timeout"]))

        to_walk_in = to_walk_in if args["launch_mode"] == "walk_in" else None
        try:
            # One render, measured: the env registered for the launch command is the one checked here.
            resolver = lookups.resolver() if lookups is not None else nr.system_resolver
            plan, fitted = render_checked(inputs, resolver, inherited=os.environ, arg_max=default_arg_max(),
                                          then=to_walk_in)
        except TopologyError as exc:
            raise _Refused(exc.problems, "the launch topology is incomplete; nothing was started")
        if fitted.problems:
            raise _Refused([p.text() for p in fitted.problems],
                           "the launch environment would not fit; nothing was started")
        refused = co.remote_compose_problem(remote, plan.command)
        if refused:
            raise _Refused([refused])
        walk_in = walk_in_box.get("plan")
        if walk_in_box.get("problems"):
            raise _Refused(walk_in_box["problems"], "no walk-in agent can start; nothing was started")
        warnings = list(plan.warnings)
        changed = launch_io.apply_overlay(plan, ctx.project_dir, check, warnings)
        fields = plan_fields(plan, envelope_text=envelope_text, envelope_source=envelope_source, log_dir=log_dir,
                             check=check, guard=guard, inventory_names=ctx.inventory_names,
                             verbose=display.verbosity >= 1)
        if walk_in is not None:
            fields["plan"] = [*fields["plan"], *wi.plan_lines(walk_in)]
        if args["show_plan"]:
            display.display("\n".join(fields["plan"]))
        for warning in warnings:
            display.warning(warning)
        result.update(fields, changed=bool(changed), controller_identity=ctx.controller_identity,
                      launch_warnings=warnings, ssh_control_dir=reuse_dir,
                      gpu_counts={h: c.as_dict() for h, c in counts.items()},
                      launch_mode=args["launch_mode"], walk_in=walk_in, project_dir=ctx.project_dir,
                      forward_agent=ctx.settings.launch_forward_agent,
                      **run_handoff.fields(ctx))
        if ctx.vaulted:  # for run_launcher, which withholds them from the launch's output and log
            result[vault_values.CIPHERTEXTS_KEY] = vault_values.ciphertexts()
        return result
