# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run's ssh master connections on the controller: their private directory, and closing them."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils import sshreuse
from ansible_collections.flodl.cluster.plugins.module_utils import launch_env as le
from ansible_collections.flodl.cluster.plugins.module_utils.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.plugin_utils.context import RunContext, as_bool, launch_docker, var

REUSE_VAR = "flodl_ssh_reuse"
RESULT_KEY = "ssh_control_dir"


def enabled(task_vars: Any, templar: Any) -> bool:
    """``flodl_ssh_reuse`` (default true)."""
    return as_bool(var(task_vars, templar, REUSE_VAR, True)) is not False


def make_dir() -> str | None:
    """A new 0700 directory for this run's sockets, short enough for a socket path; None when none fits."""
    for base in (tempfile.gettempdir(), "/tmp"):
        try:
            path = tempfile.mkdtemp(prefix=sshreuse.DIR_PREFIX, dir=base)  # mode 0700, owned by us
        except OSError:
            continue
        if sshreuse.dir_fits(path):
            return path
        os.rmdir(path)
    return None


def close_masters(control_dir: str | None, timeout: float = 10.0) -> int:
    """``ssh -O exit`` every master whose socket is in the directory, then remove it; the count closed."""
    if not control_dir or not os.path.isdir(control_dir) or not os.path.basename(
            control_dir.rstrip("/")).startswith(sshreuse.DIR_PREFIX):
        return 0
    procs = []
    for name in sorted(os.listdir(control_dir)):
        sock = os.path.join(control_dir, name)
        try:
            procs.append(subprocess.Popen(
                ["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "flodl-master"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        except OSError:
            continue
    closed = 0
    for proc in procs:
        try:
            closed += proc.wait(timeout=timeout) == 0
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    shutil.rmtree(control_dir, ignore_errors=True)
    return closed


def reuse_dir_for(action: Any, task_vars: Any, ctx: RunContext, phases: list[str]) -> str | None:
    """This run's master-connection directory, when the launcher on this box will follow the probe."""
    if "launch" not in phases or action._task.check_mode or not ctx.remotes:
        return None
    if not enabled(task_vars, action._templar) or le.recursion_guard(os.environ) is not None:
        return None
    if ctx.launch_command:
        in_container = le.is_compose_command(ctx.launch_command)
    else:
        try:
            in_container = launch_docker(None, task_vars, action._templar, ctx) is not None
        except TopologyError:
            return None  # the launch phase reports it
    # A launcher inside a container sees no socket of this controller.
    return None if in_container else make_dir()
