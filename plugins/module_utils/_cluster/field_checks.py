# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Field-level checks of a ``cluster:`` block, collected as :class:`FieldChecks` problems.

Types, ports, shares, environment maps and paths: the building blocks the
rules of module_utils._cluster.validate (cluster, controller) and
module_utils._cluster.worker_rules (one worker) apply, each naming its place.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._core.problems import Naming, Place, Problem, worded
from ansible_collections.flodl.cluster.plugins.module_utils._core.problems import at as _at
from ansible_collections.flodl.cluster.plugins.module_utils._core.safety import absolute_path_problem, relative_path_problem

RESERVED_EXACT = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "GPU_DEVICE_ORDINAL",
        "FLODL_HOST_NAME",
        "FDL_ENV",
    }
)
RESERVED_PREFIX = "FLODL_INTERNAL_"
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_reserved_env_key(key: str) -> bool:
    """Keys the launcher sets per rank; a user value would silently win (shell last-wins)."""
    return key.startswith(RESERVED_PREFIX) or key in RESERVED_EXACT


def kind(value: Any, secret: bool = False) -> str:
    """What a value is, for messages; never more than a short scalar of it, nothing of a secret."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({json.dumps(value)})"
    if secret and isinstance(value, (int, float, str)):
        return f"a{'n integer' if isinstance(value, int) else ' number' if isinstance(value, float) else ' string'}"
    if isinstance(value, int):
        digits = str(value)
        return f"an integer ({digits})" if len(digits) <= 20 else f"an integer ({len(digits)} digits)"
    if isinstance(value, float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({json.dumps(shown)})"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class FieldChecks:
    def __init__(self) -> None:
        self.items: list[Problem] = []

    def add(self, place: Place, problem: str, fix: str = "") -> None:
        self.items.append(_at(place, problem, fix))

    def raw(self, problem: str | None, place: Place) -> None:
        """A problem already worded with its place (module_utils._core.safety), which is ``place``'s."""
        if problem:
            self.items.append(worded(problem, place.worker, place.variable))

    def unknown_keys(self, value: Mapping[str, Any], allowed: tuple[str, ...], place: Any) -> None:
        for key in value:
            if key not in allowed:
                self.add(place(str(key)), f"unknown key {json.dumps(str(key))}",
                         "remove it or fix its spelling; allowed: " + ", ".join(allowed))

    def string(self, value: Any, place: Place, required: bool = False, what: str = "") -> None:
        if value is None:
            if required:
                self.add(place, f"is required{': ' + what if what else ''}")
            return
        if not isinstance(value, str):
            self.add(place, f"must be a string, got {kind(value)}", "quote the value")
        elif required and not value.strip():
            self.add(place, f"must not be blank{': ' + what if what else ''}")
        elif "\0" in value:
            self.add(place, "contains a NUL character, which no path, command line or environment value can carry",
                     "remove it")

    def boolean(self, value: Any, place: Place) -> None:
        if value is not None and not isinstance(value, bool):
            self.add(place, f"must be true or false, got {kind(value)}")

    def uint(self, value: Any, place: Place) -> None:
        if value is not None and (not is_int(value) or value < 0):
            self.add(place, f"must be a non-negative integer, got {kind(value)}")

    def port(self, value: Any, place: Place) -> None:
        if value is not None and (not is_int(value) or not 0 < value < 65536):
            self.add(place, f"must be a TCP port number 1-65535, got {kind(value)}")

    def share(self, value: Any, place: Place) -> None:
        if value is None:
            return
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        try:
            bad = not number or not math.isfinite(float(value)) or float(value) < 0
        except OverflowError:
            bad = True
        if bad:
            self.add(place, f"must be a non-negative fraction of host RAM (e.g. 0.5), got {kind(value)}",
                     "use a finite number >= 0 (values above 1.0 are allowed)")

    def env(self, env: Any, place: Place, naming: Naming) -> None:
        if env is None:
            return
        if not isinstance(env, Mapping):
            self.add(place, f"must be a map of NAME: \"value\" strings, got {kind(env)}")
            return
        for key in sorted(env, key=str):
            value = env[key]
            at = naming.sub(place, str(key)) if naming.fdl else place.sub(f"[{json.dumps(str(key))}]")
            if not isinstance(key, str) or not _ENV_KEY.fullmatch(key):
                self.add(at, f"{json.dumps(str(key))} is not a valid environment name (letters, digits and _; "
                         "not starting with a digit)", "the launcher would refuse it; rename it")
            elif is_reserved_env_key(key):
                self.add(at, f"key {json.dumps(key)} is reserved (launcher-owned) and cannot be set via env: it "
                         "would override the launcher's per-rank value", "remove it")
            if isinstance(value, str) and "\0" in value:
                # execve cannot carry it: the ranks would never start. Never the value (it may be a credential).
                self.add(at, "the value contains a NUL character, which no process environment (execve) can carry",
                         "remove it")
            if not isinstance(value, str):
                # Env values may be credentials: their type only, never the value.
                scalar = isinstance(value, (bool, int, float)) and len(str(value)) <= 20
                self.add(at, f"environment values must be strings, got {kind(value, secret=True)}",
                         f'quote the value, e.g. {key}: "{_plain(value)}"' if scalar else "write it as a quoted string")


def _plain(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)[:40]


def check_arch(arch: Any, place: Place, out: FieldChecks) -> None:
    # A variant is a directory under <path>/libtorch/; anything else builds against a stranger's tree.
    if isinstance(arch, str):
        out.raw(relative_path_problem(arch, str(place), "<path>/libtorch/", allow_empty=False), place)


def check_abs_path(path: Any, place: Place, what: str, out: FieldChecks) -> None:
    # The launcher cds there and execs under it: relative or control characters fail after every build.
    if isinstance(path, str) and path.strip() and "\0" not in path:
        out.raw(absolute_path_problem(path, str(place), what), place)
