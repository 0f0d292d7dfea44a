# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One machine, one worker: workers whose ssh connection reaches the same address and port.

Two workers on one sshd would start two sets of ranks on one machine that each believe they own
its GPUs. Equal spellings only, without a name lookup: an IP address is compared in its canonical
form (``fd00:0::2`` is ``fd00::2``, ``[fd00::2]`` too, ``::ffff:10.0.0.1`` is ``10.0.0.1``), a
name case-insensitively. ``010.0.0.1`` is not ``10.0.0.1`` (ssh's resolver reads it as octal, so
8.0.0.1), and ``localhost`` is not ``127.0.0.1`` (that takes a lookup): both stay distinct. Two
workers on one machine behind different ssh ports (two containers, each with its own GPUs) are
two sshds and stay allowed, and so are equal addresses behind different jump hosts.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping, Sequence
from typing import Any

DEFAULT_SSH_PORT = 22
# Options that change which machine an address means (another network behind a jump host).
_ROUTE_OPTIONS = ("proxyjump", "proxycommand")


def canonical_address(target: str) -> str:
    """The machine part of an ssh destination (``user@`` dropped), canonical when it is an IP address."""
    address = target.rsplit("@", 1)[-1].strip()
    bare = address[1:-1] if address.startswith("[") and address.endswith("]") else address
    try:
        ip = ipaddress.ip_address(bare)  # strict: no octal or shortened IPv4 forms
    except ValueError:
        return address.lower().rstrip(".")
    mapped = getattr(ip, "ipv4_mapped", None)
    return str(mapped or ip)


def _options(ssh: Mapping[str, Any]) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in ssh.get("options") or []:
        if isinstance(item, str) and "=" in item:
            key, value = item.split("=", 1)
            found.setdefault(key.strip().lower(), value.strip())
    return found


def endpoint(worker: Mapping[str, Any]) -> tuple[str, int, tuple[str, ...]] | None:
    """(address, port, route) that ssh reaches for ``worker``, or None when it is not plainly known."""
    ssh = worker.get("ssh") if isinstance(worker.get("ssh"), Mapping) else {}
    target = ssh.get("target") or worker.get("host")
    if not isinstance(target, str) or not target.strip():
        return None
    options = _options(ssh)
    port = ssh.get("port") if ssh.get("port") is not None else options.get("port", DEFAULT_SSH_PORT)
    try:
        port = int(port)
    except (TypeError, ValueError):
        return None  # the validator reports the port
    return canonical_address(target), port, tuple(options.get(k, "") for k in _ROUTE_OPTIONS)


def same_machine_problems(workers: Sequence[Any], place: Callable[[int, Any], str]) -> list[str]:
    """A problem for each worker that reaches the same sshd as an earlier one, naming both.

    ``place(index, host)`` names a worker's connection (``host h2 (worker 1): flodl_ssh``).
    """
    return [text for _index, text in same_machine_findings(workers, place)]


def same_machine_findings(workers: Sequence[Any], place: Callable[[int, Any], str]) -> list[tuple[int, str]]:
    """(the later worker's index, its problem) for each worker that reaches the same sshd as an earlier one."""
    seen: dict[tuple[str, int, tuple[str, ...]], tuple[int, Any]] = {}
    problems: list[tuple[int, str]] = []
    for index, worker in enumerate(workers):
        if not isinstance(worker, Mapping):
            continue
        key = endpoint(worker)
        if key is None:
            continue
        if key in seen:
            first, first_host = seen[key]
            if first_host == worker.get("host"):
                continue  # a duplicate host, refused as such
            problems.append((index, (
                f"{place(index, worker.get('host'))}: reaches {key[0]} port {key[1]} over ssh, the same machine as "
                f"worker {first} ({first_host}); one machine is one worker: list all its GPUs in that worker's "
                "local_devices and remove this one, or fix the address (ansible_host, flodl_ssh.target) if it "
                "names the wrong machine. Two workers on one machine need two sshds on different ports (e.g. "
                "two containers)"
            )))
        else:
            seen[key] = (index, worker.get("host"))
    return problems
