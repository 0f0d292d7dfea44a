# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read one fdl file and its ``inherit-from:`` chain, inside the project only.

docs/launcher-contract.md §2a: relative parents resolve against the declaring
file, cycles and parents outside the project are refused, and a parent that
will not load is told by type and size only, never by what it holds.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ansible_collections.flodl.cluster.plugins.module_utils._fdl.fdl_error import FdlConfigError
from ansible_collections.flodl.cluster.plugins.module_utils._fdl.fdl_yaml import parse_yaml
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.field_checks import kind as _kind
from ansible_collections.flodl.cluster.plugins.module_utils._files.safe_reads import FDL_FILE_MAX, read_capped_text

try:
    import yaml
except ImportError:  # pragma: no cover - ansible-core always ships PyYAML
    yaml = None

INHERIT_KEY = "inherit-from"


def load_document(path: Any) -> Dict[str, Any]:
    """Parse one YAML/JSON file into a mapping; an empty file is ``{}``."""
    p = Path(path)
    try:
        # Non-blocking, regular files only, under a cap: a FIFO or a huge file never hangs or fills memory.
        text = read_capped_text(str(p), FDL_FILE_MAX)
    except (OSError, UnicodeDecodeError) as exc:
        raise FdlConfigError("cannot read file: %s" % (getattr(exc, "strerror", None) or exc), files=[p])
    try:
        if p.suffix == ".json":
            value = json.loads(text) if text.strip() else None
        else:
            if yaml is None:  # pragma: no cover
                raise FdlConfigError("PyYAML is not installed", files=[p], fix="install PyYAML")
            value = parse_yaml(text)
    except FdlConfigError:
        raise
    except Exception as exc:  # yaml.YAMLError, json.JSONDecodeError
        raise FdlConfigError("cannot parse file: %s" % exc, files=[p], fix="fix the syntax error")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise FdlConfigError(
            "top level must be a mapping, got %s" % _kind(value),
            files=[p],
            fix="write the file as `key: value` entries (e.g. `cluster:`)",
        )
    return value


def _shape(value: Any) -> str:
    """Type and size only: inherit-from errors never show what a file holds."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string of %d characters" % len(value)
    if isinstance(value, list):
        return "a list of %d items" % len(value)
    if isinstance(value, dict):
        return "a mapping of %d keys" % len(value)
    return "a %s" % type(value).__name__


def _inherit_target(value: Any, declaring: Path, canonical: Path) -> Optional[Path]:
    if value is None:
        return None
    if not isinstance(value, str):
        raise FdlConfigError(
            "must be a string path, got %s" % _shape(value), files=[declaring], key=INHERIT_KEY,
            fix="name the parent file, relative to this file",
        )
    if not value:
        raise FdlConfigError("must be a non-empty path", files=[declaring], key=INHERIT_KEY,
                             fix="name the parent file or remove the key")
    if "://" in value:
        raise FdlConfigError(
            "remote parents (a URL) are not supported", files=[declaring], key=INHERIT_KEY,
            fix="use a path to a file inside the project, relative to this file",
        )
    if "\0" in value:
        raise FdlConfigError("must not contain a NUL byte", files=[declaring], key=INHERIT_KEY,
                             fix="name the parent file, relative to this file")
    if value.startswith("~/"):
        return Path(os.path.expanduser("~")) / value[2:]
    target = Path(value)
    if target.is_absolute():
        return target
    return canonical.parent / target


def _canonical_roots(roots: Optional[Sequence[Any]], start: Path) -> List[Path]:
    if roots is None:
        return [start.absolute().parent.resolve()]
    return [Path(os.path.expanduser(str(r))).resolve() for r in roots]


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def resolve_chain(path: Any, roots: Optional[Sequence[Any]] = None) -> List[Tuple[Path, Dict[str, Any]]]:
    """``path`` and its ``inherit-from:`` ancestors, deepest ancestor first.

    Each entry is ``(canonical path, document without inherit-from)``.
    Relative parents resolve against the declaring file; cycles are errors.
    Every file of the chain must resolve (symlinks followed) inside one of
    ``roots``, by default the directory of ``path`` (the project): a parent
    elsewhere on the controller is refused before it is read, so no error can
    show what it holds. Pass ``roots`` to allow more directories on purpose.
    """
    start = Path(path)
    out: List[Tuple[Path, Dict[str, Any]]] = []
    _resolve_chain(start, [], out, None, _canonical_roots(roots, start))
    return out


def _load_parent(path: Path, canonical: Path, declared_by: Path) -> Dict[str, Any]:
    """load_document for an inherit-from parent, its failure told by type and size only."""
    try:
        return load_document(path)
    except FdlConfigError as exc:
        raise FdlConfigError(
            "inherit-from target `%s` (%s) %s; its content is not shown"
            % (canonical, _size(canonical), _failure_kind(exc.__context__)),
            files=[declared_by], key=INHERIT_KEY,
            fix="point inherit-from at an fdl config file (`key: value` entries) inside the project",
        ) from None


def _size(path: Path) -> str:
    try:
        return "%d bytes" % path.stat().st_size
    except OSError:
        return "size unknown"


def _failure_kind(cause: Optional[BaseException]) -> str:
    """Why a file would not load, from the exception behind it, without any of its text."""
    mark = getattr(cause, "problem_mark", None)
    if isinstance(cause, UnicodeDecodeError):
        return "cannot be read as UTF-8 text"
    if isinstance(cause, OSError):
        return "cannot be read (%s)" % (cause.strerror or type(cause).__name__)
    if mark is not None:
        return "is not valid YAML (line %d, column %d)" % (mark.line + 1, mark.column + 1)
    if isinstance(cause, ValueError) and hasattr(cause, "lineno"):
        return "is not valid JSON (line %d, column %d)" % (getattr(cause, "lineno"), getattr(cause, "colno"))
    if cause is not None:
        return "cannot be parsed"
    return "is not a mapping at its top level"


def _resolve_chain(path: Path, stack: List[Path], out: List[Tuple[Path, Dict[str, Any]]],
                   declared_by: Optional[Path], roots: Sequence[Path]) -> None:
    try:
        canonical = path.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise FdlConfigError(
            "cannot resolve inherit-from target `%s`: %s" % (path, getattr(exc, "strerror", None) or type(exc).__name__),
            files=[declared_by or path], key=INHERIT_KEY if declared_by else "",
            fix="fix the path (relative paths resolve against the declaring file)",
        )
    if not _inside(canonical, roots):
        raise FdlConfigError(
            "inherit-from target `%s` is outside the project (%s), so it was not read: a config must not "
            "pull in other files of the controller, whose content could then appear in errors and logs"
            % (canonical, ", ".join(str(r) for r in roots)),
            files=[declared_by or path], key=INHERIT_KEY if declared_by else "",
            fix="copy the shared settings into the project, or allow that directory explicitly",
        )
    if canonical in stack:
        chain = " -> ".join(str(p) for p in stack + [canonical])
        raise FdlConfigError(
            "inherit-from cycle detected: " + chain, files=[declared_by or path], key=INHERIT_KEY,
            fix="break the cycle by removing one inherit-from",
        )
    stack.append(canonical)
    document = dict(load_document(path) if declared_by is None else _load_parent(path, canonical, declared_by))
    parent = _inherit_target(document.pop(INHERIT_KEY, None), path, canonical)
    if parent is not None:
        _resolve_chain(parent, stack, out, path, roots)
    stack.pop()
    out.append((canonical, document))
