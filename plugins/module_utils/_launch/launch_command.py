# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The launch command fdl would run for an fdl command: a ``run:`` line or the cargo binary,
natively or in the command's compose service, and the project root as that command sees it.
"""
from __future__ import annotations

from collections.abc import Sequence

from ansible_collections.flodl.cluster.plugins.module_utils._core.constants import CONTAINER_ROOT
from ansible_collections.flodl.cluster.plugins.module_utils._launch.compose_overlay import is_compose_command
from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import posix_quote

ENV_PROJECT_ROOT = "FDL_PROJECT_ROOT"


def run_script_command(script: str, docker_service: str | None, forward: Sequence[str] = ()) -> str:
    """What fdl-cli runs for a ``run:`` command: the line itself, or in the command's compose service.

    In a container it is ``docker compose run --rm`` plus a bare ``-e NAME``
    per forwarded variable, then ``<svc> bash -c '<the line>'``: no
    ``FDL_PROJECT_ROOT``, no ``cd``, nothing appended (the entry wrapping
    of :func:`default_launch_command` is for entry commands only).
    """
    if not docker_service:
        return script
    flags = "".join(f" -e {name}" for name in forward)
    return f"docker compose run --rm{flags} {posix_quote(docker_service)} bash -c {posix_quote(script)}"


def default_launch_command(
    cmd: str,
    cmd_dir: str,
    docker_service: str | None,
    container_root: str = CONTAINER_ROOT,
    forward: Sequence[str] = (),
) -> tuple[str, str]:
    """``(command, cwd relative to the project root)`` fdl would run for ``cmd``.

    A flodl project's training command is a cargo binary of the same name
    as the fdl command: natively ``cargo run --release --bin <cmd>`` in the
    command's directory. With a compose service it is fdl-cli's entry
    wrapping: ``docker compose run --rm -e FDL_PROJECT_ROOT=<root>`` plus a
    bare ``-e NAME`` per variable in ``forward`` (docker takes the value
    from its own environment, so it never lands on the command line),
    then ``<svc> bash -c '<inner>'`` where the ``cd`` target and the inner
    line are each POSIX-quoted: a hostile command directory stays one
    argument of ``cd``. Upstream joins the entry and its (here empty)
    argument list with a space, so the inner line ends in one.
    """
    run = f"cargo run --release --bin {posix_quote(cmd)}"
    sub = (cmd_dir or "").strip().strip("/")
    if not docker_service:
        return run, sub
    root = container_root.rstrip("/") or "/"
    inner = f"cd {posix_quote(f'{root}/{sub}')} && {run} " if sub else f"{run} "
    flags = f" -e {posix_quote(f'{ENV_PROJECT_ROOT}={root}')}" + "".join(f" -e {name}" for name in forward)
    return f"docker compose run --rm{flags} {posix_quote(docker_service)} bash -c {posix_quote(inner)}", ""


def launcher_root(command: str, project_root: str, container_root: str = CONTAINER_ROOT) -> str:
    """The project root as the launched training command sees it."""
    if is_compose_command(command):
        return container_root.rstrip("/") or "/"
    return project_root.rstrip("/") or "/"


def join_root(root: str, rel: str) -> str:
    root = root.rstrip("/") or "/"
    rel = (rel or "").strip("/")
    if not rel:
        return root
    return f"{root}{rel}" if root.endswith("/") else f"{root}/{rel}"
