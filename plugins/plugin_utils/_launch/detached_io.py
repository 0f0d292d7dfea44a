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

from ansible_collections.flodl.cluster.plugins.module_utils._launch import detached as dt
from ansible_collections.flodl.cluster.plugins.module_utils._files.file_modes import PRIVATE_DIR_MODE, RECORD_MODE, make_dirs
from ansible_collections.flodl.cluster.plugins.module_utils._launch.launch_command import join_root
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_launch import RemoteLaunchError, env_payload
from ansible_collections.flodl.cluster.plugins.module_utils._files.safe_files import atomic_write
from ansible_collections.flodl.cluster.plugins.module_utils._files.safe_reads import read_capped
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.ssh import probe_argv
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import is_local_host
from ansible_collections.flodl.cluster.plugins.plugin_utils._host.launch_target import launch_ssh
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.processes import SshResult, run_one


def run_on(action: Any, task_vars: Mapping[str, Any], host: str, script: str, *, forward_agent: bool,
           stdin: bytes | None = None, timeout: float = 30.0) -> SshResult:
    """Run a short POSIX sh script on the launch host: here, or over ssh as Ansible reaches it (the job's agent
    forwarded with ``forward_agent``)."""
    if is_local_host(host, task_vars, action._templar):
        argv = ["/bin/sh", "-c", script]
    else:
        argv = probe_argv({"host": host, "ssh": launch_ssh(action, task_vars, host, forward_agent)}, script)
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


def read_records(project_dir: str, run_id: str | None = None) -> tuple[list[dt.DetachedRun], list[str]]:
    """The run records (the named one, or all, newest first, at most MAX_RECORDS) and what was wrong with others."""
    directory = runs_dir(project_dir)
    names = [dt.record_name(run_id)] if run_id else sorted(n for n in _list(directory) if n.endswith(".json"))
    runs: list[dt.DetachedRun] = []
    problems = []
    for name in names:
        try:
            data = read_capped(os.path.join(directory, name), dt.MAX_RECORD_BYTES, follow=False)
        except OSError as exc:
            problems.append(f"{os.path.join(directory, name)}: {exc.strerror}")
            continue
        run, problem = dt.parse_record(data)
        if run is None:
            problems.append(f"{os.path.join(directory, name)}: {problem}")
        else:
            runs.append(run)
    runs.sort(key=lambda r: r.started, reverse=True)
    return runs[:MAX_RECORDS], problems


def find_run(project_dir: str, run_id: str | None) -> tuple[dt.DetachedRun | None, str | None, list[str]]:
    """The named run (or the latest one), or why there is none; and the records that could not be used."""
    runs, problems = read_records(project_dir, run_id)
    if not runs:
        why = "; ".join(problems) or f"no detached run is recorded under {runs_dir(project_dir)}"
        return None, why, problems
    return runs[0], None, problems


def host_problem(action: Any, task_vars: Mapping[str, Any], run: dt.DetachedRun) -> str | None:
    """Why the record's launch host is not one this play may ask: neither this machine nor an inventory host."""
    if is_local_host(run.launch_host, task_vars, action._templar) or run.launch_host in (task_vars.get("hostvars") or {}):
        return None
    return (f"the record of detached run {run.run_id} names launch host {run.launch_host!r}, which is neither this "
            "machine nor an inventory host: it is not this inventory's run (a forged or foreign record); nothing "
            f"was asked or signalled there; remove {os.path.join('target/cluster/runs', dt.record_name(run.run_id))} "
            "if it is not yours, or add the host to the inventory")


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
                 forward_agent=bool(args["forward_agent"]), stdin=payload)
    pid = dt.parse_pid(res.stdout) if res.ok else None
    if pid is None:
        why = res.error or (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1][:300]
        result.update(failed=True, msg=f"flodl launch: could not start the detached run on {host}: {why}")
        return result
    run = dt.new_record(run_id, host, pid, log, args["command"], dt.parse_start(res.stdout))
    record = write_record(str(args["project_dir"] or args["chdir"]), run)
    result.update(changed=True, detached=True, run_id=run_id, pid=pid, log_file=log, launch_host=host,
                  record=record,
                  msg=f"flodl launch: detached run {run_id} started on {host} (pid {pid}); follow it with "
                      f"`ansible-playbook flodl.cluster.status -e flodl_run_id={run_id}`, stop it with "
                      "`ansible-playbook flodl.cluster.teardown`; log: " + log)
    Display().display(result["msg"])
    return result


def stop_detached(action: Any, task_vars: Mapping[str, Any], project_dir: str, grace: float = 10.0, *,
                  forward_agent: bool) -> tuple[list[str], list[str]]:
    """Stop every recorded detached run whose launcher the launch host proves live and its own.

    One script per launch host for all its records. (what was stopped, problems): a record that does not
    parse, names a host outside the inventory, or whose pid is a live process that is not its launcher is a
    problem, and nothing of it is signalled.
    """
    runs, problems = read_records(project_dir)
    by_host: dict[str, list[dt.DetachedRun]] = {}
    for run in runs:
        problem = host_problem(action, task_vars, run)
        if problem:
            problems.append(problem)
        else:
            by_host.setdefault(run.launch_host, []).append(run)
    stopped: list[str] = []
    for host, host_runs in by_host.items():
        script = "; ".join(f"echo {RUN_MARK}={r.run_id}; {dt.stop_script(r, grace)}" for r in host_runs)
        res = run_on(action, task_vars, host, script, forward_agent=forward_agent, timeout=grace * len(host_runs) + 30)
        answers = _per_run(res.stdout) if res.ok else {}
        for run in host_runs:
            done, problem = _judge_stop(run, answers.get(run.run_id), res.error or f"exit {res.returncode}")
            stopped += [done] if done else []
            problems += [problem] if problem else []
    return stopped, problems


RUN_MARK = "__FLODL_RUN__"
MAX_RECORDS = 64  # newest first: a project that keeps more records is asked about these only


def _per_run(stdout: str) -> dict[str, str]:
    """The launch host's answer, cut into one block per run (the lines after each run mark)."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in stdout.splitlines():
        if line.startswith(RUN_MARK + "="):
            current = blocks.setdefault(line.split("=", 1)[1].strip(), [])
        elif current is not None:
            current.append(line)
    return {run_id: "\n".join(lines) for run_id, lines in blocks.items()}


def _judge_stop(run: dt.DetachedRun, answer: str | None, why: str) -> tuple[str | None, str | None]:
    """(what was stopped, problem) for one record."""
    where = f"detached run {run.run_id} on {run.launch_host} (pid {run.pid})"
    if answer is None:
        return None, f"could not ask about {where}: {why}"
    alive, _rest = dt.parse_status(answer)
    proof = dt.parse_proof(answer)
    if alive == "stopped":
        return f"stopped the launcher of {where}", None
    if proof in (None, "ok", "gone") or dt.parse_exit(answer) is not None:
        return None, None  # ended: nothing to stop
    return None, (f"{where}: " + dt.run_state("0", None, proof=proof).summary
                  + f"; remove {os.path.join('target/cluster/runs', dt.record_name(run.run_id))} if it is not yours")
