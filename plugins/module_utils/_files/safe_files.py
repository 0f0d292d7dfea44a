# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Writing files in a shared (maybe world-writable) project without following what others planted.

Another user of the project directory can plant a symlink or a hard link where the collection,
often running as root, is about to write; following it would overwrite the link's target. Every
open here refuses a symlinked final component (``O_NOFOLLOW``) and a second hard link, temporary
names are unpredictable and created exclusively, and logs are never world-readable (rank and
build output may carry secrets).
"""
from __future__ import annotations

import errno
import fcntl
import os
import secrets
import shutil
import stat
from typing import IO, Any

from ansible_collections.flodl.cluster.plugins.module_utils._files.file_modes import LOG_MODE

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class UnsafePathError(OSError):
    """A path the collection refuses to write through; the message says why and what to do."""


def _refuse_link(path: str) -> UnsafePathError:
    return UnsafePathError(
        errno.ELOOP,
        f"{path} is a symbolic link; refusing to write through it, since in a shared project another user "
        "may have planted it to redirect this write to a file they cannot touch. Remove the link (and check "
        "who made it), then run again",
    )


def _refuse_hardlink(path: str, links: int) -> UnsafePathError:
    return UnsafePathError(
        errno.EMLINK,
        f"{path} has {links} hard links; refusing to write to it, since another name for the same file may "
        "be outside the project. Remove it, then run again",
    )


def _refuse_kind(path: str) -> UnsafePathError:
    return UnsafePathError(errno.EINVAL, f"{path} exists but is not a regular file; remove it, then run again")


def _plain_name(name: str) -> None:
    if not name or "/" in name or name in (".", "..") or "\0" in name:
        raise ValueError(f"not a plain file name: {name!r}")


def temp_name(name: str) -> str:
    """A hidden sibling name nobody can predict (so nobody can plant it first)."""
    return f".{name}.{secrets.token_hex(8)}.tmp"


def _write_all(fd: int, data: bytes | str | IO[bytes]) -> None:
    if isinstance(data, str):
        data = data.encode("utf-8")
    if isinstance(data, bytes):
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        return
    with os.fdopen(os.dup(fd), "wb", closefd=True) as out:
        shutil.copyfileobj(data, out)


def atomic_write(directory: str, name: str, data: bytes | str | IO[bytes], mode: int = 0o644) -> str:
    """Replace ``directory/name`` with ``data`` atomically; returns the final path.

    The content goes to an exclusively created temporary file with an unpredictable name in the
    same directory, is fsynced, then renamed over the target. A symlink at the target is refused
    (UnsafePathError), not replaced. ``data`` may be bytes, text (UTF-8) or a binary file object.
    """
    _plain_name(name)
    final = os.path.join(directory, name)
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    try:
        try:
            if stat.S_ISLNK(os.lstat(name, dir_fd=dfd).st_mode):
                raise _refuse_link(final)
        except FileNotFoundError:
            pass
        tmp = temp_name(name)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode & 0o7777, dir_fd=dfd)
        try:
            _write_all(fd, data)
            os.fchmod(fd, mode & 0o7777)  # the umask must not decide who may read it
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            os.unlink(tmp, dir_fd=dfd)
            raise
        os.close(fd)
        try:
            # Re-checked just before the rename, which itself never follows a link.
            if stat.S_ISLNK(os.lstat(name, dir_fd=dfd).st_mode):
                raise _refuse_link(final)
        except FileNotFoundError:
            pass
        except BaseException:
            os.unlink(tmp, dir_fd=dfd)
            raise
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return final


def create_exclusive(directory: str, name: str, data: bytes | str, mode: int = 0o644) -> bool:
    """Create ``directory/name`` holding ``data`` only if nothing (not even a link) is there.

    True when this call created it, False when the name already exists: the primitive of a lock.
    Written and fsynced before returning; a failed write removes the file again.
    """
    _plain_name(name)
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    try:
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode & 0o7777,
                         dir_fd=dfd)
        except FileExistsError:
            return False
        try:
            _write_all(fd, data)
            os.fchmod(fd, mode & 0o7777)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            os.unlink(name, dir_fd=dfd)
            raise
        os.close(fd)
        os.fsync(dfd)
        return True
    finally:
        os.close(dfd)


def open_log(path: str, mode: int = LOG_MODE, *, truncate: bool = False, binary: bool = False) -> IO[Any]:
    """Open ``path`` for appending (and reading back), never through a link; text, UTF-8.

    Created with ``mode`` (default 0640) whatever the umask; an existing log loses any permission bit
    beyond ``mode`` (an older, group-writable one becomes 0640). A
    symlink, a hard-linked file or a non-regular file (a FIFO would block) is refused.
    ``truncate`` empties the file only after those checks. ``binary`` gives an unbuffered
    byte stream (the launch log copies the command's raw output).
    """
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK
    try:
        try:
            fd, created = os.open(path, flags | os.O_EXCL, 0o600), True  # private until its mode is set
        except FileExistsError:
            fd, created = os.open(path, flags, 0o600), False
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse_link(path) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse_kind(path)
        if st.st_nlink > 1:
            raise _refuse_hardlink(path, st.st_nlink)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        old = stat.S_IMODE(st.st_mode)
        if created or old & ~mode & 0o777:
            os.fchmod(fd, mode & 0o777 if created else old & mode & 0o777)
        if truncate:
            os.ftruncate(fd, 0)
        if binary:
            return os.fdopen(fd, "ab+", buffering=0)
        return os.fdopen(fd, "a+", encoding="utf-8", errors="replace")
    except BaseException:
        os.close(fd)
        raise
