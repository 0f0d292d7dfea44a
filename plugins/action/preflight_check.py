# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight for a flodl cluster: validate, then probe every remote worker once, in parallel."""
from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Mapping
from typing import Any

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.flodl.cluster.plugins.module_utils import preflight as pf
from ansible_collections.flodl.cluster.plugins.module_utils.shell import join_posix
from ansible_collections.flodl.cluster.plugins.module_utils.ssh import probe_argv
from ansible_collections.flodl.cluster.plugins.plugin_utils.processes import run_parallel
from ansible_collections.flodl.cluster.plugins.module_utils.topology import (
    TopologyError,
    derive_ssh,
    effective_data_path,
)
from ansible_collections.flodl.cluster.plugins.plugin_utils.context import PHASES, RunContext, build_context, fail_result, plain

display = Display()

BUILD_HOST_JOB = "\x00build-host"  # cannot clash with an inventory host name
_LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_CONNECTION_VARS = (
    "ansible_connection",
    "ansible_host",
    "ansible_port",
    "ansible_user",
    "ansible_ssh_private_key_file",
    "ansible_ssh_common_args",
    "ansible_ssh_extra_args",
    "flodl_ssh",
)


def _local_data_path_state(path: str) -> tuple[bool, bool]:
    is_dir = os.path.isdir(path)
    if not is_dir:
        return False, False
    try:
        os.listdir(path)
    except OSError:
        return True, False
    return True, True


def _local_gpu_text() -> str:
    try:
        proc = subprocess.run(
            ["sh", "-c", pf.GPU_COUNT_SCRIPT], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"could not run the GPU count: {exc}"
    return proc.stdout


class ActionModule(ActionBase):
    """All policy lives in module_utils.preflight; this plugin only gathers inputs and reports."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        dummy, args = self.validate_argument_spec(
            argument_spec={
                "phases": {"type": "list", "elements": "str", "choices": list(PHASES), "default": ["preflight"]},
                "build_arch": {"type": "str"},
                "timeout": {"type": "float", "default": 30.0},
                "max_parallel": {"type": "int", "default": 64},
                "fail_on_error": {"type": "bool", "default": True},
            }
        )
        phases = list(args["phases"])
        if "preflight" not in phases:
            phases.append("preflight")
        try:
            ctx = build_context(task_vars, self._templar, phases)
        except TopologyError as exc:
            return fail_result(result, exc.problems)

        identity = ctx.controller_identity
        controller = self._controller(ctx)
        jobs: dict[str, list[str]] = {}
        plans: dict[str, dict[str, Any]] = {}
        for worker in ctx.remotes:
            path, declared = effective_data_path(worker)
            script = pf.probe_script(path, abi=ctx.prebuild, gpus=worker.get("local_devices") == "all")
            jobs[worker["host"]] = probe_argv(worker, pf.remote_command(script), ctx.project_root)
            plans[worker["host"]] = {"worker": worker, "path": path, "declared": declared}

        build_arch = args["build_arch"]
        build_local = self._build_host_is_local(ctx, task_vars)
        build_arch_source = "argument"
        if ctx.prebuild and not build_arch:
            if build_local:
                build_arch, build_arch_source = os.uname().machine, "controller"
            elif jobs:
                jobs[BUILD_HOST_JOB] = self._build_host_argv(ctx, task_vars)
                build_arch_source = "ssh"

        results = run_parallel(jobs, timeout=args["timeout"], max_parallel=max(1, args["max_parallel"]))

        warnings_extra: list[str] = []
        if BUILD_HOST_JOB in results:
            probe = results.pop(BUILD_HOST_JOB)
            answer = probe.stdout.strip().splitlines()[-1].strip() if probe.ok and probe.stdout.strip() else ""
            if answer:
                build_arch = answer
            else:
                why = probe.error or pf.last_line(probe.stderr) or f"exit {probe.returncode}"
                warnings_extra.append(
                    f"build host {ctx.build_host}: could not read its CPU arch ({why}); the arch part of the "
                    "ABI check was skipped. Make it reachable over ssh or set flodl_build_arch."
                )

        reports: dict[str, dict[str, Any]] = {}
        for worker in ctx.cluster["workers"]:
            host = worker["host"]
            if host == identity:
                reports[host] = self._local_worker_report(worker, controller)
                continue
            plan = plans[host]
            res = results[host]
            report = pf.evaluate_remote(
                worker,
                data_path=plan["path"],
                declared=plan["declared"],
                prebuild=ctx.prebuild,
                build_arch=build_arch,
                returncode=res.returncode,
                stdout=res.stdout,
                stderr=res.stderr,
                error=res.error,
            )
            report["target"] = jobs[host][-2]
            report["probe_command"] = join_posix(jobs[host])
            report["seconds"] = round(res.seconds, 3)
            reports[host] = report

        ordered = [controller, *reports.values()]
        totals = pf.collect(ordered)
        warnings = warnings_extra + totals["warnings"]
        summary = [pf.summary_line(r) for r in [controller, *reports.values()]]
        advisory = pf.glibc_advisory(list(reports.values()))
        data: dict[str, Any] = {
            "ok": not totals["failed_hosts"],
            "check_mode": bool(self._task.check_mode),
            "controller_identity": identity,
            "prebuild": ctx.prebuild,
            "build_host": ctx.build_host,
            "build_arch": build_arch,
            "build_arch_source": build_arch_source if build_arch else None,
            "controller": controller,
            "hosts": reports,
            "failed_hosts": totals["failed_hosts"],
            "warnings": warnings,
            "advisory": advisory,
            "summary": summary,
        }

        for warning in warnings:
            display.warning(warning)
        header = f"flodl preflight ({len(ctx.remotes)} remote worker(s) probed"
        header += f", build arch {build_arch})" if build_arch else ")"
        display.display("\n".join([header, *[f"  {line}" for line in summary]] + ([advisory] if advisory else [])))
        if self._task.check_mode:
            # The plan an operator reviews before a real run: the exact probe per host.
            display.display(
                "flodl preflight probes (check mode; the probe only reads):\n"
                + "\n".join(f"  {host}: {report['probe_command']}" for host, report in reports.items() if "probe_command" in report)
            )

        result.update(changed=False, preflight=data, summary=summary)
        if totals["failed_hosts"]:
            message = pf.failure_message(ordered, warnings)
            data["failure"] = message.splitlines()
            result["msg"] = message
            result["failed"] = bool(args["fail_on_error"])
        else:
            result["msg"] = (
                f"flodl preflight passed: {len(reports)} worker(s), {len(warnings)} warning(s)"
            )
        return result

    # ------------------------------------------------------------------
    def _controller(self, ctx: RunContext) -> dict[str, Any]:
        entry = ctx.cluster["controller"]
        path, declared = effective_data_path(entry)
        is_dir, readable = _local_data_path_state(path)
        report = pf.controller_report(ctx.controller_identity, path, declared, is_dir, readable)
        report["controller"] = True
        return report

    @staticmethod
    def _local_worker_report(worker: Mapping[str, Any], controller: Mapping[str, Any]) -> dict[str, Any]:
        """The controller's own worker entry: covered by the controller's checks, no ssh."""
        report: dict[str, Any] = {
            "host": worker["host"],
            "controller": True,
            "status": controller["status"],
            "arch": os.uname().machine,
            "libc": None,
            "ldd": None,
            "pkill": None,
            "gpus": None,
            "data_path": dict(controller["data_path"]),
            "errors": [],
            "warnings": [],
            "notes": [],
        }
        if worker.get("local_devices") == "all":
            gpus, finding = pf.check_gpus(worker, _local_gpu_text())
            report["gpus"] = gpus
            if finding:
                report["errors"].append(finding.message)
                report["status"] = pf.STATUS_ERROR
        return report

    def _hostvars(self, task_vars: Mapping[str, Any], host: str) -> dict[str, Any]:
        raw = (task_vars.get("hostvars") or {}).get(host)
        if raw is None:
            return {}
        out: dict[str, Any] = {}
        for var in _CONNECTION_VARS:
            if var in raw:
                out[var] = plain(self._templar.template(raw[var]))
        return out

    def _build_host_is_local(self, ctx: RunContext, task_vars: Mapping[str, Any]) -> bool:
        name = ctx.build_host
        if name in _LOCAL_NAMES or name == ctx.controller_identity or name == socket.gethostname():
            return True
        return self._hostvars(task_vars, name).get("ansible_connection") == "local"

    def _build_host_argv(self, ctx: RunContext, task_vars: Mapping[str, Any]) -> list[str]:
        """ssh to the build host as the inventory describes it, to read ``uname -m``."""
        name = ctx.build_host
        hv = self._hostvars(task_vars, name)
        ssh = derive_ssh(name, hv)
        ssh.pop("__invalid__", None)
        return probe_argv({"host": name, "ssh": ssh}, "uname -m", ctx.project_root)
