# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Does the rendered launch environment fit what exec accepts? Measured on the exact strings launched.

Linux refuses an exec (E2BIG, "Argument list too long") when one ``NAME=value`` string, its NUL
included, exceeds ``MAX_ARG_STRLEN`` (32 pages), or when argv and the environment together (strings,
NULs and one pointer each) exceed ARG_MAX. The topology travels hex-encoded in one variable, so it is
the first to hit the first limit.

flodl decodes ``FLODL_INTERNAL_FULL_CLUSTER_JSON`` and ``FLODL_TESTING_CLUSTER_JSON`` (trimmed hex)
and parses them as JSON: spacing is not part of the contract. When the pretty form fdl-cli ships does
not fit but serde_json's compact form of the same value does, the compact form is shipped, with one
warning. Beyond that the launch is refused, naming the variable, its size, the limit and the fixes.

Pure: :func:`fit_launch_env` returns the environment to launch together with what it measured, so the
caller launches the very strings that were checked.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ansible_collections.flodl.cluster.plugins.module_utils._launch import launch_env as le
from ansible_collections.flodl.cluster.plugins.module_utils._cluster import name_resolution as nr
from ansible_collections.flodl.cluster.plugins.module_utils._core.hexcodec import hex_decode, hex_encode
from ansible_collections.flodl.cluster.plugins.module_utils._core.safety import (
    DEFAULT_ARG_MARGIN,
    MAX_ARG_STRLEN,
    POINTER_BYTES,
)
from ansible_collections.flodl.cluster.plugins.module_utils._core.serde_json_text import serde_compact

FULL_CLUSTER_JSON = le.ENV_FULL_CLUSTER_JSON
TESTING_CLUSTER_JSON = le.ENV_TESTING_CLUSTER_JSON
# Hex of a JSON document flodl parses as a value: these may be shipped compact.
COMPACTABLE = (FULL_CLUSTER_JSON, TESTING_CLUSTER_JSON)

FIX_TOPOLOGY = (
    "launch with flodl_launch_mode: walk_in, whose launcher gets no roster (its environment does not grow with "
    "the workers), or shorten what every worker repeats (paths, ssh options, flodl_env values), give fewer "
    "per-worker flodl_env entries, set flodl_ssh_reuse: false (drops the ControlPath option added to each "
    "worker), or split the cluster into smaller runs"
)
FIX_TESTING = "or set flodl_testing_cluster: false, which leaves this variable out"
FIX_OTHER = "pass large data as a file on the shared mount and its path here"
FIX_TOTAL = "move large values of the controller's own environment or of flodl_cluster_env into files"


def entry_bytes(name: str, value: str) -> int:
    """Bytes exec counts for one ``NAME=value`` string: UTF-8, its NUL included."""
    return len(name.encode("utf-8", "surrogateescape")) + 1 + len(value.encode("utf-8", "surrogateescape")) + 1


def env_block_bytes(env: Mapping[str, str]) -> int:
    """What an environment costs against ARG_MAX: every string, its NUL and its pointer."""
    return sum(entry_bytes(k, v) + POINTER_BYTES for k, v in env.items())


def argv_bytes(argv: list[str]) -> int:
    return sum(len(a.encode("utf-8", "surrogateescape")) + 1 + POINTER_BYTES for a in argv)


def compact_hex(pretty_hex: str) -> str:
    """The same JSON value as ``pretty_hex`` holds, re-rendered compact and hex-encoded."""
    return hex_encode(serde_compact(json.loads(hex_decode(pretty_hex).decode("utf-8"))))


# --------------------------------------------------------------------------
# the verdict
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class SizeProblem:
    """An environment exec would refuse: which variable, how big, against which limit, and the fix."""

    variable: str  # a variable name, or "" for the environment as a whole
    size: int
    limit: int
    finding: str
    fix: str

    def text(self) -> str:
        what = f"variable {self.variable}" if self.variable else "the launch environment"
        return (f"controller: {what} {self.finding}: {self.size} bytes, over the kernel's limit of {self.limit} "
                f"bytes, so exec would fail with E2BIG (\"Argument list too long\") and nothing would start. "
                f"Fix: {self.fix}")


@dataclass
class Fitted:
    """The environment to launch, what each variable measured (``NAME=value`` + NUL), and the verdict."""

    env: dict[str, str]
    sizes: dict[str, int] = field(default_factory=dict)
    total: int = 0
    budget: int = 0
    compacted: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    problems: list[SizeProblem] = field(default_factory=list)


def _fix_for(name: str) -> str:
    if name == FULL_CLUSTER_JSON:
        return FIX_TOPOLOGY
    if name == TESTING_CLUSTER_JSON:
        return f"{FIX_TOPOLOGY}; {FIX_TESTING}"
    return FIX_OTHER


def fit_launch_env(
    env: Mapping[str, str],
    *,
    inherited: Mapping[str, str],
    arg_max: int,
    argv: int = 0,
    margin: int = DEFAULT_ARG_MARGIN,
    strlen_max: int = MAX_ARG_STRLEN,
) -> Fitted:
    """The launch environment as it will be exec'd, each string measured, compacted where that makes it fit.

    ``inherited`` is the environment the added variables join (the names they override are not counted
    twice); ``argv`` the bytes of the command line; ``margin`` what the commands the launch runs (a
    shell, cargo) may add before flodl's launcher starts.
    """
    out: dict[str, str] = {}
    fitted = Fitted(env=out)
    for name, value in env.items():
        size = entry_bytes(name, value)
        if size > strlen_max and name in COMPACTABLE:
            small = compact_hex(value)
            small_size = entry_bytes(name, small)
            if small_size <= strlen_max:
                fitted.warnings.append(
                    f"controller: {name} is {size} bytes pretty-printed, over the kernel's {strlen_max}-byte limit "
                    f"for one environment string; it is shipped as compact JSON ({small_size} bytes), which flodl "
                    "parses the same way (its bytes differ from fdl-cli's)")
                fitted.compacted.append(name)
                value, size = small, small_size
            else:
                fitted.problems.append(SizeProblem(
                    name, small_size, strlen_max,
                    f"is too long even as compact JSON (pretty-printed it is {size} bytes)", _fix_for(name)))
        elif size > strlen_max:
            fitted.problems.append(SizeProblem(name, size, strlen_max, "is too long for one environment string",
                                               _fix_for(name)))
        out[name] = value
        fitted.sizes[name] = size
    kept = {k: v for k, v in inherited.items() if k not in out}
    fitted.total = env_block_bytes(kept) + env_block_bytes(out) + argv
    fitted.budget = arg_max - margin
    if not fitted.problems and fitted.total > fitted.budget:
        fitted.problems.append(SizeProblem(
            "", fitted.total, fitted.budget,
            f"(the controller's own environment, the added variables and the command line) is too large in all; "
            f"the limit is ARG_MAX {arg_max} minus {margin} bytes left for what the launch command adds", FIX_TOTAL))
    return fitted


def render_checked(
    inputs: le.LaunchInputs,
    resolver: nr.Resolver,
    *,
    inherited: Mapping[str, str],
    arg_max: int,
    shell: str = "/bin/sh",
    then: Callable[[le.LaunchPlan], None] | None = None,
) -> tuple[le.LaunchPlan, Fitted]:
    """One render of the launch (``launch_env.prepare_launch``), fitted: the plan carries the checked env.

    ``plan.env`` *is* ``fitted.env`` afterwards, so what is launched is what was measured. A guarded plan
    adds nothing and has nothing to check. ``then`` turns the rendered plan into what the mode launches (a
    walk-in window, module_utils._walk_in.walk_in) before it is measured: the size check is the mode's own.
    """
    plan = le.prepare_launch(inputs, resolver)
    if then is not None and not plan.guarded:
        then(plan)
    fitted = fit_launch_env(plan.env, inherited=inherited, arg_max=arg_max,
                            argv=argv_bytes([shell, "-c", plan.command]))
    plan.env = fitted.env
    plan.warnings.extend(fitted.warnings)
    return plan, fitted
