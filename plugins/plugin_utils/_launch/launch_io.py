# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the launch and teardown steps read from this play and from disk.

One reader for the prebuild envelope (launch and teardown agree on where it
comes from), the GPU counts of ``local_devices: all`` workers, and the compose
overlay file.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ansible.utils.display import Display

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.variants import GpuCounts
from ansible_collections.flodl.cluster.plugins.module_utils._launch import compose_overlay as co
from ansible_collections.flodl.cluster.plugins.module_utils._launch import launch_command as lc
from ansible_collections.flodl.cluster.plugins.module_utils._launch import launch_env as le
from ansible_collections.flodl.cluster.plugins.module_utils._files.file_modes import FILE_MODE, PRIVATE_DIR_MODE, make_dirs
from ansible_collections.flodl.cluster.plugins.module_utils._launch.libtorch_env import read_libtorch_env
from ansible_collections.flodl.cluster.plugins.module_utils._files.logsink import LogSink
from ansible_collections.flodl.cluster.plugins.module_utils._probe.gpu_count import parse_gpu_counts
from ansible_collections.flodl.cluster.plugins.module_utils._probe.preflight_probe import (
    parse_probe, probe_script, remote_command)
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import Ask
from ansible_collections.flodl.cluster.plugins.module_utils._run.prebuild_layout import ENVELOPE_FILE_REL, envelope_json
from ansible_collections.flodl.cluster.plugins.module_utils._files.safe_files import atomic_write, open_log
from ansible_collections.flodl.cluster.plugins.module_utils._core.vault_redact import redact_bytes
from ansible_collections.flodl.cluster.plugins.module_utils._files.safe_reads import (
    ENVELOPE_MAX,
    FDL_FILE_MAX,
    read_capped,
    read_capped_text,
)
from ansible_collections.flodl.cluster.plugins.module_utils._core.safety import resolved_under
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.ssh import probe_argv
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.module_utils._run.ansible_flags import launch_verbosity
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import RunContext
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.processes import run_parallel
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.probe_here import probe_here

# Registered by the prebuild role's build step.
PREBUILD_RESULT_VAR = "flodl_prebuild_run"
PREFLIGHT_RESULT_VAR = "flodl_preflight_run"
LOG_DIR_REL = "target/cluster/logs"  # the default launch log directory, under the project


def read_envelope(ctx: RunContext, given: Any, play_result: Any) -> tuple[str | None, str | None]:
    """(compact envelope JSON, where it came from); ``(None, None)`` when there is none.

    In this order: the task argument, this play's prebuild result, the file an
    earlier prebuild left under the project. Without prebuild there is none.
    """
    if not ctx.prebuild:
        return None, None
    value, source = given, "task argument prebuild_envelope"
    if value is None and isinstance(play_result, Mapping) and not play_result.get("skipped"):
        value, source = play_result.get("envelope"), f"this play's prebuild ({PREBUILD_RESULT_VAR})"
    if value is None:
        path = lc.join_root(ctx.project_dir, ENVELOPE_FILE_REL)
        try:
            value = json.loads(read_capped_text(path, ENVELOPE_MAX, follow=False))
        except FileNotFoundError:
            return None, None
        except (OSError, ValueError) as exc:
            # A FIFO, a device or a huge file is refused unread (bounded time and memory), and said.
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else f"{path} is not valid JSON"
            Display().warning(f"prebuild envelope not used: {why}")
            return None, None
        source = f"file {path} (left by an earlier prebuild)"
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            return None, None
    if not isinstance(value, Mapping):
        return None, None
    return (envelope_json(value) if value else None), source


def local_gpu_counts() -> GpuCounts | None:
    """This machine's GPU counts, by preflight's own GPU part run here; None when it failed."""
    said, error = probe_here(Ask(gpus=True))
    try:
        return parse_gpu_counts(said.gpus or "") if error is None else None
    except ValueError:
        return None


def gpu_counts(ctx: RunContext, preflight: Any) -> tuple[dict[str, GpuCounts], bool]:
    """The GPU counts of each ``all`` worker, and whether ssh was needed: preflight's counts, else one sweep."""
    wanted = [w for w in ctx.cluster.workers if w.all_devices]
    reported = (preflight.get("hosts") or {}) if isinstance(preflight, Mapping) else {}
    counts: dict[str, GpuCounts] = {}
    for worker in wanted:
        found = GpuCounts.from_dict((reported.get(worker.host) or {}).get("gpus"))
        if found is not None:
            counts[worker.host] = found
    missing = [w for w in wanted if w.host not in counts]
    problems: list[str] = []
    if any(w.host == ctx.controller_identity for w in missing):
        local = local_gpu_counts()
        if local is None:
            problems.append(f"host {ctx.controller_identity}: the local GPU count script failed")
        else:
            counts[ctx.controller_identity] = local
    remote = [w for w in missing if w.host != ctx.controller_identity]
    count = remote_command(probe_script(Ask(gpus=True)))  # the workers' GPU part, as preflight runs it
    jobs = {w.host: probe_argv(w.document, count, ctx.project_dir) for w in remote}
    for host, res in run_parallel(jobs, timeout=30.0 * float(ctx.net_timeout_scale or 1.0)).items():
        if not res.ok:
            why = res.error or f"ssh exited {res.returncode}: {res.stderr.strip()[-300:]}"
            problems.append(f"host {host}: counting GPUs for `local_devices: all` failed: {why}")
            continue
        try:
            counts[host] = parse_gpu_counts(parse_probe(res.stdout).gpus or "")
        except ValueError as exc:
            problems.append(f"host {host}: counting GPUs for `local_devices: all` failed: {exc}")
    if problems:
        raise TopologyError(problems)
    return counts, bool(remote)


def services_missing(root: str) -> list[str]:
    """Overlay services the project's base compose file does not define ([] when it cannot be read)."""
    try:
        import yaml

        text = read_capped_text(lc.join_root(root, co.BASE_COMPOSE_FILE), FDL_FILE_MAX)
        services = (yaml.safe_load(text) or {}).get("services") or {}
    except Exception:  # noqa: BLE001  (advisory check only)
        return []
    return [s for s in co.OVERLAY_SERVICES if s not in services]


def write_overlay(path: str, content: str, warnings: list[str]) -> bool | None:
    """True when written, False when already current, None when it could not be written.

    Written with safe_files.atomic_write: an unpredictable temporary name created exclusively in the
    project, then renamed over the overlay. A symlink planted at the overlay's path is refused (its
    target is never opened for writing) and the launch runs without the overlay, with a warning.
    """
    try:
        if read_capped(path, len(content.encode("utf-8")), follow=False) == content.encode("utf-8"):
            return False
    except (OSError, UnicodeDecodeError):
        pass
    try:
        atomic_write(os.path.dirname(path) or ".", os.path.basename(path), content, FILE_MODE)
    except (OSError, ValueError) as exc:
        warnings.append(
            f"controller: could not write the compose overlay {path}: {exc}; docker compose runs without extra_hosts"
        )
        return None
    return True


def launch_inputs(ctx: RunContext, *, gpu_counts: Mapping[str, GpuCounts], host_user: str | None,
                  docker_service: str | None, container_root: str, envelope_text: str | None, testing: bool,
                  guarded: bool, ssh_reuse_dir: str | None = None, ansible_verbosity: int = 0,
                  local_counts: GpuCounts | None = None) -> le.LaunchInputs:
    """Everything the launch environment depends on, read from the run model and this machine.

    ``local_counts`` stands in for this box's GPU count (the check before contact does not run the probe).
    """
    return le.LaunchInputs(
        cluster=ctx.cluster.document,  # rendered: the topology shipped to flodl's launcher
        project_root=ctx.project_root.rstrip("/") or "/", cmd=str(ctx.cmd), cmd_dir=ctx.cmd_dir,
        gpu_counts=gpu_counts, controller_env=dict(os.environ), fdl_env=ctx.fdl_env, host_user=host_user,
        launch_command=ctx.launch_command, docker_service=docker_service, container_root=container_root,
        prebuild_envelope_json=envelope_text, net_timeout_scale=ctx.net_timeout_scale, testing_cluster=testing,
        local_gpu_counts=local_counts or (_testing_counts(ctx, gpu_counts) if testing and not guarded else None),
        project_dir=ctx.project_dir, controller_identity=ctx.controller_identity,
        libtorch=read_libtorch_env(ctx.project_dir, ctx.controller_identity, ctx.cluster.workers, os.environ),
        ssh_reuse_dir=ssh_reuse_dir, cmd_run=ctx.cmd_run, connect_timeout=ctx.connect_timeout,
        verbosity=launch_verbosity(ansible_verbosity, os.environ, ctx.cluster.env),
        ansible_only=frozenset(ctx.ansible_only),
    )


def _testing_counts(ctx: RunContext, gpu_counts: Mapping[str, GpuCounts]) -> GpuCounts | None:
    """This box's GPU count for the testing JSON, which gives it to every ``all`` worker: none without such a
    worker; the count already taken for the controller's own ``all`` worker; else the count script, here."""
    if not any(w.all_devices for w in ctx.cluster.workers):
        return None
    return gpu_counts.get(ctx.controller_identity) or local_gpu_counts()


def apply_overlay(plan: le.LaunchPlan, project_dir: str, check: bool, warnings: list[str]) -> bool:
    """Write the compose overlay the plan needs (not in check mode); whether the file changed.

    A failed write runs compose without it, as fdl-cli does.
    """
    missing = services_missing(project_dir) if plan.overlay_path else []
    if missing:
        warnings.append(
            f"controller: {co.BASE_COMPOSE_FILE} defines no {', '.join(missing)} service; the generated "
            f"{co.OVERLAY_NAME} adds extra_hosts to cuda, dev and bench (as fdl-cli does), and docker compose "
            "refuses a service without an image: add the missing service(s)")
    if not plan.overlay_path or plan.overlay is None or check:
        return False
    changed = write_overlay(plan.overlay_path, plan.overlay, warnings)
    if changed is None:
        plan.command = plan.command.replace(co.compose_overlay_flags(plan.overlay_path), "", 1)
        plan.overlay_path = None
        return False
    return changed


def open_launch_log(log_dir: str, stamp: str, warn: Callable[[str], None], secrets: Sequence[str] = ()) -> LogSink:
    """A new 0640 log under ``log_dir`` (never opened through a planted symlink: rank output may hold secrets).

    A full disk later only stops the log, never the run (LogSink). Raises OSError when it cannot be created.
    ``secrets`` (vaulted values) are withheld from every line written.
    """
    make_dirs(log_dir, PRIVATE_DIR_MODE)  # modes set explicitly: a umask 000 must not make it group-writable
    path = os.path.join(log_dir, f"launch-{stamp}-{os.getpid()}.log")
    scrub = (lambda data: redact_bytes(data, secrets)) if secrets else None
    return LogSink(open_log(path, binary=True), path, warn, scrub)


def log_dir_of(ctx: RunContext, given: str | None) -> tuple[str, list[str]]:
    """The launch log directory, and the problem when the default one is not safe to write to.

    The default lies in a shared project: a symlink planted at target/cluster/logs (or above it) would make
    this run create its log wherever the link points. A directory the operator gave is theirs to trust.
    """
    if given:
        return given, []
    log_dir = lc.join_root(ctx.project_dir.rstrip("/") or "/", LOG_DIR_REL)
    if resolved_under(ctx.project_dir, log_dir):
        return log_dir, []
    return log_dir, [
        f"controller: the launch log directory {log_dir} resolves to {os.path.realpath(log_dir)}, outside the "
        f"project {ctx.project_dir} (a symbolic link in its path); refusing to write the log there. Remove the "
        "link (and check who made it), or set flodl_launch_log_dir to a directory you trust"]
