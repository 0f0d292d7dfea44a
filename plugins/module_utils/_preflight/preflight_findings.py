# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight's checks: one concern of one host each, a problem as a ``Finding``.

Behaviour follows fdl-cli's pre-flight host check (docs/launcher-contract.md §3a step 4 and §7a):

* a declared (explicit) data path that is missing is an error, the
  convention default ``/flodl/data`` missing is only a warning, a present
  but unreadable path is always an error;
* when prebuilding, the worker's CPU arch must equal the build host's
  (compared first), musl libc is an error, a glibc banner is an advisory
  note, an empty ``uname -m`` is indeterminate (warning), an explicit
  ``absent`` pkill is a warning;
* an unreachable host or a failed probe is a warning (an error with
  ``flodl_preflight_require_all``): the
  real fan-out ssh reports genuine connectivity problems anyway; except a
  failed host-key verification, which is an error with its fix (a host ssh
  cannot authenticate was not checked, and must not pass as "unreachable");
* ``local_devices: all`` needs a GPU count; zero usable GPUs is an error;
* the worker's project path (``flodl_path``) missing or not enterable is an error: every rank starts there;
* a threshold-style probe check (free space) judges its own answer: module_utils._probe.check_registry.
"""
from __future__ import annotations

from ansible_collections.flodl.cluster.plugins.module_utils._probe.gpu_count import parse_gpu_counts
from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import posix_quote
# A finding and its levels are the probe checks' vocabulary too (module_utils._probe.probe_check).
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import (  # noqa: F401
    ERROR, WARNING, Finding)
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.ssh import HOST_KEY_CHANGED, HOST_KEY_REVOKED, target_of
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.model import Worker
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.cluster_ranks import device_count
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError


def check_gpus(worker: Worker, text: str | None) -> tuple[dict[str, int] | None, Finding | None]:
    """GPU counts for ``local_devices: all`` and whether the worker would get any rank."""
    host = worker.host
    try:
        counts = parse_gpu_counts(text or "")
    except ValueError as exc:
        return None, Finding(
            ERROR,
            "gpus",
            f"{host}: flodl_local_devices is `all` but the GPU count could not be read ({exc}); "
            "the launch cannot give this worker ranks. Check nvidia-smi / the AMD KFD driver, "
            "or list the devices explicitly.",
        )
    gpus = counts.as_dict()
    try:
        device_count(worker.document, {host: counts})  # the launch's own rank rule, on flodl's entry
    except TopologyError as exc:
        text = "; ".join(exc.problems)
        if text.startswith(f"host {host}:"):
            text = text[len("host "):]
        return gpus, Finding(ERROR, "gpus", text)
    return gpus, None


def host_key_finding(worker: Worker, kind: str) -> Finding:
    """The definitive error for a host whose key ssh would not accept, with the three fixes."""
    host = worker.host
    target = target_of(worker.document).rsplit("@", 1)[-1]  # where ssh goes: the one rule, ssh.target_of
    port = worker.ssh.port if worker.ssh is not None else None
    port_opt = f"-p {port} " if port is not None else ""
    entry = f"[{target}]:{port}" if port not in (None, 22, "22") else target
    if kind == HOST_KEY_REVOKED:
        return Finding(
            ERROR,
            "host_key",
            f"{host}: ssh host-key verification failed: the host key {target} presented is marked @revoked in the "
            "controller's known_hosts (a key known to be stolen or retired), and ssh refuses it whatever "
            "StrictHostKeyChecking says. Preflight could not check this host, and flodl's ssh fan-out would be "
            f"refused too. Fix: find out why {target} still presents a revoked key; give the host new host keys "
            "(remove its old /etc/ssh/ssh_host_* keys, run `ssh-keygen -A`, restart sshd), verify the new key out "
            f"of band and record it (`ssh-keyscan -H {port_opt}{posix_quote(target)} >> ~/.ssh/known_hosts`, under "
            "AWX in the execution environment's known_hosts); keep the @revoked line. Re-scanning or "
            "accept-new cannot help while the host presents the revoked key.",
        )
    if kind == HOST_KEY_CHANGED:
        what = (
            f"the host key {target} presented differs from the one in known_hosts (it changed: a reinstall, "
            "or someone in the middle)"
        )
        first = f"check the new key out of band, remove the old entry (`ssh-keygen -R {posix_quote(entry)}`), then "
    else:
        what = f"no host key for {target} is in the controller's known_hosts and ssh checks strictly"
        first = ""
        routes = [o.split("=", 1)[0].strip().lower() for o in (worker.ssh.options if worker.ssh else ())]
        if "proxyjump" in routes or "proxycommand" in routes:
            # ssh says the same when the jump leg is the one that failed.
            what += " (or, as this worker is reached through a jump host, none for that jump host)"
    return Finding(
        ERROR,
        "host_key",
        f"{host}: ssh host-key verification failed: {what}. Preflight could not check this host, and "
        "flodl's ssh fan-out needs a host it can authenticate. Fix: "
        f"{first}record the key with `ssh-keyscan -H {port_opt}{posix_quote(target)} >> ~/.ssh/known_hosts` "
        "on the controller; under AWX, ship that known_hosts file in the execution environment; or opt in "
        "for this worker alone with `StrictHostKeyChecking=accept-new` in its flodl_ssh.options "
        "(never StrictHostKeyChecking=no).",
    )


def unreachable_finding(host: str, why: str, required: bool = False) -> Finding:
    """A probe that could not run: a warning, or an error when every worker must be checked."""
    if required:
        return Finding(
            ERROR,
            "ssh",
            f"{host}: preflight probe could not run ({why}); this host was not checked, and "
            "flodl_preflight_require_all is true, so every worker of the play must be. Fix: make ssh to "
            f"{host} work (or leave it out with --limit), or set flodl_preflight_require_all: false to have an "
            "unreachable worker only warn.",
        )
    return Finding(
        WARNING,
        "ssh",
        f"{host}: preflight probe could not run ({why}); this host was not checked. The launch "
        "reports a real connectivity problem itself, so this only warns. Check ssh to it.",
    )
