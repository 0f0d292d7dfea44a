# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prepare the environment flodl's launcher reads, on the controller, once for the play."""
from __future__ import annotations

import json
import os

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.flodl.cluster.plugins.module_utils import launch_env as le
from ansible_collections.flodl.cluster.plugins.module_utils.identity import controller_user
from ansible_collections.flodl.cluster.plugins.module_utils.launch_text import plan_lines
from ansible_collections.flodl.cluster.plugins.module_utils.phase_result import entry
from ansible_collections.flodl.cluster.plugins.module_utils.remote_launch import RemoteLaunchError
from ansible_collections.flodl.cluster.plugins.module_utils.safety import resolved_under
from ansible_collections.flodl.cluster.plugins.module_utils.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.plugin_utils import launch_io, sshreuse_io
from ansible_collections.flodl.cluster.plugins.plugin_utils.context import (
    as_bool,
    fail_result,
    is_local_host,
    launch_docker,
    launch_ssh,
    read_run,
    var,
)
from ansible_collections.flodl.cluster.plugins.plugin_utils.processes import run_for_output

display = Display()
LOG_DIR_REL = "target/cluster/logs"


class ActionModule(ActionBase):
    """Validation first; the only host traffic is a GPU count for ``all`` workers preflight did not count."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        _spec, args = self.validate_argument_spec(argument_spec={
            "preflight": {"type": "raw"}, "prebuild_envelope": {"type": "raw"}, "launch_docker": {"type": "raw"},
            "testing_cluster": {"type": "bool"}, "container_root": {"type": "str", "default": le.CONTAINER_ROOT},
            "log_dir": {"type": "str"}, "show_plan": {"type": "bool", "default": True},
            "launch_host": {"type": "str", "default": "localhost"},
        })
        try:
            ctx = read_run(self, task_vars, ["launch"])
            docker_service = launch_docker(args["launch_docker"], task_vars, self._templar, ctx)
        except TopologyError as exc:
            return fail_result(result, exc.problems)
        check = bool(self._task.check_mode)
        log_dir = args["log_dir"] or le.join_root(ctx.project_dir.rstrip("/") or "/", LOG_DIR_REL)
        if not args["log_dir"] and not resolved_under(ctx.project_dir, log_dir):
            # The default log directory lies in a shared project: a symlink planted at target/cluster/logs (or
            # above it) would make this run create its log wherever the link points.
            return fail_result(result, [
                f"controller: the launch log directory {log_dir} resolves to {os.path.realpath(log_dir)}, outside "
                f"the project {ctx.project_dir} (a symbolic link in its path); refusing to write the log there. "
                "Remove the link (and check who made it), or set flodl_launch_log_dir to a directory you trust"
            ], "the launch log directory is unsafe; nothing was started")
        testing = args["testing_cluster"]
        if testing is None:
            testing = as_bool(var(task_vars, self._templar, "flodl_testing_cluster", True)) is not False
        warnings: list[str] = []
        guard = le.recursion_guard(os.environ)
        counts: dict[str, tuple[int, int]] = {}
        envelope_text = envelope_source = None
        preflight = args["preflight"] or var(task_vars, self._templar, launch_io.PREFLIGHT_RESULT_VAR)
        # The masters the preflight probe left for this run's fan-out (none with flodl_ssh_reuse=false).
        reuse_dir = preflight.get(sshreuse_io.RESULT_KEY) if isinstance(preflight, dict) else None
        reuse_dir = reuse_dir if isinstance(reuse_dir, str) and os.path.isdir(reuse_dir) else None
        if reuse_dir and (check or guard is not None or not sshreuse_io.enabled(task_vars, self._templar)):
            sshreuse_io.close_masters(reuse_dir)
            reuse_dir = None
        if guard is None:
            try:
                counts, swept = launch_io.gpu_counts(ctx, preflight)
            except TopologyError as exc:
                sshreuse_io.close_masters(reuse_dir)
                return fail_result(result, exc.problems, "could not count the GPUs of `local_devices: all` workers")
            if swept:
                display.display("flodl launch: counted GPUs over ssh (no preflight result in this play)")
            envelope_text, envelope_source = launch_io.read_envelope(
                ctx, args["prebuild_envelope"], var(task_vars, self._templar, launch_io.PREBUILD_RESULT_VAR))
        remote = None if is_local_host(args["launch_host"], task_vars, self._templar) else args["launch_host"]
        host_user = controller_user(os.environ, run_for_output)
        if remote is not None:
            try:
                host_user = launch_ssh(self, task_vars, remote).get("user") or host_user
            except RemoteLaunchError as exc:
                return fail_result(result, [f"controller: {exc}"])
        inputs = launch_io.launch_inputs(
            ctx, gpu_counts=counts, host_user=host_user, docker_service=docker_service,
            container_root=args["container_root"], envelope_text=envelope_text, testing=bool(testing),
            guarded=guard is not None, ssh_reuse_dir=None if remote else reuse_dir)
        try:
            plan = le.prepare_launch(inputs)
        except TopologyError as exc:
            sshreuse_io.close_masters(reuse_dir)
            return fail_result(result, exc.problems, "the launch topology is incomplete; nothing was started")
        if remote is not None and le.is_compose_command(plan.command):
            return fail_result(result, [
                f"controller: the launch command runs docker compose, and flodl_launch_host is {remote}: a compose "
                "launch on another host is not supported (its overlay file and compose project live where the play "
                "runs); launch natively there (flodl_launch_docker: false) or run the play on that host"])
        warnings += plan.warnings
        env = dict(plan.env)
        changed = launch_io.apply_overlay(plan, ctx.project_dir, check, warnings)
        secret = le.holds_secret(plan.topology)
        shown = le.redacted_topology(plan.topology) if plan.topology else None
        shown_json = json.dumps(shown, indent=2, ensure_ascii=False) if secret and shown else plan.topology_json
        lines = plan_lines(plan, env, envelope_text, envelope_source, log_dir, check, guard, shown_json, secret)
        if args["show_plan"]:
            display.display("\n".join(lines))
        for warning in warnings:
            display.warning(warning)
        ranks = {str(w["host"]): w.get("ranks") for w in (plan.topology or {}).get("workers", [])}
        result.update(
            changed=bool(changed), command=plan.command, cwd=plan.cwd, env=env, guarded=plan.guarded,
            topology=shown, topology_json=shown_json, topology_redacted=secret,
            prebuild_envelope=json.loads(envelope_text) if envelope_text else None,
            prebuild_envelope_source=envelope_source, extra_hosts=[f"{h}:{ip}" for h, ip in plan.extra_hosts],
            overlay_path=plan.overlay_path, overlay=plan.overlay, launcher_root=plan.launcher_root, log_dir=log_dir,
            controller_identity=ctx.controller_identity, plan=lines, launch_warnings=warnings,
            gpu_counts={h: {"nvidia": n, "amd": a} for h, (n, a) in counts.items()},
            ssh_control_dir=reuse_dir,
            per_host={ctx.inventory_names.get(h, h): entry("ok", f"in the launched run, ranks {r}", ranks=r)
                      for h, r in ranks.items()},
        )
        return result
