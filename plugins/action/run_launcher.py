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

from ansible_collections.flodl.cluster.plugins.module_utils._run.action_specs import RUN_LAUNCHER, without_blanks
from ansible_collections.flodl.cluster.plugins.module_utils._run import job_artifacts
from ansible_collections.flodl.cluster.plugins.module_utils._core.group_watch import start_watch
from ansible_collections.flodl.cluster.plugins.module_utils._launch.launch_outcome import RankExits, reported
from ansible_collections.flodl.cluster.plugins.module_utils._launch.launch_text import outcome_fields
from ansible_collections.flodl.cluster.plugins.module_utils._launch.prepared_launch import prepared_args
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_launch import RemoteLaunchError
from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import launch_io, orphans
from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import sshreuse_io
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import is_local_host
from ansible_collections.flodl.cluster.plugins.plugin_utils._host.launch_target import remote_launch_argv
from ansible_collections.flodl.cluster.plugins.plugin_utils._launch.launcher_process import (
    hand_back_signal,
    run_streamed,
    signal_name,
)
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.parent_watch import exit_with_parent
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.run_refusal import carried
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.task_vars import registered
from ansible_collections.flodl.cluster.plugins.plugin_utils._run import vault_values

display = vault_values.RedactingDisplay(Display())
ORPHAN_CLEANUP_TIMEOUT = 30.0


class ActionModule(ActionBase):
    """The command runs in its own session, so a stop reaches every process it started."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _requires_connection = False

    @vault_values.withholding()
    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        self._task.args = without_blanks(self._task.args, RUN_LAUNCHER)
        _spec, args = self.validate_argument_spec(**RUN_LAUNCHER)
        planned = None
        if args["prepared_var"]:
            prepared = registered(task_vars, args["prepared_var"])
            refused_run = isinstance(prepared, Mapping) and prepared.get("refused")
            if refused_run and isinstance(prepared.get("per_host"), Mapping):
                # The run was refused: nothing starts, each worker reports why; the job artifact says it failed.
                result = carried(result, prepared)
                if not self._task.check_mode:
                    result["ansible_stats"] = job_artifacts.launch("", dict(result, failed=True))
                return result
            if isinstance(prepared, Mapping):  # launch_env names the run's vaulted values: withheld from the output
                vault_values.add_ciphertexts(prepared.get(vault_values.CIPHERTEXTS_KEY))
            args, refused = prepared_args(args, args["prepared_var"], prepared)
            # Each worker's launch entry (module_utils._launch.launch_outcome): the workers, not this step, carry a failure.
            planned = prepared.get("per_host") if isinstance(prepared, Mapping) else None
        else:
            refused = None
        if refused:
            sshreuse_io.close_masters(args["ssh_control_dir"])
            result.update(failed=True, msg=refused)
            return result
        try:
            result = self._run(result, args, task_vars)
        except BaseException:
            sshreuse_io.close_masters(args["ssh_control_dir"])  # interrupted: now, before anything else
            raise
        # The run's ssh masters (flodl_ssh_reuse) end with the launcher, however it ends: beside the rest of the
        # play, since nothing rides them any more (the worker process waits for the thread before it exits).
        sshreuse_io.close_masters_beside(args["ssh_control_dir"])
        if isinstance(planned, Mapping) and planned and not args["walk_in_stage"]:  # walk-in: each agent's collect
            result = reported(result, planned)
        if not result.get("failed") and not self._task.check_mode:  # the job artifact (module_utils._run.job_artifacts)
            result["ansible_stats"] = job_artifacts.launch(args["command"], result)
        return result

    def _run(self, result, args, task_vars):
        command, chdir = args["command"], args["chdir"]
        added: Mapping[str, Any] = args["env"] or {}
        log_dir = args["log_dir"] or os.path.join(chdir, launch_io.LOG_DIR_REL)
        result.update(command=command, cwd=chdir)
        if self._task.check_mode:
            msg = f"check mode: would run `{command}` in {chdir} with {len(added)} added variable(s)"
            display.display(f"flodl launch: {msg}")
            result.update(changed=False, msg=msg)
            return result
        if args["walk_in_stage"]:
            # Imported here: a fan-out never loads the walk-in side.
            from ansible_collections.flodl.cluster.plugins.plugin_utils._walk_in.walk_in_steps import run_stage
            return run_stage(self, task_vars, result, args, log_dir, display)
        if args["detach"]:
            # Imported here: ansible-playbook loads this file before every launch, and most launches run attached.
            from ansible_collections.flodl.cluster.plugins.plugin_utils._launch.detached_io import start_detached
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
                argv, stdin_data = remote_launch_argv(self, task_vars, remote, chdir, command, added, args,
                                                      self._cleanup_plan(task_vars, added))
            except RemoteLaunchError as exc:
                result.update(failed=True, msg=f"flodl launch on {remote}: {exc}")
                return result
            chdir = os.getcwd()  # ssh runs from here; the command runs in chdir on the launch host
        stamp = time.strftime("%Y%m%d-%H%M%S")
        try:
            log = launch_io.open_launch_log(log_dir, stamp, display.warning, vault_values.step_secrets())
        except OSError as exc:
            result.update(failed=True, msg=f"cannot create the launch log under {log_dir}: {exc}")
            return result
        # Started before the command, in a session of its own: stops the command's group and cleans the
        # workers even if this process dies with all of Ansible's (module_utils._core.group_watch).
        watch = start_watch(float(args["grace_seconds"]), os.getppid(), ORPHAN_CLEANUP_TIMEOUT)
        if watch is not None:
            watch.cleanup(orphans.watcher_cleanup_argvs(self, task_vars))
        exits = RankExits()  # the hosts and ranks flodl's launcher reports failing, read from its output
        try:
            log.write(f"# flodl launch {stamp}: {command}\n# cwd {chdir}\n".encode())
            where = f" on {remote}" if remote else ""
            display.display(f"flodl launch: running `{command}`{where} in {result['cwd']} (log: {log.path})")
            # ansible-playbook killed outright: this worker ends, and the watcher cleans up (plugin_utils._proc.parent_watch).
            with exit_with_parent():
                outcome = run_streamed(argv, chdir, env, log, display.display, float(args["grace_seconds"]),
                                       stdin_data, float(args["timeout"]) or None,
                                       max(0.0, float(args["output_batch_seconds"])), watch, on_line=exits.see)
        except BaseException:
            if watch is not None:
                watch.done()
            raise
        finally:
            log.close()
        interrupted = None if outcome.interrupted is None else signal_name(outcome.interrupted)
        # No later task of the play runs after an interrupt (ansible-playbook may be gone already): stop the
        # ranks the launcher may have left on the workers now, before handing the signal back.
        cleanup = "" if interrupted is None else orphans.after_interrupt(
            self, task_vars, ORPHAN_CLEANUP_TIMEOUT, display.display, display.warning)
        if watch is not None:
            watch.done()  # the command is stopped and the workers cleaned: the watcher has nothing left to do
        result.update(outcome_fields(
            outcome.rc, outcome.seconds, outcome.tail, log.path, interrupted=interrupted, stop_note=outcome.stop_note,
            orphan_cleanup=cleanup, timed_out=outcome.timed_out, timeout=args["timeout"], grace=args["grace_seconds"]))
        result["rank_exits"] = exits.as_data()
        if log.failed:
            result["log_error"] = f"{log.error}: the log stopped early, the run was not affected"
        if interrupted is not None:
            hand_back_signal(outcome)
        return result

    def _cleanup_plan(self, task_vars, added):
        """The orphan cleanup the launch host runs itself if this job dies whole; None (said) if unknown."""
        try:
            return orphans.launch_host_plan(self, task_vars, str(added.get("FLODL_INTERNAL_HOST_USER") or "") or None)
        except Exception as exc:  # noqa: BLE001  (the launch itself does not depend on it)
            display.warning(f"flodl launch: the launch host gets no orphan cleanup of its own ({exc}); if this job is "
                            "killed, run flodl.cluster.teardown")
            return None
