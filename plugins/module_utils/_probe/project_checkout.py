# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A worker's project checkout (``flodl_path``), as one probe part: its script, parser and finding.

flodl's launcher starts every rank of a worker in its checkout, so a missing or unenterable one is caught before
any build. Pure functions only.
"""
from __future__ import annotations

from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import posix_quote
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import ERROR, Finding, ProbePart, first_line

MARK_PROJECT = "__FLODL_PROJECT__"


def project_script(path: str) -> str:
    """The worker's project checkout (``flodl_path``): 1 a directory it can enter, 2 one it cannot, 0 none."""
    q = posix_quote(path)
    return (f"if [ -d {q} ]; then if [ -x {q} ]; then echo {MARK_PROJECT}=1; else echo {MARK_PROJECT}=2; fi; "
            f"else echo {MARK_PROJECT}=0; fi")


def check_project_path(host: str, path: str, answer: str | None) -> Finding | None:
    """The worker's checkout (``flodl_path``): flodl's launcher starts every rank of the worker from there."""
    if answer not in ("0", "2"):
        return None  # there and enterable, or not asked
    found = ("is missing (or not a directory)" if answer == "0"
             else "exists but this ssh user cannot enter it (no search permission)")
    return Finding(
        ERROR,
        "project_path",
        f"{host}: the project path {path} (flodl_path) on {host} {found}; flodl's launcher starts each rank "
        "there (cd into the checkout, then the prebuilt binary or docker compose), so no rank of this worker "
        f"could start. Fix: mount or check out the project at {path} on {host} (readable by the ssh user), or "
        f"set flodl_path for {host} to where the project is.",
    )


# Its answer (``1``, ``2`` or ``0``) is the line after its mark, as the probe printed it.
PART: ProbePart[str] = ProbePart(name="project", mark=MARK_PROJECT, section=False, parse=first_line,
                                 asked=lambda ask: project_script(ask.project) if ask.project is not None else None)
