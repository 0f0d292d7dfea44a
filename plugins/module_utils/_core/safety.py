# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Predicates for hostile inputs: each returns a problem sentence, or None when the value is fine.

Pure functions for the one validator that runs before any host is contacted. ``where`` names
the host and variable (``host gpu-b: flodl_host``) so a message stands alone. Values are shown
shortened and escaped; environment values are never shown, only their lengths and types.
"""
from __future__ import annotations

import os
import posixpath
import unicodedata
from collections.abc import Mapping
from typing import Any

from ansible.module_utils.parsing.convert_bool import boolean

# Linux: one argv/envp string may be at most 32 pages, its NUL included.
MAX_ARG_STRLEN = 131072
# Room left in ARG_MAX for the launcher's own argv and the caller's environment.
DEFAULT_ARG_MARGIN = 64 * 1024
# What POSIX guarantees when sysconf cannot answer.
FALLBACK_ARG_MAX = 4096 * 32
POINTER_BYTES = 8

# Names cargo refuses for a binary: they collide with directories in target/<profile>/.
CARGO_RESERVED_BIN_NAMES = frozenset({"build", "deps", "examples", "incremental"})
NAME_MAX = 255
HOST_MAX = 255


def blank(value: Any) -> bool:
    """None, or a string of only whitespace: an inventory value left unset (a survey's empty answer)."""
    return value is None or (isinstance(value, str) and not value.strip())


def show(value: Any, limit: int = 60) -> str:
    """A value as an operator can read it: repr-escaped, shortened, never multi-line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _has_control(text: str) -> bool:
    return any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in text)


def _name_problem(value: Any, where: str, what: str, allow_at: bool) -> str | None:
    if not isinstance(value, str):
        return f"{where} must be a string {what}, got {_kind(value)}. Set it to a host name or address."
    why = None
    if not value:
        why = "is empty"
    elif len(value.encode("utf-8", "surrogateescape")) > HOST_MAX:
        why = f"is {len(value)} characters long (at most {HOST_MAX})"
    elif value.startswith("-"):
        why = "starts with '-', so ssh and other tools would read it as an option, not a destination"
    elif "/" in value or "\\" in value:
        why = "contains a path separator; it also names a directory under target/cluster/, which it would escape"
    elif value in (".", ".."):
        why = "is a relative directory name, not a host"
    elif any(ch.isspace() for ch in value) or _has_control(value):
        why = "contains whitespace or a control character, which would split or corrupt the ssh command line"
    elif not allow_at and "@" in value:
        why = "contains '@'; put the login in flodl_ssh.user (or ansible_user), not in the host name"
    elif any(ch in value for ch in "'\"`$;&|<>(){}*?!#,"):
        why = "contains shell or ssh metacharacters that no host name or address has"
    if why is None:
        return None
    return f"{where} {show(value)} {why}. Use a plain host name, an IPv4 address or an IPv6 literal such as fd00::2."


def host_name_problem(value: Any, where: str) -> str | None:
    """A logical host name (``flodl_host``, fdl ``host``), also used as a directory name."""
    return _name_problem(value, where, "host name", allow_at=False)


def ssh_target_problem(value: Any, where: str) -> str | None:
    """An ssh destination (``ansible_host``, ``ssh.target``); ``user@host`` is allowed."""
    problem = _name_problem(value, where, "ssh target", allow_at=True)
    if problem is None and isinstance(value, str) and value.rsplit("@", 1)[-1] == "":
        return f"{where} {show(value)} has no host after '@'. Name the host, e.g. alice@gpu-b."
    return problem


def cargo_bin_problem(value: Any, where: str = "flodl_cmd") -> str | None:
    """Can ``value`` be a cargo ``--bin`` target? Mirrors cargo and rustc, and refuses a leading '-'.

    rustc turns a binary name into a crate name ('-' becomes '_'), which may hold only
    alphanumerics and '_'; cargo reserves its build directory names; a leading '-' is taken
    by cargo's own argument parser as a flag.
    """
    fix = "Set it to the name of a [[bin]] target in Cargo.toml (letters, digits, '_' and '-')."
    if not isinstance(value, str):
        return f"{where} must be a string, got {_kind(value)}. {fix}"
    if not value:
        return f"{where} is empty, so there is no binary to build. {fix}"
    if len(value.encode("utf-8", "surrogateescape")) > NAME_MAX:
        return f"{where} is {len(value)} characters long; a binary's file name allows {NAME_MAX} bytes. {fix}"
    if value.startswith("-"):
        return f"{where} {show(value)} starts with '-', which cargo would read as an option of `cargo build`. {fix}"
    bad = sorted({ch for ch in value if not (ch.isalnum() or ch in "_-")})
    if bad:
        chars = ", ".join(show(ch) for ch in bad[:5])
        return f"{where} {show(value)} contains {chars}, which rustc refuses in a binary crate name. {fix}"
    if value in CARGO_RESERVED_BIN_NAMES:
        return f"{where} {show(value)} is reserved by cargo for a directory of its build output. {fix}"
    return None


def relative_path_problem(value: Any, where: str, root: str, *, allow_empty: bool = True) -> str | None:
    """Does the relative path ``value`` stay under ``root`` (a label such as ``<path>/libtorch/``)?

    Lexical only (no file system access): no absolute path, no NUL or control character, and no
    ``..`` that climbs above the root once normalised. ``allow_empty`` accepts ``""``/``.`` (the
    root itself).
    """
    fix = f"Give a path relative to {root} that stays inside it."
    if not isinstance(value, str):
        return f"{where} must be a string path relative to {root}, got {_kind(value)}. {fix}"
    if "\0" in value or _has_control(value):
        return f"{where} {show(value)} contains a NUL or control character. {fix}"
    if value.startswith("/") or value.startswith("~"):
        return f"{where} {show(value)} is absolute, so it would not be under {root}. {fix}"
    norm = posixpath.normpath(value) if value else "."
    if norm == ".." or norm.startswith("../"):
        return f"{where} {show(value)} climbs out of {root} with '..'. {fix}"
    if norm == "." and not allow_empty:
        return f"{where} {show(value)} names {root} itself, not a directory inside it. {fix}"
    return None


PATH_MAX = 4096


def absolute_path_problem(value: Any, where: str, what: str) -> str | None:
    """An absolute path that reaches the launcher's shell lines, ``cd`` and ``execve`` (``flodl_path``).

    Lexical only. Other characters (spaces, quotes, ``$``) are allowed: every consumer quotes the
    path as one word, so a payload there is only an odd directory name.
    """
    fix = f"Set it to the absolute path of {what}, e.g. /srv/proj."
    if not isinstance(value, str):
        return None  # the type is reported by the validator
    if "\0" in value:
        return f"{where} contains a NUL character, which no path, command line or environment can carry. {fix}"
    if _has_control(value):
        return (f"{where} {show(value)} contains a control character (a newline, a tab...), which would split "
                f"the launcher's shell lines. {fix}")
    if not value.startswith("/"):
        return f"{where} {show(value)} is not an absolute path (it must not depend on a working directory). {fix}"
    if len(value.encode("utf-8", "surrogateescape")) >= PATH_MAX:
        return f"{where} is {len(value)} characters long, over the {PATH_MAX - 1} a path may have. {fix}"
    return None


def resolved_under(root: str, path: str) -> bool:
    """True when ``path`` (symlinks followed) is ``root`` or inside it (symlinks followed)."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip("/") + "/")


def default_arg_max() -> int:
    """The kernel's limit on argv + environment bytes for one exec."""
    try:
        value = os.sysconf("SC_ARG_MAX")
    except (ValueError, OSError, AttributeError):
        return FALLBACK_ARG_MAX
    return value if value and value > 0 else FALLBACK_ARG_MAX


def _nbytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))


def env_size_problems(
    env: Mapping[Any, Any],
    where: str,
    *,
    arg_max: int,
    margin: int = DEFAULT_ARG_MARGIN,
    strlen_max: int = MAX_ARG_STRLEN,
    baseline: int = 0,
) -> list[str]:
    """Would exec refuse this environment with E2BIG? One problem per oversized entry, then the total.

    Each ``K=V`` with its NUL must fit ``strlen_max``; all entries (strings, NULs and one pointer
    each) plus ``baseline`` (bytes already used by argv and inherited variables) must fit
    ``arg_max - margin``. Only names, lengths and types are reported, never a value.
    """
    problems: list[str] = []
    total = baseline
    for key, value in env.items():
        if not isinstance(key, str) or not isinstance(value, str):
            problems.append(
                f"{where}: variable {show(key)} has a {_kind(value)} value; environment values must be "
                "strings. Quote it in YAML."
            )
            continue
        size = _nbytes(key) + 1 + _nbytes(value) + 1
        total += size + POINTER_BYTES
        if size > strlen_max:
            problems.append(
                f"{where}: variable {show(key)} is {size} bytes as KEY=VALUE, over the kernel's "
                f"{strlen_max}-byte limit for one environment string; every exec would fail with E2BIG "
                "(after all builds). Pass large data as a file on the shared mount and its path here."
            )
    budget = arg_max - margin
    if total > budget:
        problems.append(
            f"{where}: the environment is {total} bytes in all, over the {budget} bytes the kernel leaves "
            f"for it (ARG_MAX {arg_max} minus {margin} for the command line); the launch would fail with "
            "E2BIG. Move large values into files on the shared mount."
        )
    return problems


def parse_bool(value: Any) -> bool | None:
    """A boolean as Ansible reads one (``"false"``, ``"no"``, ``0``...), or None when it is not one.

    Survey answers arrive as strings, so ``"false"`` must mean False, never a command or a name.
    """
    if value is None:
        return None
    try:
        return boolean(value, strict=True)
    except TypeError:
        return None


def bool_problem(value: Any, where: str) -> str | None:
    if parse_bool(value) is not None:
        return None
    return (
        f"{where} must be a boolean, got {_kind(value)} {show(value)}. Use true or false "
        "(a survey may send the strings \"true\"/\"false\", \"yes\"/\"no\")."
    )
