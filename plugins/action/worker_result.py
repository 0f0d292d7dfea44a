# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Turn a run-once phase result into this worker's own task result."""
from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.flodl.cluster.plugins.module_utils.phase_result import worker_outcome


class ActionModule(ActionBase):
    """No connection: the phase already reached the host; this only reports what it found there."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _spec, args = self.validate_argument_spec(
            argument_spec={
                "phase": {"type": "str", "required": True},
                "result": {"type": "dict", "required": True},
            }
        )
        name = str((task_vars or {}).get("inventory_hostname", ""))
        result.update(worker_outcome(args["phase"], name, args["result"]))
        return result
