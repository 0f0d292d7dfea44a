# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who and where the controller is (pure: the caller supplies the command runner).

See docs/launcher-contract.md §1a ``FLODL_INTERNAL_HOST_USER`` and §1c ``FLODL_HOST_NAME``.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

ENV_HOST_OVERRIDE = "FLODL_HOST_NAME"

Runner = Callable[[list[str]], "str | None"]


def controller_hostname(env: Mapping[str, str], run: Runner) -> str:
    """``FLODL_HOST_NAME`` when non-blank, else ``hostname``, else ``unknown-host``."""
    override = (env.get(ENV_HOST_OVERRIDE) or "").strip()
    if override:
        return override
    out = (run(["hostname"]) or "").strip()
    return out or "unknown-host"


def controller_user(env: Mapping[str, str], run: Runner) -> str | None:
    """``USER`` when non-blank, else ``whoami``; ``None`` rather than an invented name.

    A made-up user would surface later as a bare ``Permission denied
    (publickey)`` on a worker with no hint that the name was guessed.
    """
    user = (env.get("USER") or "").strip()
    if user:
        return user
    out = (run(["whoami"]) or "").strip()
    return out or None
