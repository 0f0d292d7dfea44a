# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run's ssh master connections on the controller: their private directory, and closing them."""
from __future__ import annotations

import os
import tempfile
import threading
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._ssh import sshreuse
from ansible_collections.flodl.cluster.plugins.module_utils._launch import compose_overlay as co
from ansible_collections.flodl.cluster.plugins.module_utils._launch import launch_env as le
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import RunContext
from ansible_collections.flodl.cluster.plugins.plugin_utils._host.launch_target import launch_docker
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.sshreuse_watch import close_masters_in, start_watcher

RESULT_KEY = "ssh_control_dir"


def enabled(ctx: RunContext) -> bool:
    """``flodl_ssh_reuse`` (default true), for a launch that runs attached.

    A detached launcher outlives the play while the masters end with the play, so its fan-out makes its own
    connections (plugin_utils._run.run_settings reads both).
    """
    return ctx.settings.ssh_reuse


# mkdtemp's random part is 8 characters: the directory's length is known before it is made.
_RANDOM_CHARS = 8


def _bases() -> tuple[str, ...]:
    return (tempfile.gettempdir(), "/tmp")


def expected_dir() -> str | None:
    """A stand-in of the length :func:`make_dir` will give (the launch environment is sized before contact)."""
    for base in _bases():
        path = os.path.join(base, sshreuse.DIR_PREFIX + "x" * _RANDOM_CHARS)
        if sshreuse.dir_fits(path):
            return path
    return None


def make_dir() -> str | None:
    """A new 0700 directory for this run's sockets, short enough for a socket path; None when none fits."""
    for base in _bases():
        try:
            path = tempfile.mkdtemp(prefix=sshreuse.DIR_PREFIX, dir=base)  # mode 0700, owned by us
        except OSError:
            continue
        if sshreuse.dir_fits(path):
            # The launch step closes the masters; the watcher does when the run ends before it (our parent
            # is the ansible-playbook process, as for the run lock).
            start_watcher(os.getppid(), path, sshreuse.DIR_PREFIX)
            return path
        os.rmdir(path)
    return None


def close_masters(control_dir: str | None, timeout: float = 10.0) -> int:
    """``ssh -O exit`` every master whose socket is in the run's directory, then remove it; the count closed."""
    return close_masters_in(control_dir, sshreuse.DIR_PREFIX, timeout)


def close_masters_beside(control_dir: str | None) -> threading.Thread | None:
    """``close_masters`` in a thread of this process, started now; the thread, None without a directory.

    For the end of a step that returned its result: Ansible's worker sends the result first and Python joins
    the thread before the worker exits, so the play goes on while the masters close (30-40 ms at 32 workers).
    If the worker is killed first, the run's watcher closes what is left (sshreuse_watch).
    """
    if not control_dir:
        return None
    thread = threading.Thread(target=close_masters, args=(control_dir,), name="flodl-close-masters", daemon=False)
    thread.start()
    return thread


def reuse_wanted(action: Any, task_vars: Any, ctx: RunContext, phases: list[str]) -> bool:
    """Whether the launcher on this box will follow the probe and ride its master connections."""
    if "launch" not in phases or action._task.check_mode or not ctx.remotes:
        return False
    if not enabled(ctx) or le.recursion_guard(os.environ) is not None:
        return False
    if ctx.launch_command:
        in_container = co.is_compose_command(ctx.launch_command)
    else:
        try:
            in_container = launch_docker(None, ctx) is not None
        except TopologyError:
            return False  # the launch phase reports it
    # A launcher inside a container sees no socket of this controller.
    return not in_container


def reuse_dir_for(action: Any, task_vars: Any, ctx: RunContext, phases: list[str]) -> str | None:
    """This run's master-connection directory, when the launcher on this box will follow the probe."""
    return make_dir() if reuse_wanted(action, task_vars, ctx, phases) else None


def left_by(preflight: Any) -> str | None:
    """The masters' directory the preflight probe left, when it is still there."""
    found = preflight.get(RESULT_KEY) if isinstance(preflight, dict) else None
    return found if isinstance(found, str) and os.path.isdir(found) else None


def masters_for_launch(action: Any, ctx: RunContext, preflight: Any, guarded: bool) -> str | None:
    """The masters the preflight probe left for this launch, when it will use them; otherwise they are closed.

    Not used in check mode (nothing runs), under a launcher's own recursion guard, or with reuse turned off.
    """
    found = left_by(preflight)
    if found is None:
        return None
    if action._task.check_mode or guarded or not enabled(ctx):
        close_masters(found)
        return None
    return found
