# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading files of a shared project in bounded time and memory.

A file there can be anything anyone put there: a FIFO (an ``open`` that waits for a writer forever,
a ``read`` that never ends), ``/dev/zero``, or gigabytes. Every read of the project or of the fdl
files goes through :func:`read_capped`.
"""
from __future__ import annotations

import errno
import os
import stat

from ansible_collections.flodl.cluster.plugins.module_utils._files.safe_files import UnsafePathError

# Caps on what a read from the shared project may take: a file there can be anything anyone put there.
FDL_FILE_MAX = 1 << 20  # an fdl file (fdl.yml, fdl.<env>.yml, an inherit-from target)
ENVELOPE_MAX = 4 << 20  # the prebuild envelope (one entry per host and variant)
POINTER_MAX = 4096  # libtorch/.active, a variant's .arch

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


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
