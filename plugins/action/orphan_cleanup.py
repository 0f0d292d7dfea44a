# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stop leftover rank processes of the prebuilt binary on the play's remote workers."""
from __future__ import annotations

import json
import os

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.flodl.cluster.plugins.module_utils import teardown as td
from ansible_collections.flodl.cluster.plugins.module_utils.identity import controller_user
from ansible_collections.flodl.cluster.plugins.module_utils.phase_result import entry
from ansible_collections.flodl.cluster.plugins.module_utils.ssh import launcher_argv
from ansible_collections.flodl.cluster.plugins.module_utils.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.plugin_utils import launch_io
from ansible_collections.flodl.cluster.plugins.plugin_utils.context import fail_result, read_run, var
from ansible_collections.flodl.cluster.plugins.plugin_utils.detached_io import stop_detached
from ansible_collections.flodl.cluster.plugins.plugin_utils.processes import run_for_output, run_parallel

display = Display()


class ActionModule(ActionBase):
    """Parallel ssh with the launcher's own argv; idempotent: nothing found means ``ok``."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        _spec, args = self.validate_argument_spec(argument_spec={
            "prebuild_envelope": {"type": "raw"}, "timeout": {"type": "float", "default": 30.0},
            "stop_launcher": {"type": "bool", "default": True},
        })
        try:
            ctx = read_run(self, task_vars, ["teardown"])
        except TopologyError as exc:
            return fail_result(result, exc.problems)
        text, source = launch_io.read_envelope(
            ctx, args["prebuild_envelope"], var(task_vars, self._templar, launch_io.PREBUILD_RESULT_VAR))
        envelope = json.loads(text) if text else ({} if source else None)
        per_host, targets = {}, {}
        for worker in ctx.cluster["workers"]:
            name = ctx.inventory_names.get(worker["host"], worker["host"])
            if not ctx.in_play(worker):
                continue
            abs_bin = None if worker["host"] == ctx.controller_identity else td.binary_of(worker, envelope, ctx.cmd)
            if abs_bin is None:
                per_host[name] = entry("skipped", "no prebuilt binary known on this host: nothing to stop")
            else:
                targets[worker["host"]] = (worker, abs_bin)
        if self._task.check_mode:
            per_host.update({ctx.inventory_names[h]: entry("ok", f"would stop processes of {b}", bin=b)
                             for h, (_w, b) in targets.items()})
            result.update(changed=False, per_host=per_host, envelope_source=source)
            return result
        stopped = stop_detached(self, task_vars, ctx.project_dir) if args["stop_launcher"] else None
        if stopped:
            display.display(f"flodl teardown: {stopped}")
        user = controller_user(os.environ, run_for_output)
        jobs = {h: launcher_argv(w, td.cleanup_script(b), host_user=user, project_root=ctx.project_root)
                for h, (w, b) in targets.items()}
        warnings = []
        for host, res in run_parallel(jobs, timeout=float(args["timeout"])).items():
            why = res.error or f"ssh exited {res.returncode}: {res.stderr.strip()[-300:]}"
            outcome, warning = td.judge(host, targets[host][1], td.CleanupAnswer(res.ok, res.stdout, why))
            per_host[ctx.inventory_names[host]] = outcome
            warnings += [warning] if warning else []
        lines = [f"{name}: {e['status']} — {e['msg']}" for name, e in per_host.items()]
        display.display("flodl teardown:\n  " + "\n  ".join(lines or ["no worker in this play"]))
        for warning in warnings:
            display.warning(warning)
        result.update(changed=any(e["status"] == "changed" for e in per_host.values()), per_host=per_host,
                      envelope_source=source, summary=lines, launcher=stopped,
                      msg=f"orphan cleanup ran on {len(jobs)} host(s), {len(warnings)} warning(s)")
        return result
