# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A connect bound on flodl's launcher ssh: a worker that never answers fails the launch, never hangs it.

flodl's launcher reaches each worker with ssh options of its own (keepalives, BatchMode) but no
``ConnectTimeout``: a host that accepts TCP and never sends its banner holds the launcher (and the
play) for good. ssh's ``ConnectTimeout`` bounds the TCP connect and the banner exchange; the worker's
own ``ssh.options`` come first in the launcher's argv, so the bound is appended there, in the
topology, unless the worker sets one itself. Pure.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

DEFAULT_SECONDS = 10
OPTION = "ConnectTimeout"


def sets_its_own(worker: Mapping[str, Any]) -> bool:
    ssh = worker.get("ssh")
    options = ssh.get("options") if isinstance(ssh, Mapping) else None
    return any(str(o).split("=", 1)[0].strip().lower() == OPTION.lower() for o in options or [])


def cluster_with_connect_bound(cluster: Mapping[str, Any], seconds: int, skip: frozenset[str] = frozenset()) -> Any:
    """A copy with ``ConnectTimeout=<seconds>`` appended to every remote worker's ``ssh.options``.

    ``skip``: workers never reached over ssh (the controller's own box); ``seconds`` 0 leaves the
    topology as it is (fdl-cli's bytes). A worker that sets its own ConnectTimeout keeps it.
    """
    if seconds <= 0:
        return cluster
    out = copy.deepcopy(dict(cluster))
    for worker in out.get("workers") or []:
        if not isinstance(worker, dict) or str(worker.get("host")) in skip or sets_its_own(worker):
            continue
        ssh = dict(worker.get("ssh") or {})
        ssh["options"] = [*(ssh.get("options") or []), f"{OPTION}={int(seconds)}"]
        worker["ssh"] = ssh
    return out
