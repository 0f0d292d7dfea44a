# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Orphan cleanup policy: which binary to stop on each worker, how, and what the answer means.

flodl's launcher stops leftover ranks of the prebuilt binary with ``pkill``
before fan-out and after supervision; teardown does the same on demand, for
a run whose launcher died. Only hosts with a known prebuilt binary are
touched, and only processes *of* that binary are matched.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._core.phase_result import entry
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.model import Worker
from ansible_collections.flodl.cluster.plugins.module_utils._run.prebuild_layout import binary_subpath
from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import always_quote

_ERE_SPECIAL = re.compile(r"([.\[\]\\^$*+?(){}|])")


def self_safe_pattern(abs_bin: str) -> str:
    """An ERE matching ``abs_bin`` literally whose own text does not match it.

    ``pkill -f`` compares against full command lines, and the remote shell
    running the cleanup carries the pattern in its own command line: a plain
    pattern would make pkill kill that shell before the KILL pass. Putting
    the first character in a bracket expression (``[/]srv/...``) keeps the
    match while the literal text ``[/]`` no longer matches. The pattern is
    anchored to the start of the command line, so only processes *of* the
    binary match (not, say, an editor or a wrapper shell naming the path).
    """
    if abs_bin.startswith("/"):
        return "^[/]" + _ERE_SPECIAL.sub(r"\\\1", abs_bin[1:]) + "( |$)"
    return "^" + _ERE_SPECIAL.sub(r"\\\1", abs_bin) + "( |$)"


def cleanup_script(abs_bin: str) -> str:
    """TERM, a one-second grace, KILL; reports pkill's absence and what was found."""
    pat = always_quote(self_safe_pattern(abs_bin))
    return (
        "if ! command -v pkill >/dev/null 2>&1; then echo __FLODL_PKILL__=absent; exit 0; fi; "
        f"n=$(pgrep -f {pat} 2>/dev/null | wc -l); echo __FLODL_FOUND__=$n; "
        f'if [ "$n" -gt 0 ]; then pkill -TERM -f {pat} >/dev/null 2>&1; sleep 1; '
        f"pkill -KILL -f {pat} >/dev/null 2>&1; fi; "
        f"echo __FLODL_LEFT__=$(pgrep -f {pat} 2>/dev/null | wc -l); true"
    )


def marker(stdout: str, name: str) -> str | None:
    for line in stdout.splitlines():
        if line.startswith(f"__FLODL_{name}__="):
            return line.split("=", 1)[1].strip()
    return None


def binary_of(worker: Worker, envelope: Mapping[str, Any] | None, cmd: str | None) -> str | None:
    """The absolute binary to stop on a worker: its envelope entry, else where prebuild puts it.

    None when nothing is known (no envelope entry, or no envelope and no arch):
    such a host is left alone, as flodl's launcher leaves it.
    """
    host = worker.host
    entry_ = envelope.get(host) if envelope is not None else None
    if entry_ and entry_.get("bin"):
        rel = str(entry_["bin"])
    elif envelope is None and cmd and worker.arch:
        rel = binary_subpath(host, worker.arch, cmd)
    else:
        return None
    return rel if rel.startswith("/") else f"{worker.path.rstrip('/')}/{rel}"


@dataclass
class CleanupAnswer:
    """One host's cleanup, as reported by :func:`cleanup_script` over ssh."""

    ok: bool
    stdout: str = ""
    why: str = ""


def judge(host: str, abs_bin: str, answer: CleanupAnswer) -> tuple[dict[str, Any], str | None]:
    """(per-host entry, warning or None) for one host's cleanup."""
    if not answer.ok:
        warning = f"host {host}: cleanup could not run ({answer.why}); rank processes may remain there"
        return entry("unreachable", warning, bin=abs_bin), warning
    if marker(answer.stdout, "PKILL") == "absent":
        warning = (
            f"host {host}: pkill is not installed, so leftover ranks of {abs_bin} cannot be stopped by name; "
            "install procps (only the launcher's trap wrapper protects this host)"
        )
        # Not a failure: nothing can be stopped by name there, which the launcher's own cleanup also meets.
        return entry("ok", warning, bin=abs_bin, pkill="absent"), warning
    found = int(marker(answer.stdout, "FOUND") or 0)
    left = int(marker(answer.stdout, "LEFT") or 0)
    if left:
        warning = f"host {host}: {left} process(es) of {abs_bin} survived SIGKILL"
        return entry("failed", warning, bin=abs_bin, found=found, left=left), warning
    if found:
        return entry("changed", f"stopped {found} process(es) of {abs_bin}", bin=abs_bin, found=found, left=0), None
    return entry("ok", f"nothing of {abs_bin} was running", bin=abs_bin, found=0, left=0), None
