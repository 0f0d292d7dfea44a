# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The modes of everything the collection writes, whatever the umask it runs under (docs/hardening.md).

A job runner or a shell with ``umask 000`` would otherwise leave the rank binary every worker runs,
and the directories it lies in, writable by anyone who shares the project. Each write names its mode
here; builds run under :data:`BUILD_UMASK`, and the launch command under the caller's umask with the
group and world write bits added (:func:`tightened_umask`).
"""
from __future__ import annotations

import errno
import os
import stat
from typing import Callable

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# A link (ELOOP), a name gone since it was listed, a file this user may not open: left as it is.
_SKIP = (errno.ELOOP, errno.ENOENT, errno.EACCES, errno.EPERM, errno.ENXIO, errno.ENOTDIR)

DIR_MODE = 0o755          # target/cluster and the build target dirs: the ranks read binaries through them
PRIVATE_DIR_MODE = 0o750  # launch logs, detached run records: output that may carry secrets
FILE_MODE = 0o644         # the run lock, the envelope, the compose overlay
RECORD_MODE = 0o640       # a detached run's record (names its log and command)
LOG_MODE = 0o640          # build and launch logs
BIN_MODE = 0o755          # the rank binary

# Group and world write: what no file or directory the collection writes may have.
LOOSE_BITS = 0o022

# Cargo's own output (target dirs, the binary) under the build; the same as a docker container's default.
BUILD_UMASK = 0o022

# POSIX sh: keep the caller's umask, only adding group and world write (a 077 stays 077).
SHELL_TIGHTEN_UMASK = "umask go-w"


def loose_bits(mode: int) -> int:
    """The group/world write bits of ``mode`` (0 when none)."""
    return mode & LOOSE_BITS


def without_loose_bits(mode: int) -> int:
    """``mode`` without group or world write."""
    return mode & ~LOOSE_BITS


def tightened_umask(current: int) -> int:
    """A umask that never lets group or world write, and keeps whatever else ``current`` masks."""
    return (current | LOOSE_BITS) & 0o777


def with_umask(command: str, mask: int = BUILD_UMASK) -> str:
    """``command`` (one POSIX sh script) run under ``mask``, set first in the same shell."""
    return f"umask {mask:03o}\n{command}"


def current_umask() -> int:
    """This process's umask, read without changing it where Linux shows it (else set and put back)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def make_dirs(path: str, mode: int, parent_mode: int = DIR_MODE) -> str:
    """``path`` as a directory; every component this call creates gets its mode set explicitly.

    The leaf gets ``mode``, missing parents ``parent_mode`` (``os.makedirs`` leaves parents to the
    umask). Existing directories are left as they are: they may be the operator's.
    """
    path = os.path.abspath(path)
    missing: list[str] = []
    current = path
    while not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)  # private until its mode is set
        except FileExistsError:
            if not os.path.isdir(directory):
                raise
            continue
        _chmod_own(directory, _exactly(mode if directory == path else parent_mode))
    return path


def tighten_tree(root: str) -> int:
    """Remove group and world write from every file and directory under ``root`` (links not followed).

    For what a build left there under a looser umask, earlier runs included. Entries of another user
    (a container's root) are skipped. Returns how many were changed.
    """
    paths = [root]
    for directory, dirs, files in os.walk(root):
        paths.extend(os.path.join(directory, name) for name in dirs + files)
    # A look at each name first: only the few with loose bits are opened (a target dir holds thousands).
    return sum(1 for path in paths if _looks_loose(path) and _chmod_own(path, without_loose_bits, only_loose=True))


def _looks_loose(path: str) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return not stat.S_ISLNK(st.st_mode) and bool(loose_bits(st.st_mode))


def set_exact_mode(path: str, mode: int) -> bool:
    """Give ``path`` exactly ``mode``; False when it is a link, not ours, or gone."""
    return _chmod_own(path, _exactly(mode)) or _mode_is(path, mode)


def _exactly(mode: int) -> Callable[[int], int]:
    return lambda _old: mode


def _mode_is(path: str, mode: int) -> bool:
    try:
        return stat.S_IMODE(os.lstat(path).st_mode) == mode
    except OSError:
        return False


def _chmod_own(path: str, new_mode: Callable[[int], int], only_loose: bool = False) -> bool:
    """Change the mode of ``path`` through a descriptor: never through a link planted after a look at the
    name, and only for a regular file or directory this user owns. True when the mode changed."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK | _CLOEXEC)
    except OSError as exc:
        if exc.errno in _SKIP:
            return False
        raise
    try:
        st = os.fstat(fd)
        old = stat.S_IMODE(st.st_mode)
        kind_ok = stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)
        if not kind_ok or st.st_uid != os.geteuid() or (only_loose and not loose_bits(old)):
            return False
        mode = new_mode(old)
        if mode == old:
            return False
        os.fchmod(fd, mode)
        return True
    finally:
        os.close(fd)
