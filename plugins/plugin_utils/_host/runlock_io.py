# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Take the controller's run lock for this ansible-playbook run (policy in module_utils._run.runlock).

The lock is a lease. Once taken here, a holder process (plugin_utils._proc.lock_holder, ``--lease``) renews
it while ansible-playbook lives and removes it when ansible-playbook ends, however it ends, if the
lock still holds this run's id. A kill of everything (a deleted pod) leaves the lock, which any
controller reads as over once its lease lapses (``flodl_run_lock_ttl``, 60 s by default).
"""
from __future__ import annotations

import getpass
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from typing import Any

from ansible.utils.display import Display

from ansible_collections.flodl.cluster.plugins.module_utils._run import runlock
from ansible_collections.flodl.cluster.plugins.module_utils._files.file_modes import FILE_MODE
from ansible_collections.flodl.cluster.plugins.module_utils._run.identity import controller_hostname
from ansible_collections.flodl.cluster.plugins.module_utils._files.project_dirs import make_dirs_under
from ansible_collections.flodl.cluster.plugins.module_utils._files.safe_files import UnsafePathError, atomic_write, create_exclusive
from ansible_collections.flodl.cluster.plugins.module_utils._files.safe_reads import read_capped
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_launch import RemoteLaunchError
from ansible_collections.flodl.cluster.plugins.plugin_utils._host import launch_host as lhio
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc import lock_holder
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import RunContext, read_run
from ansible_collections.flodl.cluster.plugins.plugin_utils._host.launch_target import launch_host_of
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.processes import run_for_output

display = Display()

LOCK_NAME = os.path.basename(runlock.LOCK_FILE_REL)


def pid_space() -> str | None:
    """``<boot id>:<pid namespace inode>`` of this process: where a pid in the lock names the same process."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            boot = fh.read().strip()
        return f"{boot}:{os.stat('/proc/self/ns/pid').st_ino}" if boot else None
    except (OSError, UnicodeDecodeError):
        return None


def fs_now(directory: str) -> float:
    """The clock of the file system holding ``directory``: the mtime of a file created there now."""
    fd, path = tempfile.mkstemp(prefix=".run.lock.clock.", dir=directory)
    try:
        return os.fstat(fd).st_mtime
    finally:
        os.close(fd)
        os.unlink(path)


def take_lock(project_dir: str, controller_host: str, holder_pid: int, *, run_id: str | None = None,
              ttl: int = runlock.DEFAULT_TTL) -> tuple[str | None, list[str], bool]:
    """(refusal message or None, warnings, newly written). On None the lock is this run's."""
    # Never through a link out of the project (<project>/target -> elsewhere): checked before anything is written.
    directory = make_dirs_under(project_dir, os.path.dirname(runlock.LOCK_FILE_REL))
    space = pid_space()
    record = runlock.LockRecord(
        run_id=run_id or runlock.new_run_id(), controller_host=controller_host, pid=holder_pid, started=time.time(),
        project=project_dir, user=getpass.getuser() or "unknown", ttl=ttl, space=space,
        pid_start=lock_holder.process_start(holder_pid),
    )
    if create_exclusive(directory, LOCK_NAME, record.to_json(), FILE_MODE):
        return None, [], True
    path = os.path.join(directory, LOCK_NAME)
    try:
        # A FIFO or a huge file planted there must neither block nor fill memory.
        held, problem = runlock.parse_lock(read_capped(path, runlock.MAX_LOCK_BYTES, follow=False))
    except OSError as exc:
        held, problem = None, f"unreadable ({exc.strerror or exc})"
    try:
        age: float | None = fs_now(directory) - os.lstat(path).st_mtime
    except OSError:
        age = None  # no clock to read: the lease counts as live
    warnings: list[str] = []
    if held is None:
        warnings.append(f"run lock {path}: {problem}; taking it over")
    else:
        if held.run_id == record.run_id:
            return None, [], False  # this run already holds it (launch after cluster_train's first step)
        checkable = runlock.pid_checkable(held, controller_host, space)
        start = (lock_holder.process_start(held.pid) or "") if checkable else None
        stale = runlock.stale_reason(held, this_host=controller_host, this_space=space, lease_age=age,
                                     holder_start=start)
        if stale is None:
            this_run = runlock.this_run_text(controller_host, record.run_id)
            return runlock.refusal_message(project_dir, {}, held, this_run=this_run, lease_age=age), [], False
        warnings.append(f"run lock {path}: the previous holder's lock is stale ({stale}); taking it over")
    atomic_write(directory, LOCK_NAME, record.to_json(), FILE_MODE)
    return None, warnings, True


def keep_lease(path: str, run_id: str, playbook_pid: int, ttl: int) -> None:
    """Start the holder that renews the lease while ``playbook_pid`` lives, then releases it (its own session).

    The path travels in its environment, which holds nothing else: a search of the machine for the run's
    processes (the project's build paths on a command line, a job's variables) never finds the holder.
    """
    start = lock_holder.process_start(playbook_pid) or ""
    subprocess.Popen(
        [sys.executable, "-I", "-S", lock_holder.__file__, lock_holder.LEASE, str(playbook_pid), start, run_id,
         str(runlock.renew_seconds(ttl))],
        env={lock_holder.PATH_VARIABLE: path}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True, cwd="/")


def lock_for_action(action: Any, task_vars: Mapping[str, Any], ctx: RunContext,
                    project_dir: str | None = None) -> tuple[bool, str | None]:
    """Take the project's lock for this ansible-playbook run from an action plugin: (taken, refusal).

    Not in check mode, nor with ``flodl_run_lock=false``. Keyed by the controller's identity
    (``FLODL_HOST_NAME``, else the host name: the one the whole run uses) and this run's id; the
    holder pid is ansible-playbook (the worker's parent). Warnings (a stale lock taken over) are shown.
    """
    project_dir = ctx.project_dir if project_dir is None else project_dir
    if action._task.check_mode or not ctx.settings.run_lock:
        return False, None
    if launch_host_of(ctx, task_vars, action._templar) is not None:
        return _lock_on_launch_host(action, task_vars, project_dir)
    ttl = ctx.settings.run_lock_ttl
    run_id = lhio.this_run_id()
    identity = runlock.lock_name(controller_hostname(os.environ, run_for_output))
    try:
        refusal, warnings, written = take_lock(project_dir, identity, os.getppid(), run_id=run_id, ttl=ttl)
    except UnsafePathError as exc:
        return False, f"controller: run lock: {exc.strerror}"
    for warning in warnings:
        display.warning(warning)
    if written:
        keep_lease(runlock.lock_path(project_dir), run_id, os.getppid(), ttl)
    return refusal is None, refusal


def _lock_on_launch_host(action: Any, task_vars: Mapping[str, Any], project_dir: str) -> tuple[bool, str | None]:
    """The same lock on the launch host (the controller there), in a session of its own that holds it."""
    try:
        session = lhio.start(action, task_vars, read_run(action, task_vars, ["launch"], connections=False),
                             lock=True, reach=False)
    except RemoteLaunchError as exc:
        return False, f"controller: {exc}"
    if session is None:
        return False, None
    found = lhio.finish(session, project_dir, 30.0)
    for warning in found.warnings:
        display.warning(warning)
    return not found.errors, "; ".join(found.errors) or None
