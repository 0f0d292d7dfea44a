# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the run model travels from the play's first step to the later phases (docs/architecture.md).

The first step returns the model it built under ``run_model`` in its result, which its role registers
(``flodl_preflight_run``, ``flodl_topology_run`` in the launch playbook, ``flodl_launch_env`` for the
launch role's own cleanup). A run-once task's registered result is set on every host of the play, so a
later run-once phase finds it in its own task variables, and a later play of the same run on the same
hosts too. Taken back only when it is this run's: its fingerprint (this ansible-playbook process, the
worker group, the play's hosts, every run-level variable the reader reads) must match, it must cover
the phase, and its shape is checked field by field (module_utils._run.run_model). Otherwise, or when
there is none (a runbook play importing one phase), the phase builds its own.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._run.netscale import ENV_NET_TIMEOUT_SCALE
from ansible_collections.flodl.cluster.plugins.module_utils._run.run_model import (
    RESULT_KEY,
    TRACE_KEY,
    RunContext,
    fingerprint,
    from_model,
    thawed,
)
from ansible_collections.flodl.cluster.plugins.plugin_utils._run import vault_values
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.run_rules import CLUSTER_VARS, RUN_VARS, WORKERS_GROUP
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.task_vars import plain, var

# Registered results that may carry a model, in the order they are looked at.
MODEL_SOURCES = ("flodl_preflight_run", "flodl_topology_run", "flodl_launch_env")
# The controller's environment the reader reads.
_ENV = (ENV_NET_TIMEOUT_SCALE, "FLODL_HOST_NAME")


def run_nonce() -> str:
    """This ansible-playbook run: the parent process (the action's worker is forked by it) and its start time."""
    ppid = os.getppid()
    try:
        with open(f"/proc/{ppid}/stat", "rb") as handle:
            start = handle.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError, UnicodeDecodeError):
        start = ""  # no /proc: the process id alone
    return f"{ppid}:{start}"


def run_fingerprint(task_vars: Mapping[str, Any], templar: Any) -> str:
    """What a model of this run was built from; reads the play host's own variables, no worker's."""
    workers = (task_vars.get("groups") or {}).get(WORKERS_GROUP) or []
    names = (*CLUSTER_VARS, *RUN_VARS)
    return fingerprint({
        "run": run_nonce(),
        "workers": [str(h) for h in workers],
        "play": [str(h) for h in task_vars.get("ansible_play_hosts_all") or []],
        "on_worker": task_vars.get("inventory_hostname") in workers,
        "vars": {name: var(task_vars, templar, name) for name in names if name in task_vars},
        "env": {name: os.environ.get(name) for name in _ENV},
    })


def received(task_vars: Mapping[str, Any], templar: Any, phases: list[str], connections: bool,
             print_: str) -> tuple[RunContext, str] | None:
    """(the model an earlier step of this run built, the variable it came in), or None."""
    for source in MODEL_SOURCES:
        registered = task_vars.get(source)
        if not isinstance(registered, Mapping) or RESULT_KEY not in registered:
            continue
        ctx = from_model(plain(registered[RESULT_KEY]), phases, connections, print_, _token(task_vars, templar),
                         vault_values.decrypted)
        if ctx is not None:
            return ctx, source
    return None


def _token(task_vars: Mapping[str, Any], templar: Any) -> str | None:
    join = var(task_vars, templar, "flodl_controller_join")
    token = join.get("token") if isinstance(join, Mapping) else None
    return token if isinstance(token, str) else None


def trace(source: str, validations: int, resolved: int) -> dict[str, Any]:
    """How a step got its model: ``built`` or the variable it came in, validations run, connections resolved."""
    return {"source": source, "validations": validations, "connections_resolved": resolved}


def fields(ctx: RunContext, with_model: bool = True) -> dict[str, Any]:
    """What a step adds to its result: its trace, and the model when it built one for the later steps."""
    out: dict[str, Any] = {TRACE_KEY: dict(ctx.trace)}
    if with_model and ctx.handoff is not None:
        out[RESULT_KEY] = thawed(ctx.handoff)
    return out
