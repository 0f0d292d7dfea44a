# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The directories a run writes in the project, checked with the run before any host is contacted.

The run lock, the launch logs, the run records, the prebuild envelope and the build target dirs
all live under ``target/cluster`` of the checkout (``flodl_project_dir``, default
``flodl_controller_path``). A symbolic link on the way that leads out of the checkout would make the
run write there: refused now, and again when each directory is created (:func:`make_dirs_under`).
"""
from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable

from ansible_collections.flodl.cluster.plugins.module_utils._files.file_modes import DIR_MODE, make_dirs, set_exact_mode
from ansible_collections.flodl.cluster.plugins.module_utils._files.safe_files import UnsafePathError

TARGET_CLUSTER_REL = "target/cluster"


def _inside(real_root: str, path: str) -> bool:
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip("/") + "/")


def _parts(rel: str) -> list[str]:
    parts = [p for p in rel.split("/") if p and p != "."]
    if rel.startswith("/") or ".." in parts or "\0" in rel:
        raise ValueError(f"not a relative path inside the root: {rel!r}")
    return parts


def _component_problem(root: str, real_root: str, path: str, st: os.stat_result) -> str | None:
    if stat.S_ISLNK(st.st_mode):
        if not _inside(real_root, path):
            return (f"{path} is a symbolic link to {os.path.realpath(path)}, outside the project {root}; refusing to "
                    "create or write anything through it (the run lock, build directories, logs). Remove the link "
                    "(and check who made it) or point it inside the project, then run again")
        try:
            st = os.stat(path)
        except OSError:
            return f"{path} is a dangling symbolic link; remove it, then run again"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} exists but is not a directory; remove it, then run again"
    return None


def _walk(root: str, rel: str, create_mode: int | None = None) -> tuple[str, str | None]:
    """Walk ``root/rel`` one component at a time: (the path, the first component's problem or None).

    Without ``create_mode`` the walk stops, clean, at the first component that does not exist, and a
    component that cannot be looked at is the problem; with it, a missing component is created
    (``mkdir`` never follows a link at the name it creates) before it is checked.
    """
    real_root = os.path.realpath(root)
    current = root.rstrip("/") or "/"
    for part in _parts(rel):
        current = os.path.join(current, part)
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            if create_mode is None:
                return current, None
            try:
                os.mkdir(current, 0o700)  # private until its mode is set, whatever the umask
                set_exact_mode(current, create_mode)
            except FileExistsError:
                pass
            st = os.lstat(current)
        except OSError as exc:
            if create_mode is not None:
                raise
            return current, f"{current} cannot be checked ({exc.strerror}); fix its permissions, then run again"
        problem = _component_problem(root, real_root, current, st)
        if problem:
            return current, problem
    return current, None


def link_escape_problem(root: str, rel: str) -> str | None:
    """Why the run must not create ``root/rel`` (a link out of ``root`` on the way), or None.

    Only what exists is checked (nothing is created); see :func:`make_dirs_under`.
    """
    return _walk(root, rel)[1]


def make_dirs_under(root: str, rel: str, mode: int = DIR_MODE) -> str:
    """``root/rel`` as a directory inside ``root``, created one component at a time; returns it.

    Each component is checked before the next is created in it: a symbolic link whose target is
    outside ``root`` (links in ``root`` itself followed) or a non-directory is refused
    (UnsafePathError naming the component), so nothing is created or written through a link out
    of the project; a link that stays inside ``root`` is allowed. Each directory created gets ``mode``
    whatever the umask; existing ones are left as they are.
    """
    make_dirs(root, DIR_MODE)  # the root is the operator's; only what is under it is checked
    path, problem = _walk(root, rel, mode)
    if problem:
        raise UnsafePathError(errno.EXDEV, problem)
    return path


def write_dir_problems(checkout: str, target_rels: Iterable[str] = ()) -> list[str]:
    """``controller: ...`` problems for every directory a run writes (lock, logs, envelope, builds: all under
    the checkout) behind a link out of it. ``controller.path`` only holds the libtorch variants: nothing is
    written there."""
    found: list[str | None] = []
    for rel in (TARGET_CLUSTER_REL, *target_rels):
        try:
            found.append(link_escape_problem(checkout, rel))
        except ValueError:
            continue  # a host or arch the validator refuses already
    return [f"controller: {p}" for p in dict.fromkeys(found) if p]
