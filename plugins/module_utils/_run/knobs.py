# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The phases' numeric and boolean knobs, checked with the run (before contact) instead of when a role starts.

A value out of range here would otherwise pass preflight and the builds, then kill the launch (a
negative timeout, a grace of ``inf``). Each problem names the variable, what was found and the fix.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._core.problems import Problem, texts, worded
from ansible_collections.flodl.cluster.plugins.module_utils._core.safety import parse_bool

# (variable, phase that reads it, lowest value, whether the lowest is allowed, its unit, what it means, an example).
NUMBERS = (
    ("flodl_build_timeout", "prebuild", 0.0, False, "seconds", "seconds a build may run", "3600"),
    ("flodl_launch_timeout", "launch", 0.0, True, "seconds", "seconds the launch may run (0: no limit)", "0 or 86400"),
    ("flodl_launch_grace_seconds", "launch", 0.0, True, "seconds", "seconds between TERM and KILL when a launch stops",
     "10"),
    ("flodl_preflight_timeout", "preflight", 0.0, False, "seconds", "seconds a worker's probe may take", "30"),
    # A preflight knob is carried in the run (RunSettings.preflight_number): a probe check's threshold is one line here.
    ("flodl_preflight_min_free_gb", "preflight", 0.0, True, "GB",
     "GB that must be free on each data path and on the build's target dir (0: not checked)", "20"),
    ("flodl_launch_output_batch_seconds", "launch", 0.0, True, "seconds",
     "longest wait of an output line before it is shown", "2"),
    ("flodl_launch_connect_timeout", "launch", 0.0, True, "seconds",
     "seconds the launcher's ssh may take to reach a worker (0: no bound, fdl-cli's topology bytes)", "10"),
    ("flodl_run_lock_ttl", "launch", 5.0, True, "seconds",
     "seconds the run lock's lease outlives its last renewal: how long a killed run blocks the next", "60"),
)
INTEGERS = (("flodl_preflight_max_parallel", "preflight", 1, "probes at once", "64"),)
# Read into RunSettings.preflight_numbers: the probe checks' thresholds, the probes' timeout and parallelism.
PREFLIGHT_NUMBERS = tuple(n[0] for n in NUMBERS if n[1] == "preflight") + tuple(
    n[0] for n in INTEGERS if n[1] == "preflight")
NAMES = tuple(n[0] for n in NUMBERS) + tuple(n[0] for n in INTEGERS) + (
    "flodl_prebuild_dedupe", "flodl_launch_detach", "flodl_launch_forward_agent", "flodl_launch_mode",
    "flodl_preflight_require_all")
LAUNCH_MODES = ("fanout", "walk_in")
DETACHED_AGENT = (
    "controller: flodl_launch_detach and flodl_launch_forward_agent are both true: a detached run outlives this "
    "job, and the forwarded ssh-agent ends with it, so every rank the launcher starts after the job is gone would "
    "fail with 'Permission denied'. Give the launch host a key the workers accept (the launcher's own ssh uses it) "
    "and set flodl_launch_forward_agent: false, or launch attached (flodl_launch_detach: false)"
)


def _shown(value: Any) -> str:
    return f"{type(value).__name__} {str(value)[:40]!r}"


def number(value: Any) -> float | None:
    """A finite number from a number or its text (survey answers are text); None otherwise."""
    if isinstance(value, bool):
        return None
    try:
        found = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return found if math.isfinite(found) else None


def knob_problems(values: Mapping[str, Any], phases: list[str], prebuild: bool) -> list[str]:
    """``controller: ...`` problems of the knobs set in ``values`` that the run's ``phases`` read."""
    return texts(knob_findings(values, phases, prebuild))


def knob_findings(values: Mapping[str, Any], phases: list[str], prebuild: bool) -> list[Problem]:
    """The run's problems (no worker) of the knobs set in ``values`` that the run's ``phases`` read."""
    problems: list[Problem] = []
    active = set(phases) - ({"prebuild"} if not prebuild else set())
    # A blank answer (an AWX survey's empty field) is unset: the role's default applies.
    values = {k: v for k, v in values.items() if not (isinstance(v, str) and not v.strip())}
    dedupe = values.get("flodl_prebuild_dedupe")
    if "prebuild" in active and dedupe is not None and parse_bool(dedupe) is None:
        problems.append(worded(f"controller: flodl_prebuild_dedupe must be true or false, got {_shown(dedupe)}",
                               None, "flodl_prebuild_dedupe"))
    require_all = values.get("flodl_preflight_require_all")
    if "preflight" in active and require_all is not None and parse_bool(require_all) is None:
        problems.append(worded(
            f"controller: flodl_preflight_require_all must be true or false, got {_shown(require_all)} (whether an "
            "unreachable worker fails preflight); set it to true or false, or leave it unset (false: an unreachable "
            "worker only warns)", None, "flodl_preflight_require_all"))
    if "launch" in active and parse_bool(values.get("flodl_launch_detach", False)) is True \
            and parse_bool(values.get("flodl_launch_forward_agent", False)) is True:
        problems.append(worded(DETACHED_AGENT, None, "flodl_launch_forward_agent"))
    mode = values.get("flodl_launch_mode")
    if "launch" in active and mode is not None and mode not in LAUNCH_MODES:
        problems.append(worded(f"controller: flodl_launch_mode must be one of {', '.join(LAUNCH_MODES)}, got "
                               f"{_shown(mode)}; leave it unset for fanout (fdl-cli's way)", None,
                               "flodl_launch_mode"))
    elif "launch" in active and mode == "walk_in" and parse_bool(values.get("flodl_launch_detach", False)) is True:
        problems.append(worded("controller: flodl_launch_mode=walk_in and flodl_launch_detach=true: a detached "
                               "launch outlives the play that would start and collect the agents; launch "
                               "attached, or use flodl_launch_mode: fanout for a detached run", None,
                               "flodl_launch_detach"))
    for name, phase, low, low_ok, unit, what, example in NUMBERS:
        value = values.get(name)
        if phase not in active or value is None:
            continue
        found = number(value)
        if found is None or found < low or (found == low and not low_ok):
            bound = f"({low:g} or more)" if low_ok else f"above {low:g}"
            problems.append(worded(f"controller: {name} must be a number of {unit} {bound}, got {_shown(value)} "
                                   f"(the {what}); set it to e.g. {example}, or leave it unset for the default",
                                   None, name))
    for name, phase, low, what, example in INTEGERS:
        value = values.get(name)
        if phase not in active or value is None:
            continue
        found = number(value)
        if found is None or found != int(found) or found < low:
            problems.append(worded(f"controller: {name} must be a whole number, {low} or more: the {what}; got "
                                   f"{_shown(value)}; set it to e.g. {example}", None, name))
    return problems


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\0" in value
    if isinstance(value, Mapping):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_nul(v) for v in value)
    return False


def nul_problems(values: Mapping[str, Any]) -> list[str]:
    """Run-level variables holding a NUL anywhere: no path, argv or environment can carry one (value never shown)."""
    return texts(nul_findings(values))


def nul_findings(values: Mapping[str, Any]) -> list[Problem]:
    """:func:`nul_problems` as values, each about its variable."""
    return [worded(f"controller: {name} contains a NUL character, which no path, command line or environment value "
                   "can carry; remove it", None, name) for name in sorted(values) if _has_nul(values[name])]
