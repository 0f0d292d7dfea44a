# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stop leftover rank processes of the prebuilt binary on the play's remote workers (the I/O half).

Used by the teardown step (``flodl.cluster.orphan_cleanup``) and by the launch step itself when the
launch is interrupted (an AWX cancel's SIGTERM, Ctrl-C, ansible-playbook dying): then no later task
of the play runs, so the launch step stops the ranks before it returns. With ``flodl_launch_host``
the same cleanup also goes to the launch host's wrapper as a plan, for a job killed whole.
Policy in module_utils._launch.teardown.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._launch import teardown as td
from ansible_collections.flodl.cluster.plugins.module_utils._run.identity import controller_user
from ansible_collections.flodl.cluster.plugins.module_utils._core.phase_result import entry
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_cleanup import cleanup_budget, render_plan
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.ssh import launcher_argv
from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import launch_io
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import RunContext, read_run
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.task_vars import registered
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.processes import effective_user, run_parallel


def targets_of(ctx: RunContext, given: Any, play_result: Any) -> tuple[dict[str, Any], dict[str, tuple[Mapping[str, Any], str]], str | None]:
    """(per_host entries for hosts with nothing to stop, host -> (worker, binary), envelope source)."""
    text, source = launch_io.read_envelope(ctx, given, play_result)
    envelope = json.loads(text) if text else ({} if source else None)
    per_host: dict[str, Any] = {}
    targets: dict[str, tuple[Mapping[str, Any], str]] = {}
    for worker in ctx.cluster.workers:
        name = ctx.inventory_names.get(worker.host, worker.host)
        if not ctx.in_play(worker.host):
            continue
        connection = ctx.reached_by_ansible(worker.host)
        if connection:
            per_host[name] = entry("skipped", f"reached by Ansible's {connection} connection, not ssh: flodl's ssh "
                                   "cleanup cannot reach it; its walk-in agent stops its rank when the launcher ends")
            continue
        abs_bin = None if worker.host == ctx.controller_identity else td.binary_of(worker, envelope, ctx.cmd)
        if abs_bin is None:
            per_host[name] = entry("skipped", "no prebuilt binary known on this host: nothing to stop")
        else:
            targets[worker.host] = (worker.document, abs_bin)  # flodl's entry, for the ssh argv
    return per_host, targets, source


def cleanup_argvs(ctx: RunContext, targets: Mapping[str, tuple[Mapping[str, Any], str]],
                  host_user: str | None) -> dict[str, list[str]]:
    """host -> the cleanup's ssh argv: the launcher's shape with the connect bound, teardown's script."""
    return {h: launcher_argv(w, td.cleanup_script(b), host_user=host_user, project_root=ctx.project_dir,
                             connect_timeout=ctx.connect_timeout)
            for h, (w, b) in targets.items()}


def _play_targets(action: Any, task_vars: Mapping[str, Any]) -> tuple[RunContext, dict[str, Any], dict[str, Any]]:
    """The run, and the workers to clean after the launch: (run, skipped entries, targets), from this play's build."""
    ctx = read_run(action, task_vars, ["teardown"])
    skipped, targets, _source = targets_of(ctx, None, registered(task_vars, launch_io.PREBUILD_RESULT_VAR))
    return ctx, skipped, targets


def watcher_cleanup_argvs(action: Any, task_vars: Mapping[str, Any]) -> list[list[str]]:
    """The cleanup ssh of every remote worker of the play, computed before the launch starts.

    Handed to the launch's process-group watcher (module_utils._core.group_watch), which runs them if this
    process is killed outright (a SIGKILL of Ansible's whole process group leaves nobody else to).
    Empty when the run cannot be read: the launch itself then reports why.
    """
    try:
        ctx, _skipped, targets = _play_targets(action, task_vars)
        return list(cleanup_argvs(ctx, targets, controller_user(os.environ, effective_user)).values())
    except Exception:  # noqa: BLE001  (the launch must not fail for its safety net)
        return []


def stop_orphans(ctx: RunContext, targets: Mapping[str, tuple[Mapping[str, Any], str]],
                 timeout: float) -> tuple[dict[str, Any], list[str]]:
    """One parallel ssh per target host (the launcher's argv); (per_host entries, warnings)."""
    jobs = cleanup_argvs(ctx, targets, controller_user(os.environ, effective_user))
    per_host: dict[str, Any] = {}
    warnings: list[str] = []
    for host, res in run_parallel(jobs, timeout=timeout).items():
        why = res.error or f"ssh exited {res.returncode}: {res.stderr.strip()[-300:]}"
        outcome, warning = td.judge(host, targets[host][1], td.CleanupAnswer(res.ok, res.stdout, why))
        per_host[ctx.inventory_names.get(host, host)] = outcome
        warnings += [warning] if warning else []
    return per_host, warnings


def launch_host_plan(action: Any, task_vars: Mapping[str, Any], host_user: str | None) -> str:
    """The cleanup plan the launch host's wrapper runs if the job dies (module_utils._ssh.remote_cleanup).

    The same hosts, ssh and script as :func:`after_interrupt`; ``host_user`` is the launch
    environment's host user, the one the launcher there logs in as.
    """
    ctx, _skipped, targets = _play_targets(action, task_vars)
    return render_plan(cleanup_argvs(ctx, targets, host_user), cleanup_budget(ctx.connect_timeout))


def after_interrupt(action: Any, task_vars: Mapping[str, Any], timeout: float,
                    show: Callable[[str], None], warn: Callable[[str], None]) -> str:
    """The teardown's cleanup on every remote worker of the play, from the launch step; a one-line summary.

    Never raises: a failed cleanup must not hide the interrupt that called it.
    """
    try:
        ctx, skipped, targets = _play_targets(action, task_vars)
        per_host, warnings = stop_orphans(ctx, targets, timeout)
    except Exception as exc:  # noqa: BLE001
        return f"could not run ({type(exc).__name__}: {exc}); run flodl.cluster.teardown"
    lines = [f"{name}: {e['status']} — {e['msg']}" for name, e in {**skipped, **per_host}.items()]
    show("flodl launch: orphan cleanup after the interrupt:\n  " + "\n  ".join(lines or ["no worker"]))
    for warning in warnings:
        warn(warning)
    return f"ran on {len(targets)} host(s), {len(warnings)} warning(s)"
