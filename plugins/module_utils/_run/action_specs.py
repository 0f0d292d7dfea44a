# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The argument specs of the controller-side actions, defined once.

Each action validates its task's arguments with its own spec here
(``validate_argument_spec(**SPEC)``); the module stub of the same name
documents exactly these options, which a unit test holds them to.

A blank string given for an option that is not required means the option is left out (its default): AWX
surveys hand every answer over as a string, a blank one included (:func:`without_blanks`).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._core.constants import CONTAINER_ROOT

# The phases a run can hold, in play order; teardown has no role of its own.
PHASES = ("preflight", "prebuild", "launch", "teardown")

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

# flodl.cluster.preflight_check
PREFLIGHT_CHECK: dict[str, Any] = {
    "argument_spec": {
        "phases": {"type": "list", "elements": "str", "choices": list(PHASES), "default": ["preflight"]},
        "build_arch": {"type": "str"},
    },
}

# flodl.cluster.topology
TOPOLOGY: dict[str, Any] = {
    "argument_spec": {
        "phases": {"type": "list", "elements": "str", "choices": list(PHASES),
                   "default": ["preflight", "prebuild", "launch"]},
        "lock": {"type": "bool", "default": False},
    },
}

# flodl.cluster.launch_env
LAUNCH_ENV: dict[str, Any] = {
    "argument_spec": {
        "preflight": {"type": "raw"},
        "prebuild_envelope": {"type": "raw"},
        "launch_docker": {"type": "raw"},
        "testing_cluster": {"type": "bool"},
        "container_root": {"type": "str", "default": CONTAINER_ROOT},
        "log_dir": {"type": "str"},
        "show_plan": {"type": "bool", "default": True},
        "launch_host": {"type": "str", "default": "localhost"},
        "launch_mode": {"type": "str", "choices": ["fanout", "walk_in"], "default": "fanout"},
        "launch_timeout": {"type": "float", "default": 0},
    },
}

# flodl.cluster.run_launcher
RUN_LAUNCHER: dict[str, Any] = {
    "argument_spec": {
        "command": {"type": "str"},
        "chdir": {"type": "path"},
        "env": {"type": "dict", "default": {}},
        "prepared_var": {"type": "str"},
        "log_dir": {"type": "path"},
        "grace_seconds": {"type": "float", "default": 10.0},
        "shell": {"type": "str", "default": "/bin/sh"},
        "launch_host": {"type": "str", "default": "localhost"},
        "detach": {"type": "bool", "default": False},
        "ssh_control_dir": {"type": "path"},
        "timeout": {"type": "float", "default": 0},
        "output_batch_seconds": {"type": "float", "default": 2.0},
        "walk_in_stage": {"type": "str", "choices": ["open", "follow"]},
        "window_var": {"type": "str", "default": "flodl_launch_window"},
        "forward_agent": {"type": "bool", "default": False},
        "project_dir": {"type": "path"},
    },
    "required_one_of": [["command", "prepared_var"]],
    "required_together": [["command", "chdir"]],
    "mutually_exclusive": [["command", "prepared_var"], ["chdir", "prepared_var"], ["env", "prepared_var"],
                           ["forward_agent", "prepared_var"], ["project_dir", "prepared_var"]],
}

# flodl.cluster.walk_in_agent
WALK_IN_AGENT: dict[str, Any] = {
    "argument_spec": {
        "stage": {"type": "str", "required": True, "choices": ["start", "collect"]},
        "prepared_var": {"type": "str", "default": "flodl_launch_env"},
        "started_var": {"type": "str", "default": "flodl_agent_start"},
        "launcher_var": {"type": "str", "default": "flodl_launch_follow"},
        "window_var": {"type": "str", "default": "flodl_launch_window"},
        "launch_host": {"type": "str", "default": "localhost"},
    },
}

# flodl.cluster.launch_status
LAUNCH_STATUS: dict[str, Any] = {
    "argument_spec": {
        "run_id": {"type": "str"},
        "lines": {"type": "int", "default": 20},
        "wait_seconds": {"type": "float", "default": 0},
    },
}


def without_blanks(args: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    """The task's arguments without the blank strings given for options that are not required."""
    options = spec["argument_spec"]
    return {k: v for k, v in args.items()
            if not (isinstance(v, str) and not v.strip() and k in options and not options[k].get("required"))}
