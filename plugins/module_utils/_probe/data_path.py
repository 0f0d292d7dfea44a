# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The data path (``flodl_data_path``, else the convention ``/flodl/data``): is it a directory, is it readable.

Two probe parts, each printing its own mark (``DIR``, ``READ``); every host runs them (the workers, the launch host
in its session, the controller here). Its answers also tell whether a probe answered at all, so
a probe without them is incomplete (module_utils._preflight.preflight_verdict). Pure functions only.
"""
from __future__ import annotations

from collections.abc import Sequence

from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import posix_quote
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import (
    ERROR, WARNING, Finding, ProbePart)

MARK_DIR = "__FLODL_DP_DIR__"
MARK_READ = "__FLODL_DP_READ__"


def dir_script(path: str) -> str:
    """``1`` when the effective data path is a directory, else ``0``."""
    q = posix_quote(path)
    return f"if [ -d {q} ]; then echo {MARK_DIR}=1; else echo {MARK_DIR}=0; fi"


def read_script(path: str) -> str:
    """``1`` when this user can read the effective data path, else ``0``."""
    q = posix_quote(path)
    return f"if [ -r {q} ]; then echo {MARK_READ}=1; else echo {MARK_READ}=0; fi"


def parse_flag(texts: Sequence[str]) -> bool | None:
    """``1`` True, ``0`` False, anything else None (not answered)."""
    return {"1": True, "0": False}.get(texts[0].strip()) if texts else None


def check_data_path(host: str, path: str, declared: bool, is_dir: bool, readable: bool) -> Finding | None:
    """The shared data mount: declared-and-missing is fatal, the convention default only warns."""
    if not is_dir:
        if declared:
            return Finding(
                ERROR,
                "data_path",
                f"{host}: the declared data path {path} is missing (or not a directory); training reads "
                "its data and writes checkpoints on this shared mount, so the run would break there. "
                "Mount the shared filesystem at that path, or correct flodl_data_path.",
            )
        return Finding(
            WARNING,
            "data_path",
            f"{host}: the convention data path {path} is not present (no flodl_data_path declared); "
            f"fine without shared storage, otherwise mount it at {path} or set flodl_data_path.",
        )
    if not readable:
        return Finding(
            ERROR,
            "data_path",
            f"{host}: the data path {path} exists but this ssh user cannot read it; ranks there would "
            "fail to load data or checkpoints. Fix the mount permissions or uid mapping.",
        )
    return None


DIR: ProbePart[bool | None] = ProbePart(
    name="dir_ok", mark=MARK_DIR, section=False, parse=parse_flag,
    asked=lambda ask: dir_script(ask.data_path) if ask.data_path is not None else None)
READ: ProbePart[bool | None] = ProbePart(
    name="read_ok", mark=MARK_READ, section=False, parse=parse_flag,
    asked=lambda ask: read_script(ask.data_path) if ask.data_path is not None else None)
