# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A run-once step that refuses the whole run: every worker fails in its own report, not the step.

The step runs once, on the play's first host. Failing it charged that one worker, and the play stopped
before the others reported: PLAY RECAP showed one worker. Instead the step passes with ``refused`` and a
``per_host`` entry per worker (module_utils._core.phase_result.refused_entries), which each worker's
flodl.cluster.worker_result turns into its own failure. A later step of the play carries an earlier
refusal on (``carried``) rather than reading the run again: a refused run lock must stop the launch.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._core.phase_result import REFUSED, refused_entries
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.run_rules import WORKERS_GROUP
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.task_vars import INVALID_CONFIG, fail_result, registered

# The steps whose refusal a later step of the play carries on (registered as their roles and playbooks name them).
REFUSING_STEPS = ("flodl_preflight_run", "flodl_topology_run", "flodl_prebuild_run", "flodl_launch_env")


def report_hosts(task_vars: Mapping[str, Any]) -> list[str]:
    """The workers that report this run: the play's, or every worker for a play on a host that is not one
    (a runbook on localhost reports the run through that host, which reads every worker's entry)."""
    workers = [str(h) for h in (task_vars.get("groups") or {}).get(WORKERS_GROUP, [])]
    play = [str(h) for h in task_vars.get("ansible_play_hosts_all") or workers]
    return [h for h in play if h in workers] or workers


def refuse(result: dict[str, Any], task_vars: Mapping[str, Any], problems: list[str],
           per_worker: Mapping[str, list[str]] | None = None, why: str = REFUSED) -> dict[str, Any]:
    """``result`` refusing the run: each worker's entry fails with its own problems and the run's.

    With no worker at all (an empty group, the play on localhost) nobody else can carry it: the step fails.
    """
    hosts = report_hosts(task_vars)
    if not hosts:
        return fail_result(result, problems, INVALID_CONFIG if why == REFUSED else why)
    per_host = refused_entries(hosts, problems, per_worker or {}, why)
    failed = sorted(h for h, e in per_host.items() if e["status"] == "failed")
    result.update(changed=False, refused=True, problems=list(problems), failed_hosts=failed, per_host=per_host,
                  msg=f"{why}: {len(problems)} problem(s):\n  " + "\n  ".join(problems))
    return result


def refused_earlier(task_vars: Mapping[str, Any], own: str) -> dict[str, Any] | None:
    """The refusal an earlier step of this play returned (not ``own``, this step's registered name), if any."""
    for name in REFUSING_STEPS:
        if name == own or not isinstance(task_vars.get(name), Mapping) or not task_vars[name].get("refused"):
            continue
        earlier = registered(task_vars, name)
        if isinstance(earlier.get("per_host"), Mapping):
            return earlier
    return None


def carried(result: dict[str, Any], earlier: Mapping[str, Any]) -> dict[str, Any]:
    """``result`` carrying an earlier refusal on: nothing is done, every worker's entry is the earlier one."""
    result.update(changed=False, refused=True, problems=list(earlier.get("problems") or []),
                  failed_hosts=list(earlier.get("failed_hosts") or []), per_host=dict(earlier["per_host"]),
                  msg="not started: the run was refused by an earlier step of this play; "
                  + str(earlier.get("msg") or "").split("\n", 1)[0])
    return result
