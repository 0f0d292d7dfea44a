# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight sweep's I/O: local checks, one parallel ssh per worker, the build host's arch.

What counts as a problem is decided in module_utils._preflight.preflight_findings/preflight_verdict; this file
only gathers the facts those functions judge.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Optional, Protocol

from ansible_collections.flodl.cluster.plugins.module_utils._probe import preflight_probe as pf_probe
from ansible_collections.flodl.cluster.plugins.module_utils._preflight import preflight_verdict as pf_verdict
from ansible_collections.flodl.cluster.plugins.module_utils._probe import check_registry
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import DATA_PATH, TARGET_DIR, Ask
from ansible_collections.flodl.cluster.plugins.module_utils._run.prebuild_layout import TARGET_CLUSTER_REL, path_under
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.sshreuse import with_reuse
from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import join_posix
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.ssh import probe_argv
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import effective_data_path
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import RunContext, is_local_host, ssh_block_of
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.processes import run_probes
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.probe_here import probe_here

if TYPE_CHECKING:
    from ansible_collections.flodl.cluster.plugins.plugin_utils._host.launch_host import SessionResult


class LaunchFollows(Protocol):
    """What the sweep asks of a launch that follows (plugin_utils._launch.preflight_launch, passed in by the action)."""

    reuse_dir: Optional[str]

    def live_binary(self, host: str) -> Optional[str]: ...

    def finish(self, timeout: float) -> Optional[SessionResult]: ...

    def judge(self, host: str, running: Optional[int], report: dict[str, Any]) -> None: ...


BUILD_HOST_JOB = "\x00build-host"  # cannot clash with an inventory host name


def local_arch() -> str:
    """This machine's CPU arch, read by the same part and parser as every other host's ("" when it said none)."""
    return probe_here(Ask(arch=True))[0].uname or ""


def target_dirs(ctx: RunContext) -> tuple[str, ...]:
    """Where the builds write on the build host, the first that exists measured: target/cluster, target, the root."""
    root = ctx.project_root
    return (path_under(root, TARGET_CLUSTER_REL), path_under(root, "target"), path_under(root, ""))


def local_gpu_text() -> str:
    """What the GPU count part printed here, or why it could not run (check_gpus says so)."""
    said, error = probe_here(Ask(gpus=True))
    return (said.gpus or "") if error is None else f"could not run the GPU count: {error}"


def controller_report(ctx: RunContext, launch: SessionResult | None = None) -> dict[str, Any]:
    """The controller's own checks: here, or on the launch host when there is one (its session's answers)."""
    path, declared = effective_data_path(ctx.cluster.controller.data_path)
    checks = check_registry.armed(ctx.settings, DATA_PATH)
    if launch is None:
        here = probe_here(Ask(data_path=path), checks)[0]
        report = pf_verdict.controller_report(ctx.controller_identity, path, declared, bool(here.dir_ok),
                                              bool(here.read_ok), here.answers, checks)
    elif not launch.facts.complete:
        report = pf_verdict.controller_report(launch.host, path, declared, True, True)
        report["data_path"]["state"] = "unknown"
    else:
        report = pf_verdict.controller_report(launch.facts.identity or launch.host, path, declared,
                                              bool(launch.facts.dir_ok), bool(launch.facts.read_ok),
                                              launch.facts.answers, checks)
    if launch is not None:
        report["launch_host"] = launch.host
        report["errors"] = [*launch.errors, *report["errors"]]
        report["warnings"] = [*launch.warnings, *report["warnings"]]
        pf_probe.restatus(report)
    report["controller"] = True
    return report


def sweep(
    ctx: RunContext,
    *,
    build_arch: str | None,
    build_host_argv: list[str] | None,
    timeout: float,
    max_parallel: int,
    follow: LaunchFollows | None = None,
    require_all: bool = False,
) -> dict[str, Any]:
    """Probe the play's workers (and the build host's arch when it is remote) in one parallel round.

    ``follow``: the launch after this preflight (plugin_utils._launch.preflight_launch), started before. It adds
    the run-lock check to the same probes, reads the launch host's session once the workers answered,
    and judges each worker for the launch; each probe leaves a master connection in its ``reuse_dir``
    for the launcher's fan-out (module_utils._ssh.sshreuse). ``require_all``: a worker whose probe could not run
    fails (``flodl_preflight_require_all``) instead of warning. The armed probe checks
    (module_utils._probe.check_registry) run on each data path and on the build host's target dir.
    """
    checks = check_registry.armed(ctx.settings, DATA_PATH)
    target_checks = check_registry.armed(ctx.settings, TARGET_DIR) if ctx.prebuild else ()
    reuse_dir = follow.reuse_dir if follow is not None else None
    jobs: dict[str, list[str]] = {}
    plans: dict[str, tuple[str, bool]] = {}
    for worker in ctx.remotes:
        if not ctx.in_play(worker.host):
            continue
        path, declared = effective_data_path(worker.data_path)
        plans[worker.host] = (path, declared)
        if ctx.reached_by_ansible(worker.host):
            continue  # walk_in over a non-ssh connection: flodl's ssh cannot reach it (its report says so)
        ask = Ask(data_path=path, project=worker.path or None, prebuilt=ctx.prebuild, gpus=worker.all_devices,
                  running=follow.live_binary(worker.host) if follow is not None else None)
        script = pf_probe.probe_script(ask, checks)
        jobs[worker.host] = probe_argv(with_reuse(worker.document, reuse_dir), pf_probe.remote_command(script),
                                       ctx.project_dir)
    warnings: list[str] = []
    if build_host_argv is not None and jobs:
        jobs[BUILD_HOST_JOB] = build_host_argv
    # A bounded number at once, each probe its whole timeout (plugin_utils._proc.processes.probe_bounds).
    results = run_probes(jobs, timeout=timeout, max_parallel=max(1, max_parallel))
    build_answers: dict[str, Any] = {}
    if BUILD_HOST_JOB in results:
        probe = results.pop(BUILD_HOST_JOB)
        said = pf_probe.parse_probe(probe.stdout if probe.ok else "")
        answer, build_answers = said.uname or "", said.answers
        if answer and not build_arch:
            build_arch = answer
        elif not answer:
            why = probe.error or pf_probe.last_line(probe.stderr) or f"exit {probe.returncode}"
            warnings.append(
                f"build host {ctx.build_host}: could not read its CPU arch ({why}); the arch part of the "
                "ABI check was skipped. Make it reachable over ssh or set flodl_build_arch."
                if not build_arch else f"build host {ctx.build_host}: its probe did not answer ({why}), so its "
                f"{check_registry.unanswered(target_checks)}. Make it reachable over ssh."
            )
    elif target_checks and build_host_argv is None:
        build_answers = probe_here(Ask(), target_checks, target_dirs(ctx))[0].answers

    launch = follow.finish(timeout) if follow is not None else None
    controller = controller_report(ctx, launch)
    pf_verdict.add_findings(controller, check_registry.findings(f"build host {ctx.build_host}", build_answers,
                                                                target_checks, TARGET_DIR))
    reports: dict[str, dict[str, Any]] = {}
    for worker in ctx.cluster.workers:
        host = worker.host
        if not ctx.in_play(host):
            continue
        if host == ctx.controller_identity:
            gpu_text = local_gpu_text() if worker.all_devices else None
            reports[host] = pf_verdict.local_worker_report(worker, controller, local_arch(), gpu_text)
            continue
        path, declared = plans[host]
        connection = ctx.reached_by_ansible(host)
        if connection:
            reports[host] = pf_verdict.ansible_worker_report(worker, connection, path, declared)
            continue
        res = results[host]
        said = pf_probe.parse_probe(res.stdout or "")  # once: the verdict's, and the live count a launch judges
        report = pf_verdict.evaluate_remote(
            worker, data_path=path, declared=declared, prebuild=ctx.prebuild, build_arch=build_arch,
            returncode=res.returncode, stdout=res.stdout, stderr=res.stderr, error=res.error,
            require_reached=require_all, checks=checks, probe=said,
        )
        report.update(target=jobs[host][-2], probe_command=join_posix(jobs[host]), seconds=round(res.seconds, 3))
        if follow is not None:
            follow.judge(host, said.running if res.ok else None, report)
        reports[host] = report
    return {"controller": controller, "hosts": reports, "build_arch": build_arch, "warnings": warnings}


def build_host_arch(action: Any, task_vars: Mapping[str, Any], ctx: RunContext,
                    given: str | None) -> tuple[str | None, list[str] | None]:
    """(the build host's arch when known here, else the argv that reads it during the sweep).

    A remote build host runs the armed probe checks of its target dir in the same ssh; a local one is measured by
    the sweep itself.
    """
    if not ctx.prebuild:
        return given, None
    if ctx.build_host == ctx.controller_identity or is_local_host(ctx.build_host, task_vars, action._templar):
        return given or local_arch(), None
    checks = check_registry.armed(ctx.settings, TARGET_DIR)
    if given and not checks:
        return given, None
    script = pf_probe.remote_command(pf_probe.probe_script(Ask(arch=True), checks, target_dirs(ctx)))
    target = {"host": ctx.build_host, "ssh": ssh_block_of(action, task_vars, ctx.build_host)}
    return given, probe_argv(target, script, ctx.project_dir)
