# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validate the run and derive the arguments of flodl.cluster.cargo_prebuild, on the controller."""
from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.flodl.cluster.plugins.module_utils.prebuild import PrebuildError, plan_prebuild
from ansible_collections.flodl.cluster.plugins.module_utils.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.plugin_utils.context import build_context, fail_result, plain


class ActionModule(ActionBase):
    """Thin wrapper: rules live in plugin_utils.context and module_utils.prebuild."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        self.validate_argument_spec(argument_spec={})
        task_vars = task_vars or {}
        try:
            ctx = build_context(task_vars, self._templar, ["prebuild"])
        except TopologyError as exc:
            return fail_result(result, exc.problems)

        dedupe_raw = task_vars.get("flodl_prebuild_dedupe", True)
        dedupe = self._templar.template(dedupe_raw) if self._templar is not None else dedupe_raw
        dedupe = plain(dedupe)
        if isinstance(dedupe, str):
            lowered = dedupe.strip().lower()
            if lowered not in ("true", "false", "yes", "no", "1", "0", "on", "off"):
                result.update(failed=True, msg=f"controller: flodl_prebuild_dedupe must be a boolean, got {dedupe!r}")
                return result
            dedupe = lowered in ("true", "yes", "1", "on")
        elif not isinstance(dedupe, bool):
            result.update(failed=True, msg=f"controller: flodl_prebuild_dedupe must be a boolean, got {dedupe!r}")
            return result

        base = {
            "changed": False,
            "enabled": ctx.prebuild,
            "build_host": ctx.build_host,
            "controller_identity": ctx.controller_identity,
        }
        if not ctx.prebuild:
            result.update(base, workers=[], skipped_hosts=[w["host"] for w in ctx.cluster["workers"]], groups=[])
            return result

        remotes = ctx.remotes
        workers = []
        for worker in remotes:
            entry = {"host": str(worker["host"]), "path": str(worker["path"])}
            if worker.get("arch"):
                entry["arch"] = str(worker["arch"])
            workers.append(entry)
        docker_service = ctx.cluster["controller"].get("docker") or None
        try:
            plan = plan_prebuild(
                ctx.project_root,
                str(ctx.cmd),
                workers,
                cmd_dir=ctx.cmd_dir,
                docker_service=docker_service,
                dedupe=dedupe,
            )
        except PrebuildError as exc:
            result.update(failed=True, msg=f"flodl prebuild: {exc}")
            return result

        remote_names = {w["host"] for w in workers}
        result.update(
            base,
            skipped_hosts=[w["host"] for w in ctx.cluster["workers"] if w["host"] not in remote_names],
            project_root=ctx.project_root,
            cmd=str(ctx.cmd),
            cmd_dir=ctx.cmd_dir,
            docker_service=docker_service,
            dedupe=dedupe,
            workers=workers,
            mode=plan.mode,
            groups=plan.groups(),
        )
        return result
