# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The argument specs of the controller-side actions, defined once.

Each action validates its task's arguments with its own spec here
(``validate_argument_spec(**SPEC)``); the module stub of the same name
documents exactly these options, which a unit test holds them to.
"""
from __future__ import annotations

from typing import Any

# flodl.cluster.worker_result
WORKER_RESULT: dict[str, Any] = {
    "argument_spec": {
        "phase": {"type": "str", "required": True},
        "result": {"type": "dict"},
        "result_var": {"type": "str"},
        "prior_phase": {"type": "str"},
        "prior_result_var": {"type": "str"},
    },
    "required_one_of": [["result", "result_var"]],
    "mutually_exclusive": [["result", "result_var"]],
    "required_together": [["prior_phase", "prior_result_var"]],
}

# flodl.cluster.orphan_cleanup
ORPHAN_CLEANUP: dict[str, Any] = {
    "argument_spec": {
        "prebuild_envelope": {"type": "raw"},
        "timeout": {"type": "float", "default": 30.0},
        "stop_launcher": {"type": "bool", "default": True},
    },
}
