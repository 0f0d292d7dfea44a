# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reader's part for the phases' play-level knobs: task variables -> RunSettings, read as each phase read them.

Their rules (what is refused, and for which phase) are module_utils._run.knobs, applied by the run reader; a value
read here that a phase refuses keeps what that phase needs to refuse it with the same words.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._run import knobs, runlock
from ansible_collections.flodl.cluster.plugins.module_utils._run.run_model import RunSettings
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.task_vars import as_bool, registered, var


def walks_in(task_vars: Mapping[str, Any], templar: Any, phases: list[str]) -> bool:
    """Whether this run launches in ``walk_in`` mode (``flodl_launch_mode``; blank means fanout)."""
    return "launch" in phases and _launch_mode(task_vars, templar) == "walk_in"


def launch_mode_walk_in(task_vars: Mapping[str, Any], templar: Any) -> bool:
    """Whether the run's launch mode is ``walk_in``, whatever this step's phases (teardown of a walk_in run too)."""
    return _launch_mode(task_vars, templar) == "walk_in"


def _launch_mode(task_vars: Mapping[str, Any], templar: Any) -> str:
    return str(var(task_vars, templar, "flodl_launch_mode", "") or "").strip()


def run_lock_enabled(task_vars: Mapping[str, Any], templar: Any) -> bool:
    """``flodl_run_lock`` (default true): false starts a run even while another one is live."""
    return as_bool(var(task_vars, templar, "flodl_run_lock", True)) is not False


def run_lock_ttl(task_vars: Mapping[str, Any], templar: Any) -> int:
    """``flodl_run_lock_ttl``: seconds the run lock's lease outlives its last renewal (range checked with the run)."""
    raw = var(task_vars, templar, runlock.TTL_VARIABLE)
    # A finite number only: ``nan`` (a survey's text too) passed as a float and crashed int() below.
    found = knobs.number(raw) if raw is not None and str(raw).strip() else None
    if found is None or found < runlock.MIN_TTL:
        return runlock.DEFAULT_TTL
    return int(min(found, runlock.MAX_TTL))


def _build_timeout(raw: Any) -> float | None:
    """The build's limit; None for unset or a value the run refused (the prebuild then runs with its default)."""
    try:
        return float(raw) if raw is not None and not isinstance(raw, bool) else None
    except (TypeError, ValueError):
        return None


def _docker(raw: Any) -> tuple[str | bool | None, str]:
    """(``flodl_launch_docker`` when text, a boolean or unset; else None, its type for the launch's refusal)."""
    if raw is None or isinstance(raw, (str, bool)):
        return raw, ""
    return None, type(raw).__name__


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _preflight_numbers(task_vars: Mapping[str, Any], templar: Any) -> tuple[tuple[str, float], ...]:
    """The preflight knobs of knobs.NUMBERS that are set to a number (a blank survey answer is unset)."""
    found = ((name, knobs.number(var(task_vars, templar, name))) for name in knobs.PREFLIGHT_NUMBERS)
    return tuple((name, value) for name, value in found if value is not None)


def read_settings(task_vars: Mapping[str, Any], templar: Any) -> RunSettings:
    """The phases' knobs as the steps that use them read them (defaults included), for every phase alike."""
    dedupe = var(task_vars, templar, "flodl_prebuild_dedupe", True)
    prebuild_env = var(task_vars, templar, "flodl_prebuild_env", {}) or {}
    docker, docker_type = _docker(var(task_vars, templar, "flodl_launch_docker"))
    artifact = registered(task_vars, "flodl_launch")
    return RunSettings(
        launch_mode=_launch_mode(task_vars, templar),
        prebuild_dedupe=as_bool(dedupe),
        prebuild_dedupe_shown=repr(dedupe),
        build_timeout=_build_timeout(var(task_vars, templar, "flodl_build_timeout")),
        prebuild_env={str(k): str(v) for k, v in prebuild_env.items()} if isinstance(prebuild_env, Mapping) else {},
        preflight_require_all=as_bool(var(task_vars, templar, "flodl_preflight_require_all")) is True,
        testing_cluster=as_bool(var(task_vars, templar, "flodl_testing_cluster", True)) is not False,
        launch_container_root=str(var(task_vars, templar, "flodl_launch_container_root"))
        if "flodl_launch_container_root" in task_vars else None,
        launch_docker=docker,
        launch_docker_type=docker_type,
        launch_host=str(var(task_vars, templar, "flodl_launch_host", "localhost") or "localhost"),
        launch_forward_agent=bool(as_bool(var(task_vars, templar, "flodl_launch_forward_agent", False))),
        ssh_reuse=not as_bool(var(task_vars, templar, "flodl_launch_detach", False))
        and as_bool(var(task_vars, templar, "flodl_ssh_reuse", True)) is not False,
        run_lock=run_lock_enabled(task_vars, templar),
        run_lock_ttl=run_lock_ttl(task_vars, templar),
        run_id=_text(registered(task_vars, "flodl_run_id")),
        launch_run_id=_text(artifact.get("run_id")) if isinstance(artifact, Mapping) else None,
        preflight_numbers=_preflight_numbers(task_vars, templar),
    )
