# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validate the run and return its topology, on the controller only."""
from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.flodl.cluster.plugins.module_utils._run.action_specs import TOPOLOGY
from ansible_collections.flodl.cluster.plugins.module_utils._launch.cluster_json import ordered_cluster
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError, redacted_topology
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import read_run
from ansible_collections.flodl.cluster.plugins.plugin_utils._run import run_handoff
from ansible_collections.flodl.cluster.plugins.plugin_utils._launch.launch_precheck import size_problems
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.run_refusal import refuse
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.run_rules import WORKERS_GROUP
from ansible_collections.flodl.cluster.plugins.plugin_utils._host.runlock_io import lock_for_action
from ansible_collections.flodl.cluster.plugins.plugin_utils._run import vault_values


class ActionModule(ActionBase):
    """Thin wrapper: all rules live in module_utils._cluster.topology and plugin_utils._run.context.

    A refused run passes this step with ``refused`` and every worker's entry failed (plugin_utils._run.run_refusal);
    the launch carries that refusal on, and each worker's report fails with it.
    """

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _requires_connection = False

    @vault_values.withholding()
    def run(self, tmp=None, task_vars=None):
        result = self._validate(tmp, task_vars)
        here = str((task_vars or {}).get("inventory_hostname", ""))
        workers = ((task_vars or {}).get("groups") or {}).get(WORKERS_GROUP) or []
        if result.get("refused") and here not in workers:
            # On a host that is not a worker (a runbook validating on localhost) no worker report follows that
            # could carry the refusal: this task fails, which charges no worker.
            result["failed"] = True
        return result

    def _validate(self, tmp, task_vars):
        result = super().run(tmp, task_vars)
        _spec, args = self.validate_argument_spec(**TOPOLOGY)
        task_vars = task_vars or {}
        try:
            ctx = read_run(self, task_vars, args["phases"])
        except TopologyError as exc:
            return refuse(result, task_vars, exc.problems, exc.per_host)
        too_big = size_problems(self, task_vars, ctx, args["phases"])
        if too_big:
            return refuse(result, task_vars, too_big)
        locking, refusal = lock_for_action(self, task_vars, ctx) if args["lock"] else (False, None)
        if refusal:
            return refuse(result, task_vars, [refusal], why="the run lock was not taken; nothing was started")
        result.update(
            changed=False,
            # The join token is the session salt: never in registered results or -v output.
            cluster=redacted_topology(ordered_cluster(ctx.cluster.document)),  # rendered: flodl's order
            controller_identity=ctx.controller_identity,
            remote_hosts=[w.host for w in ctx.remotes],
            prebuild=ctx.prebuild,
            run_lock=bool(locking),
            **run_handoff.fields(ctx),  # registered as flodl_topology_run by the launch playbook
        )
        return result
