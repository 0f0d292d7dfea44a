# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An fdl project's ``commands:`` map: which command fans out, and how fdl-cli runs it.

Standard library only (imported by the ``fdl_cluster`` inventory plugin
through :mod:`fdl_inventory`).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Tuple

CONFIG_NAMES = ("fdl.yaml", "fdl.yml", "fdl.json")
# Fields that make a root command a "preset" rather than a directory pointer.
_PRESET_FIELDS = ("ddp", "training", "output", "options")


def _dispatches(spec: Any, inherited: bool) -> bool:
    """Whether ``spec`` (or an inline nested command) resolves to cluster: true."""
    if not isinstance(spec, dict):
        return inherited
    own = spec.get("cluster")
    effective = own if isinstance(own, bool) else inherited
    nested = spec.get("commands")
    if isinstance(nested, dict) and nested:
        return effective or any(_dispatches(child, effective) for child in nested.values())
    return effective


def cluster_command(commands: Any) -> Optional[str]:
    """The single top-level command whose ``cluster`` flag resolves to true.

    ``None`` when there is none or more than one (ambiguous).
    """
    if not isinstance(commands, dict):
        return None
    hits = [str(name) for name, spec in commands.items() if _dispatches(spec, False)]
    return hits[0] if len(hits) == 1 else None


def _split_append(text: str) -> Tuple[str, str, bool]:
    """``append:`` split on its first standalone ``--``: (before, after, had a separator)."""
    text = text.strip()
    if text == "--":
        return "", "", True
    if text.startswith("-- "):
        return "", text[3:].strip(), True
    if text.endswith(" --"):
        return text[:-3].strip(), "", True
    if " -- " in text:
        before, after = text.split(" -- ", 1)
        return before.strip(), after.strip(), True
    return text, "", False


def run_line(spec: Any) -> Optional[str]:
    """The shell line fdl runs for a ``run:`` command invoked with no extra arguments.

    fdl-cli trims the script and adds the ``append:`` halves around a
    ``--`` (the separator only when ``append`` has one or a second half).
    ``None`` for a command without a ``run:`` string.
    """
    if not isinstance(spec, dict) or not isinstance(spec.get("run"), str):
        return None
    line = spec["run"].strip()
    append = spec.get("append")
    if isinstance(append, str) and append.strip():
        before, after, separator = _split_append(append)
        if before:
            line += " " + before
        if separator or after:
            line += " --" + (" " + after if after else "")
    return line


def command_dir(name: str, spec: Any, project_dir: Any) -> Optional[str]:
    """The directory of a directory-pointer command, relative to the project.

    Only returned when it is unambiguous: the command has no ``run:`` and
    no preset fields, its directory (``path:`` or ``./<name>/``) lies inside
    the project and holds its own fdl manifest.
    """
    spec = spec if isinstance(spec, dict) else {}
    if spec.get("run") is not None or any(spec.get(k) is not None for k in _PRESET_FIELDS):
        return None
    relative = spec.get("path") if spec.get("path") is not None else name
    if not isinstance(relative, str) or not relative:
        return None
    root = Path(project_dir).absolute()
    target = Path(os.path.normpath(str(root / relative)))
    try:
        inside = target.relative_to(Path(os.path.normpath(str(root))))
    except ValueError:
        return None
    if not any((target / n).is_file() for n in CONFIG_NAMES):
        return None
    text = inside.as_posix()
    return "" if text == "." else text
