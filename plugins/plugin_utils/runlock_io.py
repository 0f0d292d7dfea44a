# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Take the controller's run lock for this ansible-playbook run (policy in module_utils.runlock).

The holder is the ansible-playbook process itself, so the lock ends with it,
however it ends: a later run finds the pid gone and takes the lock over. No
release task is needed, and a killed job never leaves a lock that blocks.
"""
from __future__ import annotations

import getpass
import os
import socket
import time
from collections.abc import Mapping
from typing import Any

from ansible.utils.display import Display

from ansible_collections.flodl.cluster.plugins.module_utils import runlock
from ansible_collections.flodl.cluster.plugins.module_utils.file_modes import FILE_MODE
from ansible_collections.flodl.cluster.plugins.module_utils.project_dirs import make_dirs_under
from ansible_collections.flodl.cluster.plugins.module_utils.safe_files import UnsafePathError, atomic_write, create_exclusive
from ansible_collections.flodl.cluster.plugins.module_utils.safe_reads import read_capped
from ansible_collections.flodl.cluster.plugins.module_utils.remote_launch import RemoteLaunchError
from ansible_collections.flodl.cluster.plugins.plugin_utils import launch_host as lhio
from ansible_collections.flodl.cluster.plugins.plugin_utils.context import read_run, run_lock_enabled
from ansible_collections.flodl.cluster.plugins.plugin_utils.launch_target import launch_host_of
from ansible_collections.flodl.cluster.plugins.plugin_utils.sshreuse_watch import pid_alive

display = Display()

LOCK_NAME = os.path.basename(runlock.LOCK_FILE_REL)


def take_lock(project_dir: str, controller_host: str, holder_pid: int) -> tuple[str | None, list[str]]:
    """(refusal message or None, warnings). On None the lock is ours."""
    # Never through a link out of the project (<project>/target -> elsewhere): checked before anything is written.
    directory = make_dirs_under(project_dir, os.path.dirname(runlock.LOCK_FILE_REL))
    record = runlock.LockRecord(
        run_id=runlock.new_run_id(), controller_host=controller_host, pid=holder_pid, started=time.time(),
        project=project_dir, user=getpass.getuser() or "unknown",
    )
    if create_exclusive(directory, LOCK_NAME, record.to_json(), FILE_MODE):
        return None, []
    path = os.path.join(directory, LOCK_NAME)
    try:
        # A FIFO or a huge file planted there must neither block nor fill memory.
        held, problem = runlock.parse_lock(read_capped(path, runlock.MAX_LOCK_BYTES, follow=False))
    except OSError as exc:
        held, problem = None, f"unreadable ({exc.strerror or exc})"
    warnings: list[str] = []
    if held is None:
        warnings.append(f"run lock {path}: {problem}; taking it over")
    else:
        if held.pid == holder_pid and held.controller_host == controller_host:
            return None, []  # this run already holds it (launch after cluster_train's first step)
        here = held.controller_host == controller_host
        alive = pid_alive(held.pid) if here else None
        stale = runlock.stale_reason(held, this_host=controller_host, now=time.time(), pid_alive=alive)
        if stale is None:
            return runlock.refusal_message(project_dir, {}, held), []
        if not (here and alive is False):
            # A holder gone from this controller is how every run ends (nothing releases the lock): silent.
            warnings.append(f"run lock {path}: the previous holder's lock is stale ({stale}); taking it over")
    atomic_write(directory, LOCK_NAME, record.to_json(), FILE_MODE)
    return None, warnings


def lock_for_action(action: Any, task_vars: Mapping[str, Any], project_dir: str) -> tuple[bool, str | None]:
    """Take the project's lock for this ansible-playbook run from an action plugin: (taken, refusal).

    Not in check mode, nor with ``flodl_run_lock=false``. Held by ansible-playbook itself (the worker's
    parent), so it ends with the run however the run ends; keyed by this machine's hostname, where the
    holder pid is checked. Warnings (a stale lock taken over) are shown.
    """
    if action._task.check_mode or not run_lock_enabled(task_vars, action._templar):
        return False, None
    if launch_host_of(task_vars, action._templar) is not None:
        return _lock_on_launch_host(action, task_vars, project_dir)
    try:
        refusal, warnings = take_lock(project_dir, socket.gethostname(), os.getppid())
    except UnsafePathError as exc:
        return False, f"controller: run lock: {exc.strerror}"
    for warning in warnings:
        display.warning(warning)
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
