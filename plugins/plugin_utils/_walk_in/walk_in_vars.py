# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one worker's walk_in_agent task reads of the run-once results: its own entries, never the rest.

launch_env's result holds every worker's agent and the launcher's view names every host: a copy of either per
worker is O(N) each, O(N^2) over the cluster. Each read here copies one entry (task_vars.registered_at).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._walk_in import walk_in_verdict as wv
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.task_vars import registered_at

PLAN_KEYS = ("run_id", "join_timeout", "agent_timeout")


def own_agent(task_vars: Mapping[str, Any], prepared_var: str, name: str) -> tuple[Any, dict[str, Any]]:
    """(this inventory host's planned agent or None, the plan's scalars ``PLAN_KEYS``)."""
    agent = registered_at(task_vars, prepared_var, "walk_in", "agents", name)
    return agent, {key: registered_at(task_vars, prepared_var, "walk_in", key) for key in PLAN_KEYS}


def own_view(task_vars: Mapping[str, Any], launcher_var: str, host: str) -> tuple[wv.LauncherView, int | None]:
    """(the launcher's view of flodl host ``host`` alone, the launcher's exit code)."""
    def read(*path: str) -> Any:
        return registered_at(task_vars, launcher_var, *path)

    view = wv.view_for(host, read("view", "joined", host), read("view", "failed_ranks", host),
                       read("view", "quorum_failed"))
    rc = read("rc")
    return view, rc if isinstance(rc, int) else None
