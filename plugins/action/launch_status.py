# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""State of a detached run: its launcher on the launch host, a log tail, and the ranks on each worker."""
from __future__ import annotations

import time

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.flodl.cluster.plugins.module_utils._run.action_specs import LAUNCH_STATUS
from ansible_collections.flodl.cluster.plugins.module_utils._launch import detached as dt
from ansible_collections.flodl.cluster.plugins.module_utils._run import runlock
from ansible_collections.flodl.cluster.plugins.module_utils._probe.live_ranks import running_script
from ansible_collections.flodl.cluster.plugins.module_utils._probe.preflight_probe import parse_probe
from ansible_collections.flodl.cluster.plugins.module_utils._core.phase_result import entry
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.ssh import launcher_argv
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import fail_result, read_run
from ansible_collections.flodl.cluster.plugins.plugin_utils._launch.detached_io import find_run, host_problem, run_on
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.processes import run_parallel
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.run_handoff import fields as model_fields
from ansible_collections.flodl.cluster.plugins.plugin_utils._run import vault_values

display = vault_values.RedactingDisplay(Display())
POLL_SECONDS = 5.0


class ActionModule(ActionBase):
    """Reads only: one ssh to the launch host, one to each worker of the play, all in parallel."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _requires_connection = False

    @vault_values.withholding()
    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        _spec, args = self.validate_argument_spec(**LAUNCH_STATUS)
        try:
            ctx = read_run(self, task_vars, ["teardown"])
        except TopologyError as exc:
            return fail_result(result, exc.problems)
        result.update(model_fields(ctx, with_model=False))
        artifact = {"run_id": ctx.settings.launch_run_id}  # flodl_launch, as the reader found it
        run_id, problem = dt.requested_run_id(args["run_id"], ctx.settings.run_id, artifact)
        if problem:
            return fail_result(result, [f"controller: {problem}"], "no detached run to report on")
        run, why, records = find_run(ctx.project_dir, run_id)
        if run is None:
            return fail_result(result, [f"controller: {why}"], "no detached run to report on")
        refused = host_problem(self, task_vars, run)
        if refused:
            result["record_problems"] = records + [refused]
            return fail_result(result, [f"controller: {refused}"], "the run record was refused")
        deadline = time.monotonic() + max(0.0, args["wait_seconds"])
        while True:
            launcher = run_on(self, task_vars, run.launch_host, dt.status_script(run, args["lines"]),
                              forward_agent=ctx.settings.launch_forward_agent)
            alive, tail = dt.parse_status(launcher.stdout) if launcher.ok else (None, [])
            verdict = dt.run_state(alive, dt.parse_exit(launcher.stdout), launcher.error or "no answer",
                                   dt.parse_proof(launcher.stdout) if launcher.ok else None)
            if verdict.state != "running" or time.monotonic() >= deadline:
                break
            time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
        bins = {h: b for h, b in runlock.live_binaries(ctx.remotes, ctx.cmd).items() if ctx.in_play(h)}
        workers = {w.host: w.document for w in ctx.remotes}  # flodl's worker entries, for the ssh argv
        # A walk_in worker on a non-ssh Ansible connection: flodl's ssh cannot ask it (not counted, said so).
        per_host = {ctx.inventory_names.get(h, h): entry("skipped", f"reached by Ansible's {c} connection, not "
                                                         "ssh: its ranks were not counted")
                    for h, c in ctx.ansible_only.items() if h in bins}
        jobs = {h: launcher_argv(workers[h], running_script(b), project_root=ctx.project_dir,
                                 connect_timeout=ctx.connect_timeout)
                for h, b in bins.items() if h not in ctx.ansible_only}
        for host, res in run_parallel(jobs).items():
            count = parse_probe(res.stdout).running if res.ok else None
            name = ctx.inventory_names.get(host, host)
            if count is None:
                per_host[name] = entry("unreachable", f"could not ask {host} ({res.error or res.returncode})")
            else:
                per_host[name] = entry("ok", f"{count} rank process(es) of {bins[host]} running", running=count)
        state = "not this run's" if verdict.state == "unproven" else {"1": "running", "0": "ended"}.get(
            str(alive), f"unknown ({launcher.error or 'no answer'})")
        waited = args["wait_seconds"] > 0 and verdict.state == "running"
        summary = verdict.summary + (f" after waiting {args['wait_seconds']:g}s for it to end" if waited else "")
        display.display("\n".join([f"flodl run {run.run_id} on {run.launch_host}: {summary} "
                                   f"(pid {run.pid}); log {run.log}", *[f"  | {line}" for line in tail],
                                   *[f"  {name}: {e['msg']}" for name, e in per_host.items()]]))
        for problem in records:
            display.warning(f"flodl status: run record refused: {problem}")
        result.update(changed=False, run_id=run.run_id, launch_host=run.launch_host, pid=run.pid, log_file=run.log,
                      launcher=state, state=verdict.state, rc=verdict.rc, log_tail=tail, per_host=per_host,
                      record_problems=records,
                      msg=f"run {run.run_id}: {summary}" + (f"; {len(records)} other run record(s) refused: "
                                                            + "; ".join(records) if records else ""))
        # Explicit, always: Ansible reads a present non-zero "rc" (None included) as failed otherwise.
        result["failed"] = verdict.failed or waited or bool(records)
        return result
