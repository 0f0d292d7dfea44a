# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Why a host has no prebuilt binary, as a value, and its one text for the operator.

Pure functions: the reasons (missing variant, exit status, timeout), a build's output tail and the
single failure message naming every failed host.
"""
from __future__ import annotations

from dataclasses import dataclass

DEFAULT_TAIL_LINES = 20


def tail_lines(text: str, count: int = DEFAULT_TAIL_LINES) -> list[str]:
    """The last ``count`` non-trailing-blank lines of ``text``."""
    lines = text.rstrip("\n").splitlines()
    if count <= 0:
        return []
    return lines[-count:]


@dataclass(frozen=True)
class HostFailure:
    """Why one host has no binary."""

    host: str
    arch: str | None
    reason: str
    command: str | None = None
    cwd: str | None = None
    log: str | None = None
    tail: tuple[str, ...] = ()


def missing_variant_reason(variant_dir: str) -> str:
    return (
        f"libtorch variant not found on the build host: {variant_dir}/lib is not a directory "
        "(resolved as <flodl_controller_path>/libtorch/<flodl_arch>)"
    )


def exit_reason(rc: int) -> str:
    if rc < 0:
        return f"build killed by signal {-rc}"
    return f"build exited with status {rc}"


def timeout_reason(seconds: float) -> str:
    shown = int(seconds) if float(seconds).is_integer() else seconds
    return f"build timed out after {shown} s; its process group was killed (raise build_timeout if it needs longer)"


def format_failure(failure: HostFailure) -> str:
    """One host's block: host and variant, reason, then command, cwd, log and output tail."""
    variant = failure.arch if failure.arch else "(no flodl_arch)"
    lines = [f"- host {failure.host}, variant {variant}: {failure.reason}"]
    if failure.command is not None:
        lines.append(f"    command: {failure.command}")
    if failure.cwd is not None:
        lines.append(f"    cwd: {failure.cwd}")
    if failure.log is not None:
        lines.append(f"    full log: {failure.log}")
    if failure.tail:
        lines.append(f"    last {len(failure.tail)} line(s) of output:")
        lines.extend(f"      | {line}" for line in failure.tail)
    return "\n".join(lines)


def format_failures(failures: list[HostFailure], built: int = 0) -> str:
    """The single message naming every failed host (hosts in the given order)."""
    head = f"flodl prebuild failed on {len(failures)} host(s): {', '.join(f.host for f in failures)}"
    if built:
        head += f" ({built} other build(s) completed)"
    head += "; no envelope was produced and nothing will be launched"
    return "\n".join([head, *(format_failure(f) for f in failures)])
