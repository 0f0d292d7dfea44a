# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the launch command on the controller, streaming its output live."""
from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.flodl.cluster.plugins.module_utils.logsink import LogSink
from ansible_collections.flodl.cluster.plugins.module_utils.remote_launch import RemoteLaunchError
from ansible_collections.flodl.cluster.plugins.module_utils.safe_files import open_log
from ansible_collections.flodl.cluster.plugins.plugin_utils import launch_io, orphans
from ansible_collections.flodl.cluster.plugins.plugin_utils.context import (
    is_local_host,
    read_run,
    remote_launch_argv,
    var,
)
from ansible_collections.flodl.cluster.plugins.plugin_utils.detached_io import start_detached
from ansible_collections.flodl.cluster.plugins.plugin_utils import sshreuse_io
from ansible_collections.flodl.cluster.plugins.plugin_utils.launcher_process import (
    hand_back_signal,
    run_streamed,
    signal_name,
)

display = Display()
ORPHAN_CLEANUP_TIMEOUT = 30.0


class ActionModule(ActionBase):
    """The command runs in its own session, so a stop reaches every process it started."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _spec, args = self.validate_argument_spec(argument_spec={
            "command": {"type": "str", "required": True}, "chdir": {"type": "path", "required": True},
            "env": {"type": "dict", "default": {}}, "log_dir": {"type": "path"},
            "grace_seconds": {"type": "float", "default": 10.0}, "shell": {"type": "str", "default": "/bin/sh"},
            "launch_host": {"type": "str", "default": "localhost"}, "detach": {"type": "bool", "default": False},
            "ssh_control_dir": {"type": "path"},
            "timeout": {"type": "float", "default": 0},
        })
        try:
            return self._run(result, args, task_vars or {})
        finally:
            # The run's ssh masters (flodl_ssh_reuse) end with the launcher, however it ends.
            sshreuse_io.close_masters(args["ssh_control_dir"])

    def _run(self, result, args, task_vars):
        command, chdir = args["command"], args["chdir"]
        added: Mapping[str, Any] = args["env"] or {}
        log_dir = args["log_dir"] or os.path.join(chdir, "target", "cluster", "logs")
        result.update(command=command, cwd=chdir)
        if self._task.check_mode:
            msg = f"check mode: would run `{command}` in {chdir} with {len(added)} added variable(s)"
            display.display(f"flodl launch: {msg}")
            result.update(changed=False, msg=msg)
            return result
        if args["detach"]:
            return start_detached(self, task_vars, result, args, log_dir)
        remote = None if is_local_host(args["launch_host"], task_vars, self._templar) else args["launch_host"]
        if remote is None and not os.path.isdir(chdir):
            result.update(failed=True, msg=f"the launch directory {chdir} does not exist on the controller")
            return result
        env = dict(os.environ)
        env.update({str(k): str(v) for k, v in added.items()})
        argv, stdin_data = [args["shell"], "-c", command], None
        if remote is not None:
            try:
                argv, stdin_data = remote_launch_argv(self, task_vars, remote, chdir, command, added, args)
            except RemoteLaunchError as exc:
                result.update(failed=True, msg=f"flodl launch on {remote}: {exc}")
                return result
            chdir = os.getcwd()  # ssh runs from here; the command runs in chdir on the launch host
        stamp = time.strftime("%Y%m%d-%H%M%S")
        try:
            os.makedirs(log_dir, mode=0o750, exist_ok=True)
            log_path = os.path.join(log_dir, f"launch-{stamp}-{os.getpid()}.log")
            # Not world-readable (rank output may hold secrets); never through a planted symlink.
            log = LogSink(open_log(log_path, binary=True), log_path, display.warning)
        except OSError as exc:
            result.update(failed=True, msg=f"cannot create the launch log under {log_dir}: {exc}")
            return result
        try:
            log.write(f"# flodl launch {stamp}: {command}\n# cwd {chdir}\n".encode())
            where = f" on {remote}" if remote else ""
            display.display(f"flodl launch: running `{command}`{where} in {result['cwd']} (log: {log_path})")
            outcome = run_streamed(argv, chdir, env, log, display.display, float(args["grace_seconds"]), stdin_data,
                                   float(args["timeout"]) or None)
        finally:
            log.close()
        rc = outcome.rc
        result.update(changed=True, rc=rc, log_file=log_path, seconds=outcome.seconds, stdout_tail=outcome.tail)
        if log.failed:
            result["log_error"] = f"{log.error}: the log stopped early, the run was not affected"
        if outcome.interrupted is not None:
            name = signal_name(outcome.interrupted)
            # No later task of the play runs after an interrupt (ansible-playbook may be gone already):
            # stop the ranks the launcher may have left on the workers now, before handing the signal back.
            cleanup = self._stop_orphans(task_vars or {})
            result.update(failed=True, interrupted=name, orphan_cleanup=cleanup, msg=(
                f"the launch command was interrupted by {name}: its process group was stopped "
                f"({outcome.stop_note}); orphan cleanup: {cleanup}; log: {log_path}"))
            hand_back_signal(outcome)
            return result
        if outcome.timed_out:
            result.update(failed=True, timed_out=True, msg=(
                f"the launch command did not finish within flodl_launch_timeout={args['timeout']:g}s: its process "
                f"group was stopped (TERM, then KILL after {args['grace_seconds']:g}s); log: {log_path}"))
            return result
        if rc != 0:
            how = f"signal {-rc}" if rc < 0 else f"code {rc}"
            last = "\n".join(f"  {line}" for line in outcome.tail[-12:])
            result.update(failed=True, msg=f"the launch command exited with {how} (rc={rc}) after "
                          f"{outcome.seconds:.1f}s; log: {log_path}\nlast lines:\n{last}")
            if rc < 0:
                result.update(rc=128 - rc, signal=-rc)
            result.pop("stdout_tail", None)  # already in msg; keeps the failure readable
            return result
        result["msg"] = f"the launch command exited with code 0 after {outcome.seconds:.1f}s; log: {log_path}"
        return result

    def _stop_orphans(self, task_vars: Mapping[str, Any]) -> str:
        """The teardown's cleanup on every remote worker of the play; a one-line summary, never raises."""
        try:
            ctx = read_run(self, task_vars, ["teardown"])
            skipped, targets, _source = orphans.targets_of(
                ctx, None, var(task_vars, self._templar, launch_io.PREBUILD_RESULT_VAR))
            per_host, warnings = orphans.stop_orphans(ctx, targets, ORPHAN_CLEANUP_TIMEOUT)
        except Exception as exc:  # noqa: BLE001  (a failed cleanup must not hide the interrupt)
            return f"could not run ({type(exc).__name__}: {exc}); run flodl.cluster.teardown"
        lines = [f"{name}: {e['status']} — {e['msg']}" for name, e in {**skipped, **per_host}.items()]
        display.display("flodl launch: orphan cleanup after the interrupt:\n  " + "\n  ".join(lines or ["no worker"]))
        for warning in warnings:
            display.warning(warning)
        return f"ran on {len(targets)} host(s), {len(warnings)} warning(s)"
