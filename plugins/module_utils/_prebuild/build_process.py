# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One prebuild step as a process: its environment, its time bound, its log under the target dir.

Runs on the build host (inside the cargo_prebuild module, or in the action's process when the build
host is the controller). Processes start through group_watch, which owns every Popen.
"""
from __future__ import annotations

import datetime
import errno
import os
import pwd
import shutil
import signal
import subprocess
import time
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._files.file_modes import (
    BIN_MODE,
    BUILD_UMASK,
    set_exact_mode,
    tighten_tree,
    with_umask,
)
from ansible_collections.flodl.cluster.plugins.module_utils._core.group_watch import GroupWatch, release, start_group
from ansible_collections.flodl.cluster.plugins.module_utils._run.prebuild import BuildStep
from ansible_collections.flodl.cluster.plugins.module_utils._prebuild.prebuild_failures import exit_reason, tail_lines, timeout_reason
from ansible_collections.flodl.cluster.plugins.module_utils._files.project_dirs import make_dirs_under
from ansible_collections.flodl.cluster.plugins.module_utils._files.safe_files import open_log

# After SIGTERM, how long a build's process group gets before SIGKILL.
KILL_GRACE_SECONDS = 10


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")


def _file_id(path: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _build_environ(extra: dict[str, str], step_env: dict[str, str], native: bool) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    env.update(step_env)
    if native and shutil.which("cargo", path=env.get("PATH", "")) is None:
        home = os.environ.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir
        rustup_bin = os.path.join(home, ".cargo", "bin")
        if os.path.isfile(os.path.join(rustup_bin, "cargo")):
            env["PATH"] = f"{env['PATH']}:{rustup_bin}" if env.get("PATH") else rustup_bin
    return env


def os_error_text(exc: OSError) -> str:
    text = exc.strerror if isinstance(exc.strerror, str) else str(exc)
    return f"{exc.filename}: {text}" if exc.filename else text


def _run_bounded(argv: list[str], cwd: str, env: dict[str, str], log: Any, timeout: float,
                 watch: GroupWatch | None = None) -> int | None:
    """Run ``argv`` under GNU ``timeout``; None when it ran out of time.

    ``timeout`` puts the build in its own process group and signals the whole group on expiry
    (the shell, cargo, rustc, build scripts), then SIGKILLs it after the grace period. The group is
    its own session too, and ``watch`` (started before any build) stops it if this process dies.
    """
    tool = shutil.which("timeout", path=env.get("PATH") or os.defpath) or shutil.which("timeout")
    if tool is None:
        raise OSError(errno.ENOENT, "the build host has no `timeout` command (GNU coreutils), which bounds every "
                      "build; install coreutils there")
    if watch is not None and not watch.alive():
        # The watcher fired (ansible-playbook is gone) or ended: a build started now would outlive the run.
        raise OSError(errno.ECANCELED, "the run was stopped (its ansible-playbook is gone); no new build starts")
    started = time.monotonic()
    # Not module.run_command: builds run concurrently in threads, each
    # streaming straight into its own log file rather than into memory.
    proc = start_group([tool, "--signal=TERM", f"--kill-after={KILL_GRACE_SECONDS}", f"{timeout:g}", *argv],
                       cwd, env, log)
    if watch is not None:
        watch.add(proc.pid)
    release(proc)  # only now: a kill before this line leaves no build behind (group_watch's gate)
    try:
        # Backstop only: should `timeout` itself hang, stop waiting for it.
        rc = proc.wait(timeout=timeout + KILL_GRACE_SECONDS + 60)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        proc.wait()
        return None
    finally:
        if watch is not None:
            watch.remove(proc.pid)
    elapsed = time.monotonic() - started
    # 124: timed out; 137 (128 + KILL): still running after the grace period.
    if rc in (124, 137, -9) and elapsed >= timeout:
        return None
    return rc


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


LOW_DISK_BYTES = 256 * 1024 * 1024  # below this, a failed build's cause is most likely the full disk


def disk_note(path: str) -> str:
    """A full disk shows up as cargo's or the linker's own error (``Bus error``, a truncated file): say it."""
    try:
        stat = os.statvfs(path)
    except OSError:
        return ""
    free = stat.f_bavail * stat.f_frsize
    if free >= LOW_DISK_BYTES:
        return ""
    return (f"; the file system holding {path} has only {free // (1024 * 1024)} MiB free, which is most likely why: "
            "free space there (an old target/ directory, cargo's cache) and build again")


def run_step(
    step: BuildStep, extra_env: dict[str, str], native: bool, tail_count: int, timeout: float, project_root: str,
    watch: GroupWatch | None = None,
) -> dict[str, Any]:
    """Run one build to completion or its timeout, logging everything to ``<target dir>/prebuild.log``."""
    out = step.as_dict()
    before = _file_id(step.binary)
    started_mono = time.monotonic()
    out["started"] = _now()
    output = ""
    rc: int | None = 127
    log = None
    try:
        # Every component checked before the next is created: never through a link out of the checkout.
        target_dir = make_dirs_under(project_root, step.target_rel)
        # Created without following links and never world-readable (flodl_safe_files).
        log = open_log(step.log_path, truncate=True)
        log.write(f"# flodl prebuild for {', '.join(step.hosts)} ({step.arch})\n")
        log.write(f"# started: {out['started']}\n# cwd: {step.cwd}\n")
        for key in sorted(step.env):
            log.write(f"# env: {key}={step.env[key]}\n")
        log.write(f"# umask: {BUILD_UMASK:03o}\n# command: {step.command}\n")
        log.flush()
        offset = log.tell()
        # cargo honours the umask: an explicit one, so that no output of the build is group- or world-writable.
        rc = _run_bounded(["sh", "-c", with_umask(step.command)], step.cwd, _build_environ(extra_env, step.env, native),
                          log, timeout, watch)
        # What an earlier build left under a looser umask, and the binary every worker runs, set explicitly.
        tighten_tree(target_dir)
        set_exact_mode(step.binary, BIN_MODE)
        log.flush()
        log.seek(offset)
        output = log.read()
        if rc is None:
            error = timeout_reason(timeout)
        elif rc != 0:
            error = exit_reason(rc) + disk_note(target_dir)
        elif not os.path.isfile(step.binary):
            error = f"build exited 0 but did not produce {step.binary}"
        else:
            error = None
    except OSError as exc:
        rc = 127
        error = f"could not run the build: {os_error_text(exc)}"
        output = output or error
    out["ended"] = _now()
    out["seconds"] = round(time.monotonic() - started_mono, 3)
    if log is not None:
        try:
            log.write(f"\n# ended: {out['ended']} rc={rc} ({out['seconds']}s){'' if error is None else ' ' + error}\n")
            log.close()
        except OSError:
            pass
    out["rc"] = rc
    out["tail"] = tail_lines(output, tail_count)
    out["error"] = error
    out["changed"] = error is None and _file_id(step.binary) != before
    if error is not None:
        out["status"] = "failed"
    else:
        out["status"] = "built" if out["changed"] else "up to date"
    return out
