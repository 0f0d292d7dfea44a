# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading a task's variables: templated, as plain Python values, booleans by Ansible's rules."""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._core.safety import parse_bool

INVALID_CONFIG = "flodl cluster configuration is invalid; no host was contacted"


def fail_result(result: dict[str, Any], problems: list[str], what: str = INVALID_CONFIG) -> dict[str, Any]:
    """Fail an action with every problem on its own line (and as a list for callers)."""
    result.update(
        failed=True,
        msg=f"{what} ({len(problems)} problem(s)):\n  " + "\n  ".join(problems),
        problems=problems,
    )
    return result


def plain(value: Any) -> Any:
    """Native Python containers/scalars (drops Ansible's tagged wrapper types)."""
    return json.loads(json.dumps(value))


def var(task_vars: Mapping[str, Any], templar: Any, name: str, default: Any = None) -> Any:
    """A variable as the task sees it, templated and as plain Python values."""
    if name not in task_vars:
        return default
    value = task_vars[name]
    if templar is not None:
        value = templar.template(value)
    return plain(value)


def registered(task_vars: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """A result one of this collection's tasks registered, as plain Python values, not templated.

    Ansible marks registered results untrusted, so templating finds nothing to render in them; it only
    walks them (20-30 ms for the prebuild result at 32 workers, once per read). What Ansible added to the
    result as its own objects (2.19's warning summaries) reads as None: no reader here looks at them.
    """
    if name not in task_vars:
        return default
    return json.loads(json.dumps(task_vars[name], default=lambda _obj: None))


def registered_at(task_vars: Mapping[str, Any], name: str, *path: str, default: Any = None) -> Any:
    """One entry of a registered result (``path``: the keys down to it), as plain Python values, not templated.

    Only that entry is copied: a worker reading its own agent from a result that holds every worker's reads
    O(1) of it, where :func:`registered` would copy the whole result once per worker (O(N) each, O(N^2) in all).
    """
    if name not in task_vars:
        return default
    value = task_vars[name]
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return default
        value = value[key]
    return json.loads(json.dumps(value, default=lambda _obj: None))


def as_bool(value: Any) -> bool | None:
    """Ansible's boolean rules (survey and ``-e`` values arrive as text); None when not a boolean."""
    return parse_bool(value)
