# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Name resolution on the controller: the address shipped as ``controller.host`` and the
workers' extra hosts (``FLODL_INTERNAL_CLUSTER_EXTRA_HOSTS``, docs/launcher-contract.md §3a step 6, §5).

The resolver is injected (``Resolver``) so tests can pin it; nothing else touches the network.
"""
from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Mapping, Sequence
from typing import Any

ENV_CLUSTER_EXTRA_HOSTS = "FLODL_INTERNAL_CLUSTER_EXTRA_HOSTS"

# name -> addresses in resolver order; raises OSError when the name does not resolve.
Resolver = Callable[[str], Sequence[str]]


def system_resolver(name: str) -> list[str]:
    """The controller's NSS view (``/etc/hosts``, DNS, ...), addresses in getaddrinfo order."""
    seen: list[str] = []
    for info in socket.getaddrinfo(name, None):
        addr = str(info[4][0])
        if addr not in seen:
            seen.append(addr)
    return seen


def is_ip_literal(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False


def resolve_host_to_ip(name: str, resolver: Resolver) -> tuple[str | None, str | None]:
    """``(address or None, warning or None)`` with fdl-cli's preference rules.

    An IP literal is returned as is. Otherwise the first non-loopback
    address wins: Debian-style ``/etc/hosts`` maps the machine's own name to
    ``127.0.1.1``, which no other host can dial. A loopback-only answer is
    still returned, with a warning.
    """
    if is_ip_literal(name):
        return name, None
    try:
        addrs = [a for a in resolver(name) if a]
    except (OSError, UnicodeError) as exc:
        return None, f"host {name!r} did not resolve on the controller: {exc}"
    if not addrs:
        return None, f"host {name!r} did not resolve on the controller: no address"
    for addr in addrs:
        if not _is_loopback(addr):
            return addr, None
    return addrs[0], (
        f"host {name!r} resolves only to loopback ({addrs[0]}) on the controller; "
        "other hosts cannot dial it — fix /etc/hosts or use an IP"
    )


def resolve_controller_host(host: str, resolver: Resolver) -> tuple[str, list[str]]:
    """The address shipped as ``controller.host`` (§3a.6) and any warnings.

    When the name does not resolve, the original string is shipped: the
    workers may still resolve it through their own NSS.
    """
    addr, warning = resolve_host_to_ip(host, resolver)
    warnings = [f"controller: {warning}"] if warning else []
    if addr is None:
        warnings.append(f"controller: shipping {host!r} unresolved; workers will resolve it themselves")
        return host, warnings
    return addr, warnings


def cluster_extra_hosts(
    workers: Sequence[Mapping[str, Any]], resolver: Resolver
) -> tuple[list[tuple[str, str]], list[str]]:
    """``(host, ip)`` per worker whose own ``host`` resolves on the controller, and warnings.

    As fdl-cli: only the ``host`` name goes through the controller's
    resolver (an IP literal is its own answer); the ssh target is never
    consulted, and an unresolvable worker is left out. The warning is
    muted when an explicit ssh target exists (the ``host`` is then only a
    label the container may not need to resolve).
    """
    pairs: list[tuple[str, str]] = []
    warnings: list[str] = []
    names = [str(w.get("host") or "") for w in workers]
    # One lookup per name. The launch step's resolver answers from memory: every name was looked up at once
    # before, with one bounded wait (module_utils._cluster.lookups).
    wanted = sorted({n for n in names if n and not is_ip_literal(n)})
    answers = {n: resolve_host_to_ip(n, resolver) for n in wanted}
    for worker, host in zip(workers, names):
        if not host:
            continue
        target = str((worker.get("ssh") or {}).get("target") or "")
        addr, warning = answers[host] if host in answers else resolve_host_to_ip(host, resolver)
        if addr is not None:
            pairs.append((host, addr))
        if warning and not target:
            warnings.append(
                f"host {host}: {warning}; it is left out of {ENV_CLUSTER_EXTRA_HOSTS} "
                "(a containerised launcher will rely on its own resolver)"
            )
    return pairs, warnings


def format_extra_hosts(pairs: Sequence[tuple[str, str]]) -> str:
    return " ".join(f"{host}:{ip}" for host, ip in pairs)


def parse_extra_hosts(text: str) -> list[tuple[str, str]]:
    """Inverse of :func:`format_extra_hosts`; splits each pair at its first ``:`` (IPv6 keeps its colons)."""
    pairs: list[tuple[str, str]] = []
    for item in (text or "").split():
        host, sep, ip = item.partition(":")
        if sep and host and ip:
            pairs.append((host, ip))
    return pairs
