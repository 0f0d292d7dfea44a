# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start this worker's walk-in agent over its own Ansible connection, or collect it once the launcher ended."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.flodl.cluster.plugins.module_utils._walk_in import walk_in as wi
from ansible_collections.flodl.cluster.plugins.module_utils._walk_in import walk_in_verdict as wv
from ansible_collections.flodl.cluster.plugins.module_utils._run.action_specs import WALK_IN_AGENT
from ansible_collections.flodl.cluster.plugins.plugin_utils._walk_in.walk_in_vars import own_agent, own_view
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.task_vars import registered_at


class ActionModule(ActionBase):
    """No Python on the worker: one shell command over the host's connection, become honoured."""

    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        _spec, args = self.validate_argument_spec(**WALK_IN_AGENT)
        name = str(task_vars.get("inventory_hostname", ""))
        # This worker's own entries only: the results hold every worker's (O(1) per worker, not O(N)).
        agent, plan = own_agent(task_vars, args["prepared_var"], name)
        if not isinstance(agent, Mapping):
            result.update(skipped=True, changed=False, msg=f"no walk-in agent is planned for {name}")
            return result
        if self._task.check_mode:
            result.update(changed=False, msg=f"check mode: would {args['stage']} the agent of {agent['host']}")
            return result
        log = wi.agent_log(str(plan["run_id"]))
        if args["stage"] == "start":
            return self._start(result, task_vars, args, agent, log, plan)
        return self._collect(result, task_vars, args, agent, log, plan, name)

    def _exec(self, script: str, stdin: bytes | None = None) -> dict[str, Any]:
        # sudoable: a become set for this host applies, so the agent (and its ranks) run as become_user.
        return self._low_level_execute_command(script, sudoable=True, in_data=stdin)

    def _start(self, result, task_vars, args, agent, log, plan):
        no_window = wv.window_problem(registered_at(task_vars, args["window_var"]))
        if no_window:
            result.update(failed=True, changed=False, msg=wv.no_window_entry_msg(
                str(agent["host"]), args["launch_host"], no_window, args["window_var"]))
            return result
        launch = wi.AgentLaunch(str(agent["host"]), str(agent["cwd"]), str(agent["binary"]),
                                {str(k): str(v) for k, v in agent["env"].items()})
        res = self._exec(wi.start_script(launch, log, int(plan["agent_timeout"])), wi.start_stdin(launch))
        pid = wi.parse_start(res.get("stdout", ""))
        if not isinstance(pid, int):
            why = {"no-cwd": f"no directory {launch.cwd} there",
                   "no-env": "its environment did not arrive whole on stdin (the connection cut it short)"}.get(
                str(pid), (res.get("stderr") or f"exit {res.get('rc')}").strip()[-300:])
            result.update(failed=True, changed=False, msg=f"{launch.host}: could not start its walk-in agent: {why}")
            return result
        result.update(changed=True, pid=pid, msg=f"{launch.host}: agent started (pid {pid}), dialing the window")
        return result

    def _collect(self, result, task_vars, args, agent, log, plan, name):
        started = registered_at(task_vars, args["started_var"])
        pid = started.get("pid") if isinstance(started, Mapping) else None
        view, launcher_rc = own_view(task_vars, args["launcher_var"], str(agent["host"]))
        code, tail = None, []
        if isinstance(pid, int) and pid >= 2:
            res = self._exec(wi.collect_script(pid, log, wv.TAIL_LINES))
            code, tail = wi.parse_collect(res.get("stdout", ""))
        start_problem = str(started.get("msg", "")) if isinstance(started, Mapping) else ""
        found = wv.worker_entry(str(agent["host"]), view, code, tail, launcher_rc, float(plan["join_timeout"]),
                                isinstance(pid, int), start_problem)
        # The ranks' output is on the agent's stdout on the worker: its last lines are shown here, as a fan-out
        # shows them live.
        if tail:
            Display().display("\n".join(f"[{agent['host']}] {line}" for line in tail))
        result.update(changed=False, per_host={name: found}, msg=found["msg"])
        return result
