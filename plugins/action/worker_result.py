# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Turn a run-once phase result into this worker's own task result."""
from __future__ import annotations

from collections.abc import Mapping

from ansible.plugins.action import ActionBase

from ansible_collections.flodl.cluster.plugins.module_utils._run.action_specs import WORKER_RESULT
from ansible_collections.flodl.cluster.plugins.module_utils._core.phase_result import run_outcome, with_prior, worker_outcome, worker_part
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.run_rules import WORKERS_GROUP


class ActionModule(ActionBase):
    """No connection: the phase already reached the host; this only reports what it found there."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _spec, args = self.validate_argument_spec(**WORKER_RESULT)
        task_vars = task_vars or {}
        name = str(task_vars.get("inventory_hostname", ""))
        phase_result = args["result"]
        groups = task_vars.get("groups")
        worker = not (isinstance(groups, Mapping) and name not in (groups.get(WORKERS_GROUP) or []))
        if phase_result is None:
            phase_result = _registered(task_vars, args["result_var"], name, worker)
        # An earlier phase this report also speaks for (cluster_train's build): only when it ran in this play.
        prior = _registered(task_vars, args["prior_result_var"], name, worker) if args["prior_result_var"] else {}
        if prior:
            result.update(with_prior(args["phase"], args["prior_phase"], name, phase_result, prior, worker=worker))
        elif worker:
            result.update(worker_outcome(args["phase"], name, phase_result))
        else:
            # A play on a host that is not a worker (a runbook on localhost) reports the whole run.
            result.update(run_outcome(args["phase"], name, phase_result))
        return result


def _registered(task_vars, var_name, name, worker):
    """A phase's registered result as Ansible stored it, without templating; a worker reads its own entry only."""
    registered = task_vars.get(var_name)
    if not isinstance(registered, Mapping):
        return {}
    return worker_part(registered, name) if worker else registered
