# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Detached runs: start one, find its record, ask the launch host about it, stop it."""
from __future__ import annotations

import os
import secrets
import subprocess
import time
from collections.abc import Mapping
from typing import Any

from ansible.utils.display import Display

from ansible_collections.flodl.cluster.plugins.module_utils import detached as dt
from ansible_collections.flodl.cluster.plugins.module_utils.file_modes import PRIVATE_DIR_MODE, RECORD_MODE, make_dirs
from ansible_collections.flodl.cluster.plugins.module_utils.launch_command import join_root
from ansible_collections.flodl.cluster.plugins.module_utils.remote_launch import RemoteLaunchError, env_payload
from ansible_collections.flodl.cluster.plugins.module_utils.safe_files import atomic_write
from ansible_collections.flodl.cluster.plugins.module_utils.safe_reads import read_capped
from ansible_collections.flodl.cluster.plugins.module_utils.ssh import probe_argv
from ansible_collections.flodl.cluster.plugins.plugin_utils.context import is_local_host
from ansible_collections.flodl.cluster.plugins.plugin_utils.launch_target import launch_ssh
from ansible_collections.flodl.cluster.plugins.plugin_utils.processes import SshResult, run_one


def run_on(action: Any, task_vars: Mapping[str, Any], host: str, script: str, stdin: bytes | None = None,
           timeout: float = 30.0) -> SshResult:
    """Run a short POSIX sh script on the launch host: here, or over ssh as Ansible reaches it."""
    if is_local_host(host, task_vars, action._templar):
        argv = ["/bin/sh", "-c", script]
    else:
        argv = probe_argv({"host": host, "ssh": launch_ssh(action, task_vars, host)}, script)
    if stdin is None:
        return run_one(host, argv, timeout)
    try:
        proc = subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return SshResult(host, argv, None, "", "", 0.0, error=str(exc))
    return SshResult(host, argv, proc.returncode, proc.stdout.decode("utf-8", "replace"),
                     proc.stderr.decode("utf-8", "replace"), 0.0)


def runs_dir(project_dir: str) -> str:
    return join_root(project_dir, dt.RUNS_DIR_REL)


def write_record(project_dir: str, run: dt.DetachedRun) -> str:
    directory = runs_dir(project_dir)
    make_dirs(directory, PRIVATE_DIR_MODE)  # modes set explicitly, whatever the umask
    return atomic_write(directory, dt.record_name(run.run_id), run.to_json(), RECORD_MODE)


def find_run(project_dir: str, run_id: str | None) -> tuple[dt.DetachedRun | None, str | None]:
    """The named run (or the latest one), or why there is none."""
    directory = runs_dir(project_dir)
    names = [dt.record_name(run_id)] if run_id else sorted(n for n in _list(directory) if n.endswith(".json"))
    runs: dict[str, dt.DetachedRun] = {}
    problems = []
    for name in names:
        try:
            data = read_capped(os.path.join(directory, name), dt.MAX_RECORD_BYTES, follow=False)
        except OSError as exc:
            problems.append(f"{name}: {exc.strerror}")
            continue
        run, problem = dt.parse_record(data)
        if run is None:
            problems.append(f"{name}: {problem}")
        else:
            runs[run.run_id] = run
    found = dt.latest(runs)
    if found is None:
        why = "; ".join(problems) or f"no detached run is recorded under {directory}"
        return None, why
    return found, None


def _list(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []


def start_detached(action: Any, task_vars: Mapping[str, Any], result: dict[str, Any], args: Mapping[str, Any],
                   log_dir: str) -> dict[str, Any]:
    """Start the launch command detached on the launch host; record it; return at once."""
    run_id = secrets.token_hex(8)
    host = args["launch_host"]
    log = os.path.join(log_dir, f"launch-{time.strftime('%Y%m%d-%H%M%S')}-{run_id}.log")
    added = {str(k): str(v) for k, v in (args["env"] or {}).items()}
    try:
        payload = env_payload(added)
    except RemoteLaunchError as exc:
        result.update(failed=True, msg=f"flodl launch on {host}: {exc}")
        return result
    res = run_on(action, task_vars, host, dt.detach_script(args["chdir"], args["command"], log, args["shell"]),
                 stdin=payload)
    pid = dt.parse_pid(res.stdout) if res.ok else None
    if pid is None:
        why = res.error or (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1][:300]
        result.update(failed=True, msg=f"flodl launch: could not start the detached run on {host}: {why}")
        return result
    run = dt.new_record(run_id, host, pid, log, args["command"])
    project_dir = task_vars.get("flodl_project_dir") or task_vars.get("flodl_controller_path") or args["chdir"]
    record = write_record(str(action._templar.template(project_dir)), run)
    result.update(changed=True, detached=True, run_id=run_id, pid=pid, log_file=log, launch_host=host,
                  record=record,
                  msg=f"flodl launch: detached run {run_id} started on {host} (pid {pid}); follow it with "
                      f"`ansible-playbook flodl.cluster.status -e flodl_run_id={run_id}`, stop it with "
                      "`ansible-playbook flodl.cluster.teardown`; log: " + log)
    Display().display(result["msg"])
    return result


def stop_detached(action: Any, task_vars: Mapping[str, Any], project_dir: str, grace: float = 10.0) -> str | None:
    """Stop the latest detached run's launcher session, if one is recorded and alive; what happened."""
    run, _why = find_run(project_dir, None)
    if run is None:
        return None
    res = run_on(action, task_vars, run.launch_host, dt.stop_script(run.pid, grace), timeout=grace + 30)
    alive, _rest = dt.parse_status(res.stdout) if res.ok else (None, [])
    if alive == "stopped":
        return f"stopped the launcher of detached run {run.run_id} on {run.launch_host} (pid {run.pid})"
    if alive == "0":
        return None
    return f"could not stop the launcher of detached run {run.run_id} on {run.launch_host}: {res.error or res.returncode}"
