# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight for a flodl cluster: validate, then probe every worker of the play once, in parallel."""
from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.flodl.cluster.plugins.module_utils._run.action_specs import PREFLIGHT_CHECK, without_blanks
from ansible_collections.flodl.cluster.plugins.module_utils._run import job_artifacts
from ansible_collections.flodl.cluster.plugins.module_utils._preflight import preflight_report as pf_report
from ansible_collections.flodl.cluster.plugins.module_utils._core.phase_result import REFUSED, preflight_entries, run_failed_entries
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.plugin_utils._preflight import preflight_sweep as sweep
from ansible_collections.flodl.cluster.plugins.plugin_utils._run import run_handoff
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.parent_watch import exit_with_parent
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import read_run
from ansible_collections.flodl.cluster.plugins.plugin_utils._run import vault_values
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.run_refusal import refuse
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.task_vars import INVALID_CONFIG

display = vault_values.RedactingDisplay(Display())


class ActionModule(ActionBase):
    """Runs once for the play; each worker then reports its own entry (flodl.cluster.worker_result)."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _requires_connection = False

    @vault_values.withholding()
    def run(self, tmp=None, task_vars=None):
        result = self._check(tmp, task_vars)
        if not result.get("failed"):  # the job artifact, without a set_stats task (module_utils._run.job_artifacts)
            result["ansible_stats"] = job_artifacts.preflight(result)
        return result

    def _check(self, tmp, task_vars):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        self._task.args = without_blanks(self._task.args, PREFLIGHT_CHECK)  # a blank survey answer: the default
        _spec, args = self.validate_argument_spec(**PREFLIGHT_CHECK)
        phases = sorted(set(args["phases"]) | {"preflight"})
        try:
            ctx = read_run(self, task_vars, phases)
        except TopologyError as exc:
            return self._refused(result, task_vars, exc.problems, exc.per_host or {})
        follow = None
        if "launch" in phases:
            # Only a run with a launch imports the launch side: ansible-playbook compiles whatever a step imports.
            from ansible_collections.flodl.cluster.plugins.plugin_utils._launch.preflight_launch import LaunchFollows

            # The launch environment this run renders, measured before any host (or build) is touched; the
            # run lock: one run of a project at a time, until ansible-playbook exits.
            follow = LaunchFollows(self, task_vars, ctx, phases)
            problems, headline = follow.refusals()
            if problems:
                why = REFUSED if headline == INVALID_CONFIG else headline
                return self._refused(result, task_vars, problems, {}, why)

        # ansible-playbook killed outright: this worker and its probes end with it (plugin_utils._proc.parent_watch).
        with exit_with_parent():
            build_arch, build_argv = sweep.build_host_arch(self, task_vars, ctx, args["build_arch"])
            problems = follow.start() if follow is not None else []
            if problems:
                return self._refused(result, task_vars, problems, {}, "the launch host's session did not start")
            # The knobs as the run read and checked them (module_utils._run.knobs), not options the role passes.
            found = sweep.sweep(ctx, build_arch=build_arch, build_host_argv=build_argv,
                                timeout=ctx.settings.probe_timeout(), max_parallel=ctx.settings.probe_parallel(),
                                follow=follow, require_all=ctx.settings.preflight_require_all)
        controller = found["controller"]
        data, lines = pf_report.run_report(
            controller, found["hosts"], found["warnings"], build_arch=found["build_arch"],
            check=bool(self._task.check_mode), prebuild=ctx.prebuild,
            controller_identity=(follow.controller_identity() if follow is not None else None) or ctx.controller_identity,
            build_host=ctx.build_host, verbose=display.verbosity >= 1)
        for warning in data["warnings"]:
            display.warning(warning)
        display.display("\n".join(lines))
        if follow is not None:  # the launch host's answers, the masters kept for the launcher
            data.update(follow.result_fields(failed="failure" in data))
        # The model travels to the later phases in this result; a failed preflight has none to serve.
        handoff = "failure" not in data and not controller.get("errors")
        per_host = preflight_entries(found["hosts"], ctx.inventory_names)
        result.update(data, changed=False, per_host=per_host, **run_handoff.fields(ctx, with_model=handoff))
        if controller.get("errors"):
            # The controller is not an inventory worker: its own problems fail the run as a whole, so every
            # worker's report fails with them (the step passes: it ran on one worker, which is not to blame).
            msg = pf_report.failure_message([controller], data["warnings"])
            result.update(refused=True, msg=msg, _ansible_verbose_always=True, per_host=run_failed_entries(
                per_host, "the controller failed preflight, so the run stops: " + "; ".join(controller["errors"])))
        else:
            result["msg"] = f"flodl preflight: {len(found['hosts'])} worker(s), {len(data['failed_hosts'])} failed"
        return result

    def _refused(self, result, task_vars, problems: list[str], per_worker: dict[str, list[str]],
                 why: str = REFUSED):
        """The run refused before contact: each worker reports its own problems, and those of the run itself
        (plugin_utils._run.run_refusal); the step passes, unless the play has no worker to report them."""
        # Not "flodl preflight ...": that heads the report of a sweep, and none ran.
        display.display(f"flodl run: {why}\n" + "\n".join(f"  {p}" for p in problems))
        result = refuse(result, task_vars, problems, per_worker, why)
        if not result.get("failed"):
            result.update(ok=False, msg=f"flodl preflight: {why}: {len(problems)} problem(s)")
        return result
