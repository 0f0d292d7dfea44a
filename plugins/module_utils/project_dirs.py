# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The directories a run writes in the project, checked with the run before any host is contacted.

The run lock, the launch logs, the run records and the build target dirs all live under
``target/cluster`` of the checkout (``flodl_project_dir``, default ``flodl_controller_path``); the
prebuild envelope under ``target/cluster`` of ``flodl_controller_path``. A symbolic link on the way
that leads out of its root would make the run write there: refused now, and again when each
directory is created (safe_files.make_dirs_under).
"""
from __future__ import annotations

from collections.abc import Iterable

from ansible_collections.flodl.cluster.plugins.module_utils.safe_files import link_escape_problem

TARGET_CLUSTER_REL = "target/cluster"


def write_dir_problems(checkout: str, controller_path: str, target_rels: Iterable[str] = ()) -> list[str]:
    """``controller: ...`` problems for every written directory behind a link out of its root."""
    found: list[str | None] = []
    for rel in (TARGET_CLUSTER_REL, *target_rels):
        try:
            found.append(link_escape_problem(checkout, rel))
        except ValueError:
            continue  # a host or arch the validator refuses already
    if controller_path and controller_path.rstrip("/") != checkout.rstrip("/"):
        found.append(link_escape_problem(controller_path, TARGET_CLUSTER_REL))
    return [f"controller: {p}" for p in dict.fromkeys(found) if p]
