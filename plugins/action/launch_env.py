# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prepare the launcher environment (flodl-contract.md §1a) on the controller."""
from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from typing import Any

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.flodl.cluster.plugins.module_utils import launch_env as le
from ansible_collections.flodl.cluster.plugins.module_utils.hexcodec import hex_decode
from ansible_collections.flodl.cluster.plugins.module_utils.identity import controller_user
from ansible_collections.flodl.cluster.plugins.module_utils.preflight import GPU_COUNT_SCRIPT, parse_gpu_counts
from ansible_collections.flodl.cluster.plugins.module_utils.prebuild import ENVELOPE_FILE_REL, envelope_json
from ansible_collections.flodl.cluster.plugins.module_utils.ssh import probe_argv
from ansible_collections.flodl.cluster.plugins.plugin_utils.processes import run_for_output, run_parallel
from ansible_collections.flodl.cluster.plugins.module_utils.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.plugin_utils.context import RunContext, build_context, fail_result, plain

display = Display()

LOG_DIR_REL = "target/cluster/logs"
_UNSET = object()


class ActionModule(ActionBase):
    """Validation first; the only host traffic is the GPU count sweep for ``all`` workers not yet counted."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        _spec, args = self.validate_argument_spec(
            argument_spec={
                "preflight": {"type": "raw"},
                "prebuild_envelope": {"type": "raw"},
                "launch_docker": {"type": "raw"},
                "testing_cluster": {"type": "bool"},
                "container_root": {"type": "str", "default": le.CONTAINER_ROOT},
                "log_dir": {"type": "str"},
                "show_plan": {"type": "bool", "default": True},
            }
        )
        try:
            ctx = build_context(task_vars, self._templar, ["launch"])
        except TopologyError as exc:
            return fail_result(result, exc.problems)
        check = bool(self._task.check_mode)
        root = ctx.project_root.rstrip("/") or "/"
        log_dir = args["log_dir"] or le.join_root(root, LOG_DIR_REL)
        docker_service = self._launch_docker(args, task_vars, ctx)
        testing = args["testing_cluster"]
        if testing is None:
            testing = bool(self._var(task_vars, "flodl_testing_cluster", False))

        warnings: list[str] = []
        guard = le.recursion_guard(os.environ)
        counts: dict[str, tuple[int, int]] = {}
        if guard is None:
            try:
                counts, count_notes = self._gpu_counts(ctx, args, task_vars)
            except TopologyError as exc:
                return fail_result(result, exc.problems, "could not count the GPUs of `local_devices: all` workers")
            warnings += count_notes
        envelope_text, envelope_source = self._envelope(ctx, args, task_vars) if guard is None else (None, None)

        inputs = le.LaunchInputs(
            cluster=ctx.cluster,
            project_root=root,
            cmd=str(ctx.cmd),
            cmd_dir=ctx.cmd_dir,
            gpu_counts=counts,
            controller_env=dict(os.environ),
            fdl_env=ctx.fdl_env,
            host_user=controller_user(os.environ, run_for_output),
            launch_command=ctx.launch_command,
            docker_service=docker_service,
            container_root=args["container_root"],
            prebuild_envelope_json=envelope_text,
            net_timeout_scale=ctx.net_timeout_scale,
            testing_cluster=bool(testing),
            local_gpu_counts=self._local_counts() if testing and guard is None else None,
        )
        try:
            plan = le.prepare_launch(inputs)
        except TopologyError as exc:
            return fail_result(result, exc.problems, "the launch topology is incomplete; nothing was started")
        warnings += plan.warnings
        env = dict(plan.env)
        if not plan.guarded and le.is_compose_command(plan.command):
            extra = le.compose_process_env(
                ctx.controller_identity, root, ctx.cluster["controller"].get("arch")
            )
            env.update(extra)

        if plan.overlay_path:
            missing = self._services_missing(root)
            if missing:
                warnings.append(
                    f"controller: {le.BASE_COMPOSE_FILE} defines no {', '.join(missing)} service; the generated "
                    f"{le.OVERLAY_NAME} adds extra_hosts to cuda, dev and bench (as fdl-cli does), and docker compose "
                    "refuses a service without an image — add the missing service(s) (flodl's compose file has all three)"
                )
        changed = False
        if plan.overlay_path and plan.overlay is not None and not check:
            changed = self._write_overlay(plan.overlay_path, plan.overlay, warnings)
            if changed is None:  # write failed: run without the overlay, as fdl does
                plan.command = plan.command.replace(le.compose_overlay_flags(plan.overlay_path), "", 1)
                plan.overlay_path = None
                changed = False

        secret = le.holds_secret(plan.topology)
        shown_topology = le.redacted_topology(plan.topology) if plan.topology else None
        shown_json = (
            json.dumps(shown_topology, indent=2, ensure_ascii=False) if secret and shown_topology else plan.topology_json
        )
        lines = self._plan_lines(plan, env, envelope_text, envelope_source, log_dir, check, guard, shown_json, secret)
        if args["show_plan"]:
            display.display("\n".join(lines))
        for warning in warnings:
            display.warning(warning)
        result.update(
            changed=bool(changed),
            command=plan.command,
            cwd=plan.cwd,
            env=env,
            guarded=plan.guarded,
            topology=shown_topology,
            topology_json=shown_json,
            topology_redacted=secret,
            prebuild_envelope=json.loads(envelope_text) if envelope_text else None,
            prebuild_envelope_source=envelope_source,
            extra_hosts=[f"{h}:{ip}" for h, ip in plan.extra_hosts],
            overlay_path=plan.overlay_path,
            overlay=plan.overlay,
            launcher_root=plan.launcher_root,
            log_dir=log_dir,
            controller_identity=ctx.controller_identity,
            gpu_counts={h: {"nvidia": n, "amd": a} for h, (n, a) in counts.items()},
            plan=lines,
            launch_warnings=warnings,
        )
        return result

    # ------------------------------------------------------------------
    def _var(self, task_vars: Mapping[str, Any], name: str, default: Any = None) -> Any:
        if name not in task_vars:
            return default
        return plain(self._templar.template(task_vars[name]))

    def _launch_docker(self, args: Mapping[str, Any], task_vars: Mapping[str, Any], ctx: RunContext) -> str | None:
        """The compose service of the default launch command: explicit, else the controller's build service."""
        value = args["launch_docker"]
        if value is None:
            value = self._var(task_vars, "flodl_launch_docker", _UNSET)
        if value is _UNSET or value is None:
            value = ctx.cluster["controller"].get("docker")
        if value is False or value is None or not str(value).strip():
            return None
        return str(value).strip()

    def _gpu_counts(
        self, ctx: RunContext, args: Mapping[str, Any], task_vars: Mapping[str, Any]
    ) -> tuple[dict[str, tuple[int, int]], list[str]]:
        """(nvidia, amd) per ``all`` worker: from preflight's facts, else one parallel ssh sweep."""
        wanted = [w for w in ctx.cluster["workers"] if w.get("local_devices") == "all"]
        if not wanted:
            return {}, []
        preflight = args["preflight"]
        if preflight is None:
            preflight = self._var(task_vars, "flodl_preflight")
        reported = (preflight or {}).get("hosts") or {} if isinstance(preflight, Mapping) else {}
        counts: dict[str, tuple[int, int]] = {}
        for worker in wanted:
            gpus = (reported.get(worker["host"]) or {}).get("gpus") if isinstance(reported, Mapping) else None
            if isinstance(gpus, Mapping) and "nvidia" in gpus and "amd" in gpus:
                counts[worker["host"]] = (int(gpus["nvidia"]), int(gpus["amd"]))
        missing = [w for w in wanted if w["host"] not in counts]
        if not missing:
            return counts, []
        problems: list[str] = []
        remote = [w for w in missing if w["host"] != ctx.controller_identity]
        if any(w["host"] == ctx.controller_identity for w in missing):
            local = self._local_counts()
            if local is None:
                problems.append(f"host {ctx.controller_identity}: the local GPU count script failed")
            else:
                counts[ctx.controller_identity] = local
        jobs = {w["host"]: probe_argv(w, GPU_COUNT_SCRIPT, ctx.project_root) for w in remote}
        timeout = 30.0 * float(ctx.net_timeout_scale or 1.0)
        for host, res in run_parallel(jobs, timeout=timeout).items():
            if not res.ok:
                why = res.error or f"ssh exited {res.returncode}: {res.stderr.strip()[-300:]}"
                problems.append(f"host {host}: counting GPUs for `local_devices: all` failed: {why}")
                continue
            try:
                counts[host] = parse_gpu_counts(res.stdout)
            except ValueError as exc:
                problems.append(f"host {host}: counting GPUs for `local_devices: all` failed: {exc}")
        if problems:
            raise TopologyError(problems)
        if remote:
            display.display(
                f"flodl launch: counted GPUs over ssh for {', '.join(w['host'] for w in remote)} "
                "(no preflight result in this play)"
            )
        return counts, []

    @staticmethod
    def _local_counts() -> tuple[int, int] | None:
        try:
            proc = subprocess.run(
                ["/bin/sh", "-c", GPU_COUNT_SCRIPT], capture_output=True, text=True, timeout=30, check=False
            )
            return parse_gpu_counts(proc.stdout) if proc.returncode == 0 else None
        except (OSError, subprocess.SubprocessError, ValueError):
            return None

    def _envelope(
        self, ctx: RunContext, args: Mapping[str, Any], task_vars: Mapping[str, Any]
    ) -> tuple[str | None, str | None]:
        """The compact prebuild envelope and where it came from; ``(None, None)`` without prebuild."""
        if not ctx.prebuild:
            return None, None
        value = args["prebuild_envelope"]
        source = "task argument prebuild_envelope"
        if value is None:
            value = self._var(task_vars, "flodl_prebuild_envelope_json")
            source = "fact flodl_prebuild_envelope_json"
        if value is None:
            value = self._var(task_vars, "flodl_prebuild_envelope")
            source = "fact flodl_prebuild_envelope"
        if value is None:
            path = le.join_root(ctx.project_root, ENVELOPE_FILE_REL)
            try:
                with open(path, encoding="utf-8") as fh:
                    value = json.load(fh)
                source = f"file {path} (left by an earlier prebuild)"
            except (OSError, ValueError):
                return None, None
        if isinstance(value, str):
            if not value.strip():
                return None, None
            return value, source
        if isinstance(value, Mapping):
            return envelope_json(value), source
        return None, None

    @staticmethod
    def _services_missing(root: str) -> list[str]:
        """Overlay services the project's base compose file does not define ([] when it cannot be read)."""
        try:
            import yaml

            with open(le.join_root(root, le.BASE_COMPOSE_FILE), encoding="utf-8") as fh:
                services = (yaml.safe_load(fh) or {}).get("services") or {}
        except Exception:  # noqa: BLE001  (advisory check only)
            return []
        return [s for s in le.OVERLAY_SERVICES if s not in services]

    @staticmethod
    def _write_overlay(path: str, content: str, warnings: list[str]) -> bool | None:
        try:
            with open(path, encoding="utf-8") as fh:
                if fh.read() == content:
                    return False
        except OSError:
            pass
        try:
            tmp = f"{path}.tmp{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(content)
            os.replace(tmp, path)
        except OSError as exc:
            warnings.append(
                f"controller: could not write the compose overlay {path}: {exc}; "
                "docker compose runs without extra_hosts"
            )
            return None
        return True

    @staticmethod
    def _plan_lines(
        plan: le.LaunchPlan,
        env: Mapping[str, str],
        envelope_text: str | None,
        envelope_source: str | None,
        log_dir: str,
        full: bool,
        guard: str | None,
        shown_json: str | None,
        secret: bool,
    ) -> list[str]:
        lines = ["flodl launch plan" + (" (check mode: nothing runs, nothing is written)" if full else "")]
        lines.append(f"  command : {plan.command}")
        lines.append(f"  cwd     : {plan.cwd}")
        lines.append(f"  log     : {log_dir}/launch-<timestamp>.log")
        if guard:
            lines.append(f"  recursion guard: {guard}")
            return lines
        lines.append("  environment added to the controller's own:")
        for name in sorted(env):
            value = env[name]
            if secret and name in le.SECRET_VARS:
                value = f"<{len(value)} hex chars withheld: they hold controller.join.token>"
            elif not full and len(value) > 96:
                value = f"{value[:64]}… ({len(value)} chars)"
            lines.append(f"    {name}={value}")
        if shown_json:
            note = ", join token redacted" if secret else ""
            lines.append(f"  topology ({le.ENV_FULL_CLUSTER_JSON}, decoded{note}):")
            text = shown_json if secret else hex_decode(env[le.ENV_FULL_CLUSTER_JSON]).decode("utf-8")
            lines += [f"    {line}" for line in text.splitlines()]
        if envelope_text:
            lines.append(f"  prebuild envelope ({le.ENV_PREBUILD_PER_HOST}, from {envelope_source}):")
            for host, entry in sorted(json.loads(envelope_text).items()):
                lines.append(f"    {host}: {json.dumps(entry, sort_keys=True)}")
        if plan.overlay_path:
            lines.append(f"  compose overlay {plan.overlay_path}:")
            lines += [f"    {line}" for line in (plan.overlay or "").splitlines()]
        return lines
