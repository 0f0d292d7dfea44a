# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stop leftover rank processes of the prebuilt binary on the play's remote workers."""
from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.flodl.cluster.plugins.module_utils._run.action_specs import ORPHAN_CLEANUP
from ansible_collections.flodl.cluster.plugins.module_utils._core.phase_result import entry
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import launch_io, orphans
from ansible_collections.flodl.cluster.plugins.plugin_utils._run import run_handoff
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import fail_result, read_run
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.task_vars import registered
from ansible_collections.flodl.cluster.plugins.plugin_utils._launch.detached_io import stop_detached
from ansible_collections.flodl.cluster.plugins.plugin_utils._run import vault_values

display = vault_values.RedactingDisplay(Display())


class ActionModule(ActionBase):
    """Parallel ssh with the launcher's own argv; idempotent: nothing found means ``ok``."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _requires_connection = False

    @vault_values.withholding()
    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        _spec, args = self.validate_argument_spec(**ORPHAN_CLEANUP)
        try:
            ctx = read_run(self, task_vars, ["teardown"])
        except TopologyError as exc:
            return fail_result(result, exc.problems)
        result.update(run_handoff.fields(ctx, with_model=False))
        per_host, targets, source = orphans.targets_of(
            ctx, args["prebuild_envelope"], registered(task_vars, launch_io.PREBUILD_RESULT_VAR))
        if self._task.check_mode:
            per_host.update({ctx.inventory_names[h]: entry("ok", f"would stop processes of {b}", bin=b)
                             for h, (_w, b) in targets.items()})
            result.update(changed=False, per_host=per_host, envelope_source=source)
            return result
        notes, records = ([], [])
        if args["stop_launcher"]:
            notes, records = stop_detached(self, task_vars, ctx.project_dir,
                                           forward_agent=ctx.settings.launch_forward_agent)
        for note in notes:
            display.display(f"flodl teardown: {note}")
        for problem in records:
            display.warning(f"flodl teardown: run record refused, nothing of it was signalled: {problem}")
        stopped, warnings = orphans.stop_orphans(ctx, targets, float(args["timeout"]))
        per_host.update(stopped)
        jobs = targets
        lines = [f"{name}: {e['status']} — {e['msg']}" for name, e in per_host.items()]
        display.display("flodl teardown:\n  " + "\n  ".join(lines or ["no worker in this play"]))
        for warning in warnings:
            display.warning(warning)
        result.update(changed=any(e["status"] == "changed" for e in per_host.values()), per_host=per_host,
                      envelope_source=source, summary=lines, launcher="; ".join(notes) or None,
                      record_problems=records,
                      msg=f"orphan cleanup ran on {len(jobs)} host(s), {len(warnings)} warning(s)"
                      + (f", {len(records)} run record(s) refused" if records else ""))
        return result
