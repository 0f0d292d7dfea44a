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

LOG_MODE = 0o640
# Caps on what a read from the shared project may take: a file there can be anything anyone put there.
FDL_FILE_MAX = 1 << 20  # an fdl file (fdl.yml, fdl.<env>.yml, an inherit-from target)
ENVELOPE_MAX = 4 << 20  # the prebuild envelope (one entry per host and variant)
POINTER_MAX = 4096  # libtorch/.active, a variant's .arch

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


def _refuse_read_kind(path: str) -> UnsafePathError:
    return UnsafePathError(
        errno.EINVAL,
        f"{path} is not a regular file (a FIFO, a device or a directory); reading it could block or never end, "
        "so it was not read. Replace it with a regular file, then run again",
    )


def _refuse_size(path: str, size: int, cap: int) -> UnsafePathError:
    return UnsafePathError(
        errno.EFBIG,
        f"{path} is {size} bytes, over the {cap}-byte cap for this file, so it was not read; "
        "shrink it (or check what wrote it), then run again",
    )


def read_capped(path: str, cap: int, *, follow: bool = True) -> bytes:
    """The bytes of the regular file ``path``, at most ``cap`` of them, in bounded time.

    Opened with ``O_NONBLOCK`` (a FIFO opens at once instead of waiting for a writer) and, unless
    ``follow``, ``O_NOFOLLOW``; a FIFO, a device or a directory is refused by ``fstat`` before any
    read, and so is a file over ``cap`` (checked again while reading, for a file still growing).
    Raises UnsafePathError (an OSError) naming the file; a missing file raises FileNotFoundError.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC | (0 if follow else _NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise UnsafePathError(errno.ELOOP, f"{path} is a symbolic link; refusing to read through it. "
                                  "Remove the link (and check who made it), then run again") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse_read_kind(path)
        if st.st_size > cap:
            raise _refuse_size(path, st.st_size, cap)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(65536, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > cap:
                raise _refuse_size(path, total, cap)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_capped_text(path: str, cap: int, *, follow: bool = True) -> str:
    """:func:`read_capped` decoded as UTF-8 (UnicodeDecodeError when it is not)."""
    return read_capped(path, cap, follow=follow).decode("utf-8")


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

    Created with ``mode`` (default 0640); an existing log loses any world permission bits. A
    symlink, a hard-linked file or a non-regular file (a FIFO would block) is refused.
    ``truncate`` empties the file only after those checks. ``binary`` gives an unbuffered
    byte stream (the launch log copies the command's raw output).
    """
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, mode & 0o7777 & ~0o007)
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
        if st.st_mode & 0o007:
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~0o007)
        if truncate:
            os.ftruncate(fd, 0)
        if binary:
            return os.fdopen(fd, "ab+", buffering=0)
        return os.fdopen(fd, "a+", encoding="utf-8", errors="replace")
    except BaseException:
        os.close(fd)
        raise



def _inside(real_root: str, path: str) -> bool:
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip("/") + "/")


def _parts(rel: str) -> list[str]:
    parts = [p for p in rel.split("/") if p and p != "."]
    if rel.startswith("/") or ".." in parts or "\0" in rel:
        raise ValueError(f"not a relative path inside the root: {rel!r}")
    return parts


def _component_problem(root: str, real_root: str, path: str, st: os.stat_result) -> str | None:
    if stat.S_ISLNK(st.st_mode):
        if not _inside(real_root, path):
            return (f"{path} is a symbolic link to {os.path.realpath(path)}, outside the project {root}; refusing to "
                    "create or write anything through it (the run lock, build directories, logs). Remove the link "
                    "(and check who made it) or point it inside the project, then run again")
        try:
            st = os.stat(path)
        except OSError:
            return f"{path} is a dangling symbolic link; remove it, then run again"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} exists but is not a directory; remove it, then run again"
    return None


def link_escape_problem(root: str, rel: str) -> str | None:
    """Why the run must not create ``root/rel`` (a link out of ``root`` on the way), or None.

    Only what exists is checked (nothing is created); see :func:`make_dirs_under`.
    """
    real_root = os.path.realpath(root)
    current = root.rstrip("/") or "/"
    for part in _parts(rel):
        current = os.path.join(current, part)
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return f"{current} cannot be checked ({exc.strerror}); fix its permissions, then run again"
        problem = _component_problem(root, real_root, current, st)
        if problem:
            return problem
    return None


def make_dirs_under(root: str, rel: str, mode: int = 0o755) -> str:
    """``root/rel`` as a directory inside ``root``, created one component at a time; returns it.

    Each component is checked before the next is created in it: a symbolic link whose target is
    outside ``root`` (links in ``root`` itself followed) or a non-directory is refused
    (UnsafePathError naming the component), so nothing is created or written through a link out
    of the project; a link that stays inside ``root`` is allowed. ``mkdir`` never follows a link
    at the name it creates.
    """
    real_root = os.path.realpath(root)
    current = root.rstrip("/") or "/"
    for part in _parts(rel):
        current = os.path.join(current, part)
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            try:
                os.mkdir(current, mode)
            except FileExistsError:
                pass
            st = os.lstat(current)
        problem = _component_problem(root, real_root, current, st)
        if problem:
            raise UnsafePathError(errno.EXDEV, problem)
    return current
