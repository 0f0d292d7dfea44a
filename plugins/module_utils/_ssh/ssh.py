# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ssh exactly as flodl reaches its workers: the argv shapes.

Probes and cleanups use flodl's own ssh argv (docs/launcher-contract.md §7a, §3f)
rather than an Ansible connection per host: it is the path the launcher
will take at fan-out, and a single parallel sweep costs one round trip per
host instead of Ansible's per-task, per-host overhead.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._ssh.connect_bound import cluster_with_connect_bound

# Keepalives: a host that drops off the network mid-probe fails in ~30 s instead of hanging.
KEEPALIVE = ["-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3"]
PROBE_DEFAULTS = ["-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", *KEEPALIVE]
LAUNCHER_DEFAULTS = [
    "-T",
    "-o",
    "ServerAliveInterval=10",
    "-o",
    "ServerAliveCountMax=3",
    "-o",
    "BatchMode=yes",
    "-o",
    "StrictHostKeyChecking=accept-new",
]

HOST_KEY_CHANGED = "changed"
HOST_KEY_UNKNOWN = "unknown"
HOST_KEY_REVOKED = "revoked"
# A key marked @revoked in known_hosts: ssh refuses it whatever StrictHostKeyChecking says.
_HOST_KEY_REVOKED = re.compile(r"REVOKED HOST KEY DETECTED|host key for \S+ (?:is marked as|was) revoked",
                               re.IGNORECASE)
_HOST_KEY_CHANGED = re.compile(r"REMOTE HOST IDENTIFICATION HAS CHANGED", re.IGNORECASE)
_HOST_KEY_UNKNOWN = re.compile(
    r"No \S+ host key is known for .* and you have requested strict checking|Host key verification failed",
    re.IGNORECASE,
)


def resolve_identity(identity: str, project_root: str | None) -> str:
    """fdl-cli's own ssh resolves a relative key against its project root."""
    if identity.startswith(("/", "~")) or not project_root:
        return identity
    return os.path.join(project_root, identity)


def _user_options(ssh: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for option in ssh.get("options") or []:
        out += ["-o", str(option)]
    return out


def target_of(worker: Mapping[str, Any]) -> str:
    ssh = worker.get("ssh") or {}
    return str(ssh.get("target") or worker["host"])


def probe_argv(worker: Mapping[str, Any], script: str, project_root: str | None = None) -> list[str]:
    """fdl-cli's one-shot argv: -p, -l, -i, user -o options, its defaults plus keepalives, ``--`` (§7a)."""
    ssh = worker.get("ssh") or {}
    argv = ["ssh"]
    if ssh.get("port") is not None:
        argv += ["-p", str(ssh["port"])]
    if ssh.get("user"):
        argv += ["-l", str(ssh["user"])]
    if ssh.get("identity_file"):
        argv += ["-i", resolve_identity(str(ssh["identity_file"]), project_root)]
    argv += _user_options(ssh)
    argv += PROBE_DEFAULTS
    # "--": a destination starting with "-" can never be read as an option.
    argv += ["--", target_of(worker), script]
    return argv


def launcher_argv(
    worker: Mapping[str, Any],
    remote_command: str,
    host_user: str | None = None,
    project_root: str | None = None,
    connect_timeout: int = 0,
) -> list[str]:
    """The launcher's argv without a tunnel (§3f), used for orphan cleanup (§3g), with ``--``.

    ``connect_timeout``: the bound the launch topology gives the worker (module_utils._ssh.connect_bound),
    in the same place, so these ssh are bounded as the launcher's will be.
    """
    ssh = worker.get("ssh") or {}
    if connect_timeout > 0:
        ssh = (cluster_with_connect_bound({"workers": [{**worker, "ssh": ssh}]}, connect_timeout)["workers"][0]
               .get("ssh") or {})
    argv = ["ssh", *_user_options(ssh), *LAUNCHER_DEFAULTS]
    if ssh.get("port") is not None:
        argv += ["-p", str(ssh["port"])]
    user = ssh.get("user") or (host_user or "").strip()
    if user:
        argv += ["-l", str(user)]
    if ssh.get("identity_file"):
        argv += ["-i", resolve_identity(str(ssh["identity_file"]), project_root)]
    argv += ["--", target_of(worker), remote_command]
    return argv


def host_key_failure(stderr: str) -> str | None:
    """``revoked``, ``changed`` or ``unknown`` when ssh's stderr says host-key verification failed, else None."""
    text = stderr or ""
    if _HOST_KEY_REVOKED.search(text):
        return HOST_KEY_REVOKED
    if _HOST_KEY_CHANGED.search(text):
        return HOST_KEY_CHANGED
    if _HOST_KEY_UNKNOWN.search(text):
        return HOST_KEY_UNKNOWN
    return None
