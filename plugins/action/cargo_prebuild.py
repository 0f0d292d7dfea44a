# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of flodl.cluster.cargo_prebuild: read the run once, then build on the build host.

The task is delegated to the build host, so the module runs there over
Ansible's own connection; this plugin only gathers its arguments from the
run model (no Jinja in between) and files each worker's build.
"""
from __future__ import annotations

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.flodl.cluster.plugins.module_utils._run import job_artifacts
from ansible_collections.flodl.cluster.plugins.module_utils._prebuild.build_runner import ARGUMENT_SPEC, DEFAULT_BUILD_TIMEOUT, build
from ansible_collections.flodl.cluster.plugins.module_utils._core.fold import folded_summary
from ansible_collections.flodl.cluster.plugins.module_utils._core.phase_result import entry, prebuild_entries, run_failed_entries
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.plugin_utils._run import run_handoff
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import read_run
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.run_refusal import refuse
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.parent_watch import exit_with_parent
from ansible_collections.flodl.cluster.plugins.plugin_utils._run import vault_values

MODULE = "flodl.cluster.cargo_prebuild"

display = vault_values.RedactingDisplay(Display())


class ActionModule(ActionBase):
    """Explicit module arguments win over the inventory's, for direct use of the module."""

    TRANSFERS_FILES = False
    _supports_check_mode = True

    @vault_values.withholding()
    def run(self, tmp=None, task_vars=None):
        if "workers" in self._task.args:  # a hand-written call: the module alone
            result = super().run(tmp, task_vars)
            result.update(self._execute_module(module_name=MODULE, module_args=self._task.args,
                                               task_vars=task_vars or {}))
            return result
        result = self._prebuild(tmp, task_vars)
        if not result.get("failed") and not result.get("skipped"):  # the job artifact (module_utils._run.job_artifacts)
            result["ansible_stats"] = job_artifacts.prebuild(result)
        return result

    def _prebuild(self, tmp, task_vars):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}

        try:
            # The build reaches no worker: their connections are the preflight's and the launch's business.
            # Honours become: the build runs as Ansible's module on the build host.
            ctx = read_run(self, task_vars, ["prebuild"], connections=False, become_ok=True)
        except TopologyError as exc:  # every worker's report fails with it (plugin_utils._run.run_refusal)
            return refuse(result, task_vars, exc.problems, exc.per_host)
        dedupe = ctx.settings.prebuild_dedupe
        if dedupe is None:
            return refuse(result, task_vars, [f"controller: flodl_prebuild_dedupe must be true or false, got "
                                              f"{ctx.settings.prebuild_dedupe_shown}"])
        result.update(run_handoff.fields(ctx))
        if not ctx.prebuild:
            skipped = {ctx.inventory_names.get(w.host, w.host): entry("skipped", "flodl_prebuild is false")
                       for w in ctx.cluster.workers}
            result.update(changed=False, skipped=True, msg="prebuild disabled (flodl_prebuild: false)",
                          envelope={}, envelope_json="", per_host=skipped)
            return result
        module_args = {
            "project_root": ctx.project_root,
            "project_dir": ctx.project_dir,
            "cmd": str(ctx.cmd),
            "cmd_dir": ctx.cmd_dir,
            "docker_service": ctx.cluster.controller.docker or None,
            "dedupe": dedupe,
            "build_timeout": DEFAULT_BUILD_TIMEOUT if ctx.settings.build_timeout is None else ctx.settings.build_timeout,
            # walk_in starts the controller's own worker from a prebuilt binary too (its agent is no in-process rank).
            "workers": [{"host": w.host, "path": w.path, "arch": str(w.arch)}
                        for w in (ctx.cluster.workers if ctx.settings.walks_in(["launch"]) else ctx.remotes)],
            "env": dict(ctx.settings.prebuild_env),
        }
        with exit_with_parent():  # ansible-playbook killed outright: the ssh to the build host ends too
            built = self._build(module_args, task_vars)
        result.update(built)
        if built.get("summary"):
            # The operator's view of every build (and, in check mode, the plan), as the other phases print theirs.
            display.display("\n".join(folded_summary(built, verbose=display.verbosity >= 1)))
        per_host = prebuild_entries(built, [w.host for w in ctx.cluster.workers], ctx.inventory_names,
                                    ctx.controller_identity)
        if built.get("failed") and built.get("failed_hosts"):
            # Host builds failed: each of those workers fails with its own build below; the step stays ok.
            result.update(failed=False, builds_failed=True)
        elif built.get("failed"):
            # The prebuild failed as a whole (before any build, say): every worker's report fails with it, not the
            # worker this step ran on; no launch starts.
            why = "the prebuild failed as a whole: " + str(built.get("msg") or "no message")
            per_host = run_failed_entries(per_host, why)
            result.update(failed=False, builds_failed=True, _ansible_verbose_always=True)
        result["per_host"] = per_host
        return result

    def _build(self, module_args, task_vars):
        """The module's result: in this process when the build host is the controller itself, else over Ansible.

        On the controller (a ``local`` connection without become), packaging the module, a temp dir, a new
        interpreter and its imports cost more than a no-op ``cargo build``: the same code runs here instead,
        its arguments checked against the module's own spec.
        """
        local = self._connection.transport in ("local", "ansible.builtin.local")
        # become, or an `environment:` keyword (the task's is [{}] when none is set): Ansible's own way
        if not local or self._play_context.become or any(self._task.environment or []):
            return self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars)
        checked = ArgumentSpecValidator(ARGUMENT_SPEC).validate(module_args)
        if checked.error_messages:
            return {"failed": True, "msg": "; ".join(checked.error_messages)}
        return build(checked.validated_parameters, bool(self._task.check_mode))
