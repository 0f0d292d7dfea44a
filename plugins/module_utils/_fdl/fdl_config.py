# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Locate and merge an fdl project's configuration the way fdl-cli does.

docs/launcher-contract.md §2a: the base manifest (``fdl.yaml``/``fdl.yml``/
``fdl.json``), an environment overlay ``fdl.<env>.{yaml,yml,json}`` next to
it, ``inherit-from:`` chains on both (module_utils._fdl.fdl_chain) and a deep merge
(maps merge, scalars and lists replace, ``null`` deletes), into one
:class:`FdlConfig`. Checking its ``cluster:`` block and mapping it onto
inventory variables is module_utils._fdl.fdl_inventory's job.

Every problem raises :class:`FdlConfigError` (module_utils._fdl.fdl_error).
Controller-side helper (used by the ``fdl_cluster`` inventory plugin).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ansible_collections.flodl.cluster.plugins.module_utils._fdl.fdl_chain import resolve_chain
from ansible_collections.flodl.cluster.plugins.module_utils._fdl.fdl_commands import CONFIG_NAMES
from ansible_collections.flodl.cluster.plugins.module_utils._fdl.fdl_error import FdlConfigError
from ansible_collections.flodl.cluster.plugins.module_utils._core.serde_json_text import serde_float

OVERLAY_EXTENSIONS = ("yaml", "yml", "json")
DEFAULT_ENV = "cluster"


@dataclass
class FdlConfig:
    """The merged configuration of one project + environment."""

    project_dir: Path
    base: Path
    overlay: Optional[Path]
    env: Optional[str]
    layers: List[Path] = field(default_factory=list)
    data: Dict[str, Any] = field(default_factory=dict)
    # Accepted-but-odd input worth telling the operator about (e.g. unquoted env values).
    warnings: List[str] = field(default_factory=list)

    @property
    def files(self) -> List[Path]:
        """The files that were merged, in merge order."""
        return list(self.layers)


# --------------------------------------------------------------------------
# Discovery
# --------------------------------------------------------------------------


def find_base_manifest(project_dir: Any) -> Path:
    """The first of ``fdl.yaml``, ``fdl.yml``, ``fdl.json`` in ``project_dir``."""
    directory = Path(project_dir)
    if not directory.is_dir():
        raise FdlConfigError(
            "project directory does not exist or is not a directory",
            files=[directory],
            fix="point project_dir at the fdl project root (the directory holding fdl.yml)",
        )
    for name in CONFIG_NAMES:
        candidate = directory / name
        if candidate.is_file():
            return candidate
    raise FdlConfigError(
        "no fdl manifest found (looked for " + ", ".join(CONFIG_NAMES) + ")",
        files=[directory],
        fix="point project_dir at the fdl project root (the directory holding fdl.yml)",
    )


def check_env_name(env: str) -> str:
    """Refuse environment names that cannot be an ``fdl.<env>.yml`` sibling."""
    if not isinstance(env, str) or not env.strip():
        raise FdlConfigError(
            "environment name must be a non-empty string, got %r" % (env,),
            key="env",
            fix="set env to the overlay name, e.g. cluster for fdl.cluster.yml",
        )
    if "/" in env or "\\" in env or env in (".", "..") or "\0" in env:
        raise FdlConfigError(
            "environment name %r is not a plain name" % (env,),
            key="env",
            fix="use the <env> part of fdl.<env>.yml, without directories",
        )
    return env


def find_overlay(base: Any, env: str) -> Optional[Path]:
    """``fdl.<env>.{yaml,yml,json}`` next to ``base`` (that preference order)."""
    check_env_name(env)
    directory = Path(base).parent
    for ext in OVERLAY_EXTENSIONS:
        candidate = directory / ("fdl.%s.%s" % (env, ext))
        if candidate.is_file():
            return candidate
    return None


def require_overlay(base: Any, env: str) -> Path:
    """Like :func:`find_overlay`, but a missing file is an error (as in fdl-cli)."""
    found = find_overlay(base, env)
    if found is None:
        raise FdlConfigError(
            "environment `%s` not found (expected fdl.%s.yml next to %s)" % (env, env, base),
            files=[base],
            fix="create fdl.%s.yml (or .yaml/.json) beside %s, or choose an existing env" % (env, Path(base).name),
        )
    return found


def deep_merge(base: Any, overlay: Any) -> Any:
    """Merge ``overlay`` onto ``base`` (neither argument is modified).

    Maps merge recursively with the overlay winning; scalars and lists are
    replaced; a ``None`` value in an overlay map deletes that key.
    """
    if isinstance(base, dict) and isinstance(overlay, dict):
        merged = dict(base)
        for key, value in overlay.items():
            if value is None:
                merged.pop(key, None)
            elif key in merged:
                merged[key] = deep_merge(merged.pop(key), value)
            else:
                merged[key] = value
        return merged
    return overlay


def merge_layers(documents: Sequence[Any]) -> Dict[str, Any]:
    """Fold documents left to right with :func:`deep_merge`."""
    merged: Any = {}
    for index, document in enumerate(documents):
        merged = document if index == 0 else deep_merge(merged, document)
    return merged if isinstance(merged, dict) else {}


def resolve_layers(base: Any, overlay: Optional[Any]) -> List[Tuple[Path, Dict[str, Any]]]:
    """Chain(base) + chain(overlay), de-duplicated by canonical path (first kept)."""
    layers = resolve_chain(base)
    if overlay is not None:
        layers.extend(resolve_chain(overlay))
    seen = set()
    unique = []
    for canonical, document in layers:
        if canonical in seen:
            continue
        seen.add(canonical)
        unique.append((canonical, document))
    return unique


def scalar_text(value: Any) -> Optional[str]:
    """The string serde_yaml hands a ``String`` field for a non-string scalar, else ``None``.

    fdl-cli re-serialises the merged document and reads it back, so an env
    value written ``8``, ``true`` or ``1.5e3`` arrives as ``"8"``,
    ``"true"``, ``"1500.0"`` (floats in ryu's shortest form).
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return serde_float(value)
    return None


def _stringify_env(env: Any, where: str, files: Sequence[Any], warnings: List[str]) -> None:
    if not isinstance(env, dict):
        return
    for key in list(env):
        text = scalar_text(env[key])
        if text is None:
            continue
        kind = "a boolean" if isinstance(env[key], bool) else "a number"
        env[key] = text
        # The value itself is not echoed: env blocks can hold secrets.
        warnings.append(
            "%s: %s.%s is written as %s, not a string; it is passed as its text, as fdl-cli does "
            "(fix: quote the value so the file says what the command receives)"
            % (" + ".join(str(f) for f in files), where, key, kind)
        )


def stringify_env_values(data: Dict[str, Any], files: Sequence[Any] = ()) -> List[str]:
    """Turn non-string scalars in ``cluster.env`` and ``cluster.workers[].env`` into upstream's strings.

    Works in place on the merged document; returns one warning per value changed.
    """
    warnings: List[str] = []
    cluster = data.get("cluster")
    if not isinstance(cluster, dict):
        return warnings
    _stringify_env(cluster.get("env"), "cluster.env", files, warnings)
    workers = cluster.get("workers")
    if isinstance(workers, list):
        for index, worker in enumerate(workers):
            if isinstance(worker, dict):
                _stringify_env(worker.get("env"), "cluster.workers[%d].env" % index, files, warnings)
    return warnings


def load_config(project_dir: Any, env: Optional[str] = DEFAULT_ENV) -> FdlConfig:
    """Locate, chain and merge the project's manifest and its ``env`` overlay.

    ``env`` of ``None`` or ``""`` reads the base manifest alone. Env values
    written as numbers or booleans become strings (see :func:`scalar_text`)
    and are listed in ``warnings``.
    """
    directory = Path(os.path.expanduser(str(project_dir))).absolute()
    base = find_base_manifest(directory)
    overlay = require_overlay(base, env) if env else None
    layers = resolve_layers(base, overlay)
    files = [layer_path for layer_path, layer_doc in layers]
    data = merge_layers([layer_doc for layer_path, layer_doc in layers])
    warnings = stringify_env_values(data, files)
    return FdlConfig(
        project_dir=directory,
        base=base,
        overlay=overlay,
        env=env or None,
        layers=files,
        data=data,
        warnings=warnings,
    )
