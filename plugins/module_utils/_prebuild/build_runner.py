# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cargo_prebuild run on the build host: its arguments read once, then the plan built and settled.

Shared by the module (on a remote build host) and its action (in-process when the build host is the
controller), so both validate against the one ARGUMENT_SPEC below.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._prebuild.build_files import (
    link_binary,
    link_escapes,
    take_envelope,
    write_text,
)
from ansible_collections.flodl.cluster.plugins.module_utils._prebuild.build_process import (
    KILL_GRACE_SECONDS,
    os_error_text,
    run_step,
)
from ansible_collections.flodl.cluster.plugins.module_utils._prebuild.build_summary import host_entry, summary, summary_rows
from ansible_collections.flodl.cluster.plugins.module_utils._core.group_watch import start_watch
from ansible_collections.flodl.cluster.plugins.module_utils._run.prebuild import (
    BuildStep,
    PrebuildError,
    plan_prebuild,
)
from ansible_collections.flodl.cluster.plugins.module_utils._run.prebuild_layout import envelope_json
from ansible_collections.flodl.cluster.plugins.module_utils._prebuild.prebuild_failures import (
    HostFailure,
    format_failure,
    format_failures,
    missing_variant_reason,
)

DEFAULT_BUILD_TIMEOUT = 3600

# The module's arguments (also validated in-process when the build host is the controller itself).
ARGUMENT_SPEC: dict[str, Any] = {
    "project_root": {"type": "path", "required": True},
    "project_dir": {"type": "path"},
    "cmd": {"type": "str", "required": True},
    "cmd_dir": {"type": "str", "default": ""},
    "docker_service": {"type": "str"},
    "dedupe": {"type": "bool", "default": True},
    "workers": {
        "type": "list",
        "elements": "dict",
        "required": True,
        "options": {
            "host": {"type": "str", "required": True},
            "path": {"type": "str", "required": True},
            "arch": {"type": "str"},
        },
    },
    "env": {"type": "dict", "default": {}},
    "tail_lines": {"type": "int", "default": 20},
    "envelope_file": {"type": "str"},
    "build_timeout": {"type": "float", "default": DEFAULT_BUILD_TIMEOUT},
}


def _failed(msg: str, **result: Any) -> dict[str, Any]:
    return dict(result, failed=True, msg=msg)


def build(p: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    """Run the prebuild for validated arguments ``p``; the module result (``failed`` and ``msg`` on failure)."""
    return BuildRunner(p, check_mode).run()


class BuildRunner:
    """One prebuild: the validated arguments read once here, then ``run`` plans, builds and settles."""

    def __init__(self, p: dict[str, Any], check_mode: bool) -> None:
        self.check_mode = check_mode
        self.timeout = p["build_timeout"]
        self.raw_env = p["env"] or {}
        self.tail_count = p["tail_lines"]
        self.envelope_file = p["envelope_file"]
        self.plan_args = dict(
            project_root=p["project_root"],
            cmd=p["cmd"],
            workers=p["workers"],
            cmd_dir=p["cmd_dir"] or "",
            docker_service=p["docker_service"] or None,
            dedupe=p["dedupe"],
            project_dir=p["project_dir"] or None,
        )
        self.failures: dict[str, HostFailure] = {}

    def run(self) -> dict[str, Any]:
        if not self.timeout > 0:
            return _failed(
                msg=f"build_timeout must be a positive number of seconds, got {self.timeout}; "
                f"use e.g. {DEFAULT_BUILD_TIMEOUT} for an hour"
            )
        bad_env = [k for k, v in self.raw_env.items() if not isinstance(v, str)]
        if bad_env:
            return _failed(msg=f"env values must be strings; quote these in YAML: {', '.join(sorted(map(str, bad_env)))}")
        self.extra_env = {str(k): v for k, v in self.raw_env.items()}
        try:
            self.plan = plan = plan_prebuild(**self.plan_args)
        except PrebuildError as exc:
            return _failed(msg=f"flodl prebuild: {exc}")
        envelope_file = self.envelope_file
        if envelope_file is None:
            envelope_file = plan.envelope_file
        self.order = [t.host for t in plan.targets]
        hosts = self.hosts = {h: host_entry(plan, h) for h in self.order}
        runnable = self._runnable_steps()
        result: dict[str, Any] = {
            "changed": False,
            "mode": plan.mode,
            "dedupe": plan.dedupe,
            "groups": plan.groups(),
            "envelope_file": envelope_file or "",
        }

        escapes = link_escapes(plan, envelope_file)
        if escapes:
            # Before anything is written or removed (the envelope, a log, a target dir).
            return _failed(msg="flodl prebuild: " + "; ".join(escapes), **result)
        if self.check_mode:
            return self._check_result(runnable, result)

        previous_envelope = take_envelope(envelope_file)
        ran = self._run_steps(runnable)
        builds = [ran.get(step.host) or dict(step.as_dict(), status="not run", changed=False) for step in plan.steps]
        changed = self._settle(runnable, ran)
        result.update(builds=builds, hosts=hosts, summary=summary(plan, hosts, check=False),
                      summary_rows=summary_rows(hosts, check=False))
        if self.failures:
            result["changed"] = changed or previous_envelope is not None
            built = sum(1 for b in builds if b.get("status") in ("built", "up to date"))
            return self._with_failures(result, built)

        envelope = plan.envelope()
        # No remote worker: fdl-cli leaves FLODL_INTERNAL_PREBUILD_PER_HOST unset, so hand over "" (= unset).
        text = envelope_json(envelope) if envelope else ""
        if envelope_file:
            if envelope:
                try:
                    write_text(envelope_file, text)
                except OSError as exc:
                    return _failed(msg=f"flodl prebuild: every build succeeded but the envelope file could not be "
                                   f"written: {os_error_text(exc)}", **result)
                changed = changed or previous_envelope != text
            else:
                changed = changed or previous_envelope is not None
        result.update(changed=changed, envelope=envelope, envelope_json=text)
        return result

    def _check_result(self, runnable: list[BuildStep], result: dict[str, Any]) -> dict[str, Any]:
        """Check mode: what each host would get, and the envelope the builds would produce."""
        plan, hosts = self.plan, self.hosts
        for step in runnable:
            for host in step.hosts:
                hosts[host]["status"] = "would build" if host == step.host else "would link"
        result.update(builds=[s.as_dict() for s in plan.steps], hosts=hosts, summary=summary(plan, hosts, check=True),
                      summary_rows=summary_rows(hosts, check=True))
        if self.failures:
            return self._with_failures(result)
        envelope = plan.envelope()
        result.update(envelope=envelope, envelope_json=envelope_json(envelope) if envelope else "")
        return result

    def _fail_host(self, host: str, failure: HostFailure) -> None:
        self.failures[host] = failure
        self.hosts[host]["status"] = "failed"

    def _runnable_steps(self) -> list[BuildStep]:
        """The steps that can run; a host with a problem in its plan, or no variant directory, fails instead."""
        for target in self.plan.targets:
            if target.problem is not None:
                self._fail_host(target.host, HostFailure(target.host, target.arch, target.problem))
        runnable: list[BuildStep] = []
        for step in self.plan.steps:
            if os.path.isdir(os.path.join(step.variant_dir, "lib")):
                runnable.append(step)
                continue
            for host in step.hosts:
                self._fail_host(host, HostFailure(host, step.arch, missing_variant_reason(step.variant_dir)))
        return runnable

    def _with_failures(self, result: dict[str, Any], built: int = 0) -> dict[str, Any]:
        """The failed module result: every failing host, in worker order."""
        failing = [h for h in self.order if h in self.failures]
        result.update(failed_hosts=failing, failures={h: format_failure(self.failures[h]) for h in failing})
        return _failed(msg=format_failures([self.failures[h] for h in failing], built), **result)

    def _run_steps(self, runnable: list[BuildStep]) -> dict[str, dict[str, Any]]:
        """Every runnable build; host -> its outcome."""
        if not runnable:
            return {}
        plan = self.plan
        native = plan.docker_service is None
        # Target dirs live under the checkout (flodl_project_dir), which is their root, not controller.path.
        root = plan.project_dir or plan.project_root
        # Before any build: stops every build's group if this process dies (killed, or its parent is gone).
        watch = start_watch(KILL_GRACE_SECONDS, os.getppid())
        try:
            return _run_all(runnable, lambda step: run_step(
                step, self.extra_env, native, self.tail_count, self.timeout, root, watch))
        finally:
            if watch is not None:
                watch.done()

    def _settle(self, runnable: list[BuildStep], ran: dict[str, dict[str, Any]]) -> bool:
        """Each host's entry from its step's outcome (hosts sharing a build get a link); whether anything changed."""
        changed = False
        for step in runnable:
            out = ran[step.host]
            for host in step.hosts:
                entry = self.hosts[host]
                entry.update({k: out[k] for k in ("rc", "seconds", "started", "ended", "tail")})
                if out["error"] is not None:
                    entry["changed"] = False
                    if host == step.host:
                        self._fail_host(host, HostFailure(host, step.arch, out["error"], command=step.command,
                                                          cwd=step.cwd, log=step.log_path, tail=tuple(out["tail"])))
                    else:
                        self._fail_host(host, HostFailure(
                            host, step.arch, f"shares the build of host {step.host} (same variant), which failed"
                        ))
                    continue
                if host == step.host:
                    entry["status"] = out["status"]
                    entry["changed"] = out["changed"]
                else:
                    dest = entry["binary"]
                    try:
                        linked = link_binary(step.binary, dest)
                    except OSError as exc:
                        self._fail_host(host, HostFailure(host, step.arch, f"could not link {step.binary} to {dest}: {exc}"))
                        entry["changed"] = False
                        continue
                    entry["status"] = "linked"
                    entry["changed"] = linked
                changed = changed or entry["changed"]
        return changed


def _run_all(runnable: list[BuildStep], run: Any) -> dict[str, dict[str, Any]]:
    """``run`` each step; host -> its outcome."""
    # A first build fills the shared cargo registry, so it runs alone; once its binary exists (a rebuild,
    # a no-op) every build runs at once, as cargo's own locks keep concurrent builds safe.
    ran: dict[str, dict[str, Any]] = {}
    rest = runnable
    if not os.path.isfile(runnable[0].binary):
        first = run(runnable[0])
        ran[first["host"]] = first
        rest = runnable[1:]
    if rest:
        with ThreadPoolExecutor(max_workers=len(rest)) as pool:
            for out in pool.map(run, rest):
                ran[out["host"]] = out
    return ran
