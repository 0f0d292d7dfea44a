# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``workers_pattern``: the ``hosts`` of the collection's playbooks, resolved before any task's worker forks.

ansible-playbook templates a play's ``hosts`` in its own process, before it forks the first task's worker. What
this filter imports there, every task's worker inherits: the steps' action plugins and their module_utils (50-70
modules a step), which each worker would otherwise import again, compiling them wherever no bytecode cache can be
written (an execution-environment image, a read-only collection path, ``PYTHONDONTWRITEBYTECODE``).
"""
from __future__ import annotations

import importlib
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

WORKERS_GROUP = "flodl_workers"
STEP_PLUGINS = ("topology", "preflight_check", "cargo_prebuild", "launch_env", "run_launcher", "orphan_cleanup",
                "worker_result", "launch_status")
_loaded: list[str] = []


def load_steps() -> list[str]:
    """Import every step's action plugin once in this process; the names imported (also on later calls)."""
    if not _loaded:
        for name in STEP_PLUGINS:
            try:
                importlib.import_module(f"ansible_collections.flodl.cluster.plugins.action.{name}")
            except Exception:  # noqa: BLE001  (the task that runs the step imports it again and reports why)
                continue
            _loaded.append(name)
        # Ansible's own filter and test plugins, looked up once here (an unqualified name loads them all):
        # the first filter or test of each task's template would load them again, about 20 ms a task.
        from ansible.plugins.loader import filter_loader, test_loader
        filter_loader.get("default")
        test_loader.get("defined")
    return list(_loaded)


def workers_pattern(groups, fallback=None, group=WORKERS_GROUP):
    """``group`` when it has hosts, else ``fallback`` (``group`` when no fallback is given)."""
    if not isinstance(groups, Mapping):
        raise AnsibleFilterError(f"workers_pattern expects the `groups` mapping, got {type(groups).__name__}")
    if not isinstance(group, str) or not group:
        raise AnsibleFilterError("workers_pattern: `group` must be a group name")
    load_steps()
    if fallback and not groups.get(group):
        return str(fallback)
    return group


class FilterModule:
    def filters(self):
        return {"workers_pattern": workers_pattern}
