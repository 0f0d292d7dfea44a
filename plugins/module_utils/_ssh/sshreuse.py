# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One ssh handshake per worker per run: the preflight's connection, reused by the launcher's fan-out.

With ``flodl_ssh_reuse`` on (the default) in a play that launches, the preflight probe
opens each worker's ssh as a master (``ControlMaster=auto``) whose socket lives in a
private 0700 directory made for this run; the launch topology gives each worker's
``ssh.options`` only ``ControlPath``: with ``ControlMaster`` at ssh's default (``no``), a
client whose ControlPath names a live master rides it, and connects normally when the
socket is gone. So the launcher's ssh (its orphan cleanup and its fan-out) reuses the
probe's connection, and the topology grows by one option per worker (it travels in one
size-limited environment string). ``ControlPersist`` bounds an idle master; the launch
step closes every master when the launcher exits, and a watcher
(plugin_utils._proc.sshreuse_watch) does when the run ends before that.

A worker whose own options already set ``ControlMaster`` or ``ControlPath`` is left alone
(sshargs.uses_control_master). Pure: the directory is made and cleaned by plugin_utils.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._ssh.sshargs import uses_control_master

# An idle master outlives its last client by this long (seconds): long enough for a no-op prebuild between
# the probe and the fan-out; a longer prebuild only costs the fan-out a fresh handshake (ControlMaster=auto).
PERSIST_SECONDS = 120
# A unix socket path holds at most 104 bytes on some systems (108 on Linux); %C expands to 40 hex digits.
MAX_DIR_LEN = 104 - 1 - 40 - 1
DIR_PREFIX = "flodl-ssh-"


def control_path(control_dir: str) -> str:
    return f"ControlPath={control_dir.rstrip('/')}/%C"


def reuse_options(control_dir: str) -> list[str]:
    """The probe's ``-o`` values: open (or join) this run's master connection to a worker."""
    return ["ControlMaster=auto", control_path(control_dir), f"ControlPersist={PERSIST_SECONDS}"]


def client_options(control_dir: str) -> list[str]:
    """The launcher's ``-o`` values: ride the master when it is there, else connect as usual."""
    return [control_path(control_dir)]


def dir_fits(control_dir: str) -> bool:
    return len(control_dir.rstrip("/")) <= MAX_DIR_LEN


def shares(worker: Mapping[str, Any]) -> bool:
    """Whether this worker's connection may be shared: not when its options set their own sharing."""
    ssh = worker.get("ssh")
    options = [str(o) for o in (ssh.get("options") or [])] if isinstance(ssh, Mapping) else []
    return not uses_control_master(options)


def with_reuse(worker: Mapping[str, Any], control_dir: str | None, *, client: bool = False) -> Mapping[str, Any]:
    """The worker with this run's sharing options appended to ``ssh.options`` (a copy); as is without a dir.

    ``client``: only what a client of the master needs (the launch topology), not what opens one (the probe).
    """
    if not control_dir or not shares(worker):
        return worker
    out = copy.deepcopy(dict(worker))
    ssh = dict(out.get("ssh") or {})
    added = client_options(control_dir) if client else reuse_options(control_dir)
    ssh["options"] = [*(ssh.get("options") or []), *added]
    out["ssh"] = ssh
    return out


def cluster_with_reuse(cluster: Mapping[str, Any], control_dir: str | None, skip: frozenset[str] = frozenset()) -> Any:
    """The launch topology with every remote worker's client option added (``skip``: the controller's own box)."""
    if not control_dir:
        return cluster
    out = dict(cluster)
    out["workers"] = [w if str(w.get("host")) in skip else with_reuse(w, control_dir, client=True)
                      for w in cluster.get("workers") or []]
    return out
