# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ABI section (with ``flodl_prebuild``): the CPU arch and the libc, as two probe parts, and their finding.

Can a binary built on the build host exec on a worker? The arch part (``uname -m``) also runs alone on the build
host and on the controller, so every arch preflight compares is read by the same part and parser. Pure functions.
"""
from __future__ import annotations

from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import (
    ERROR, NOTE, WARNING, Finding, ProbePart, first_line)

MARK_ABI = "__FLODL_ABI__"
MARK_LDD = "__FLODL_LDD__"
ARCH_PART = f"echo {MARK_ABI}; uname -m"
LIBC_PART = f"echo {MARK_LDD}; ldd --version 2>&1 | head -1"


def arch_part() -> str:
    """Its section: the mark, then ``uname -m``."""
    return ARCH_PART


def libc_part() -> str:
    """Its section: the mark, then the first line of ``ldd --version`` (glibc and musl both print a banner)."""
    return LIBC_PART


def check_abi(host: str, build_arch: str, remote_uname: str, remote_ldd: str) -> Finding | None:
    """Can a binary built on the build host exec on this worker? Arch first, then libc."""
    remote_arch = (remote_uname or "").strip()
    if not remote_arch:
        return Finding(
            WARNING,
            "arch",
            f"{host}: `uname -m` printed nothing, so the CPU arch is unknown and the ABI check was skipped; "
            "a wrong arch would only show at launch as `Exec format error`. Check that uname works there.",
        )
    if remote_arch != build_arch:
        return Finding(
            ERROR,
            "arch",
            f"{host}: CPU arch mismatch: the build host compiles {build_arch} binaries but {host} is "
            f"{remote_arch}; the prebuilt binary would fail there with `Exec format error`. "
            f"Use a {build_arch} worker, or point flodl_build_host at a {remote_arch} build host "
            "(or set flodl_prebuild: false so the host builds natively).",
        )
    banner = (remote_ldd or "").strip()
    lowered = banner.lower()
    if "musl" in lowered:
        return Finding(
            ERROR,
            "libc",
            f"{host}: musl libc (`ldd --version` says {banner.splitlines()[0]!r}); flodl binaries are "
            "linked against glibc and will not load on a musl system such as Alpine. Use a glibc "
            "distribution on this worker (or set flodl_prebuild: false so it builds natively).",
        )
    first = banner.splitlines()[0].strip() if banner else ""
    if first and ("glibc" in lowered or "gnu libc" in lowered):
        return Finding(
            NOTE,
            "libc",
            f"{host}: glibc reports {first!r}; if a run fails with `GLIBC_x.yy not found`, this "
            "worker's glibc is older than the build host's: build on the host with the oldest glibc.",
        )
    return None


ARCH: ProbePart[str] = ProbePart(name="uname", mark=MARK_ABI, section=True, parse=first_line,
                                 asked=lambda ask: arch_part() if ask.arch or ask.prebuilt else None)
LIBC: ProbePart[str] = ProbePart(name="ldd", mark=MARK_LDD, section=True, parse=first_line,
                                 asked=lambda ask: libc_part() if ask.prebuilt else None)
