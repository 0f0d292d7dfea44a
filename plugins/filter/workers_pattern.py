# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``workers_pattern``: the ``hosts`` of the collection's playbooks, resolved before any task's worker forks.

ansible-playbook templates a play's ``hosts`` in its own process, before it forks the first task's worker. What
this filter imports there, every task's worker inherits: the steps' action plugins and their module_utils (50-70
modules a step), which each worker would otherwise import again, compiled from source: Ansible's collection loader
never reads a bytecode cache.
"""
from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.flodl.cluster.plugins.plugin_utils._run.run_rules import WORKERS_GROUP

STEP_PLUGINS = ("topology", "preflight_check", "cargo_prebuild", "launch_env", "run_launcher", "orphan_cleanup",
                "worker_result", "launch_status")


@functools.cache
def _load_step(name: str) -> bool:
    """Import one step's action plugin in this process; whether it imported."""
    try:
        importlib.import_module(f"ansible_collections.flodl.cluster.plugins.action.{name}")
    except Exception:  # noqa: BLE001  (the task that runs the step imports it again and reports why)
        return False
    return True


@functools.cache
def _look_up_jinja_plugins() -> None:
    """Ansible's own filter and test plugins, looked up once here (an unqualified name loads them all): the first
    filter or test of each task's template would load them again, about 20 ms a task."""
    from ansible.plugins.loader import filter_loader, test_loader
    filter_loader.get("default")
    test_loader.get("defined")


def load_steps(steps=STEP_PLUGINS) -> list[str]:
    """Import these steps' action plugins once in this process; the names of ``steps`` imported (now or before)."""
    imported = [name for name in steps if _load_step(name)]
    _look_up_jinja_plugins()
    return imported


def workers_pattern(groups, fallback=None, group=WORKERS_GROUP, steps=None):
    """``group`` when it has hosts, else ``fallback`` (``group`` when no fallback is given).

    ``steps``: the step plugins the play runs (all of them when not given), imported here for its workers.
    """
    if not isinstance(groups, Mapping):
        raise AnsibleFilterError(f"workers_pattern expects the `groups` mapping, got {type(groups).__name__}")
    if not isinstance(group, str) or not group:
        raise AnsibleFilterError("workers_pattern: `group` must be a group name")
    if steps is None:
        steps = STEP_PLUGINS
    unknown = [s for s in steps if s not in STEP_PLUGINS] if isinstance(steps, (list, tuple)) else [steps]
    if unknown:
        raise AnsibleFilterError(f"workers_pattern: `steps` must list step plugins among {', '.join(STEP_PLUGINS)}; "
                                 f"got {unknown[0]!r}")
    load_steps(steps)
    if fallback and not groups.get(group):
        return str(fallback)
    return group


class FilterModule:
    def filters(self):
        return {"workers_pattern": workers_pattern}
