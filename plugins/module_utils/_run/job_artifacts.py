# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The AWX job artifacts each phase publishes (docs/awx.md §8), in ``set_stats``' own shape.

A phase's action returns them as ``ansible_stats`` when its step passes, which Ansible handles as it
handles a ``set_stats`` task's result, without a task of its own (0.05-0.1 s each at 32 workers). A step
that failed or was skipped has them published by its role's ``set_stats`` task instead, from the same
fields of the registered result.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._run.run_model import RESULT_KEY as MODEL_KEY

PREFLIGHT = "flodl_preflight"
# Not flodl_prebuild: AWX hands artifacts to later workflow nodes as extra vars, and that name is the switch.
PREBUILD = "flodl_prebuild_result"
LAUNCH = "flodl_launch"


def stats(name: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """``ansible_stats`` for one artifact of the whole run (not per host, not aggregated)."""
    return {"data": {name: dict(data)}, "per_host": False, "aggregate": False}


def preflight(result: Mapping[str, Any]) -> dict[str, Any]:
    """The preflight result as its role registers it, but for the run model: that is for the later phases of
    this run (module_utils._run.run_model), not for a job's readers."""
    return stats(PREFLIGHT, {k: v for k, v in result.items() if k != MODEL_KEY})


def prebuild(result: Mapping[str, Any]) -> dict[str, Any]:
    return stats(PREBUILD, {"envelope": result.get("envelope") or {}, "summary": result.get("summary") or [],
                            "failed_hosts": result.get("failed_hosts") or []})


def launch(command: str, result: Mapping[str, Any]) -> dict[str, Any]:
    return stats(LAUNCH, {"command": command, "rc": result.get("rc", ""), "log_file": result.get("log_file", ""),
                          "run_id": result.get("run_id", ""),
                          "failed": bool(result.get("failed") or result.get("launch_failed"))})
