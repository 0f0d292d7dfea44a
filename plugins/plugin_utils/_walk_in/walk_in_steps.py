# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The launch step's two walk-in stages: ``open`` (start the launcher, wait for its window) and ``follow``.

The launcher runs on this machine or on ``flodl_launch_host`` (over ssh, walk_in_io.RemoteLauncher); ``follow``
reads the same local log either way.

Between them, the play starts every worker's agent over its own connection (flodl.cluster.walk_in_agent).
After ``follow``, each worker's result comes from its agent's collect task, so this step fails only when
the launcher failed and no worker's result can say why (module_utils._walk_in.walk_in_verdict.unattributed).
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._walk_in import walk_in_verdict as wv
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_launch import RemoteLaunchError
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.ssh import probe_argv
from ansible_collections.flodl.cluster.plugins.plugin_utils._host.launch_target import launch_ssh, remote_launch_argv
from ansible_collections.flodl.cluster.plugins.plugin_utils._walk_in import walk_in_io
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import is_local_host
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.parent_watch import exit_with_parent
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.task_vars import registered


def run_stage(action: Any, task_vars: Mapping[str, Any], result: dict[str, Any], args: Mapping[str, Any],
              log_dir: str, display: Any) -> dict[str, Any]:
    prepared = registered(task_vars, str(args["prepared_var"] or ""))
    walk_in = prepared.get("walk_in") if isinstance(prepared, Mapping) else None
    if not isinstance(walk_in, Mapping):
        result.update(failed=True, msg="flodl launch: walk_in_stage needs a launch_env result prepared for walk_in "
                                       "(prepared_var)")
        return result
    if args["walk_in_stage"] == "open":
        remote = None
        if not is_local_host(args["launch_host"], task_vars, action._templar):
            try:
                remote = remote_launcher(action, task_vars, str(args["launch_host"]), args)
            except RemoteLaunchError as exc:
                result.update(failed=True, msg=f"flodl launch on {args['launch_host']}: {exc}")
                return result
        return _open(result, args, walk_in, log_dir, display, remote)
    return _follow(action, task_vars, result, args, walk_in, display)


def remote_launcher(action: Any, task_vars: Mapping[str, Any], host: str,
                    args: Mapping[str, Any]) -> walk_in_io.RemoteLauncher:
    """The launcher on ``host`` (flodl_launch_host), reached as Ansible reaches it: the ssh that runs it there under
    the remote wrapper (the one a fan-out uses), and how to run the window check there."""
    argv, payload = remote_launch_argv(action, task_vars, host, args["chdir"], args["command"], args["env"] or {},
                                       args)
    ssh = launch_ssh(action, task_vars, host, bool(args["forward_agent"]))
    return walk_in_io.RemoteLauncher(host, argv, payload,
                                     lambda script: probe_argv({"host": host, "ssh": ssh}, script))


def _open(result, args, walk_in, log_dir, display, remote):
    started, problem = walk_in_io.open_window(args, walk_in, log_dir, os.getppid(), remote=remote)
    where = f" on {remote.host}" if remote is not None else ""
    if problem:
        hint = ""
        if remote is not None:
            hint = (f"; with flodl_launch_host the window binds flodl_controller_host ({walk_in.get('host')}), which "
                    f"must be an address of {remote.host} that the workers reach")
        result.update(failed=True, launcher=started,
                      msg=f"flodl launch{where}: {problem} (log: {started.get('log', '-')}){hint}")
        return result
    display.display(f"flodl launch: the launcher's join window is open{where} on port {started['port']} (pid "
                    f"{started['pid']}, log {started['log']}); starting {len(walk_in['agents'])} walk-in agent(s)")
    result.update(changed=True, launcher=started, msg=f"join window open on port {started['port']}")
    return result


def _follow(action, task_vars, result, args, walk_in, display):
    opened = registered(task_vars, str(args["window_var"]))
    started = opened.get("launcher") if isinstance(opened, Mapping) else None
    if not isinstance(started, Mapping) or opened.get("failed") or not started.get("pid"):
        result.update(failed=True, msg=f"flodl launch: no open join window registered as {args['window_var']}")
        return result
    # ansible-playbook killed outright: this worker ends; the held watcher stops the launcher.
    with exit_with_parent():
        ended = walk_in_io.follow(started, display.display, float(args["timeout"]), float(args["grace_seconds"]),
                                  max(0.0, float(args["output_batch_seconds"])))
    view = wv.view_of(ended["view"])
    hosts = [str(a["host"]) for a in walk_in["agents"].values()]
    rc = ended["rc"]
    how = ("timed out and was stopped" if ended["timed_out"] else
           f"ended with exit code {rc}" if rc is not None else "ended without an exit code (stopped)")
    result.update(changed=True, rc=rc, log_file=ended["log_file"], tail=ended["tail"], view=ended["view"],
                  msg=f"the launcher {how}; {len(view.joined)} of {len(hosts)} worker(s) joined")
    # Explicit: a present non-zero rc would fail the task. Each worker's own result says what failed there.
    result["failed"] = ended["timed_out"] or wv.unattributed(view, rc, hosts)
    return result
