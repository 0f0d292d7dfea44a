# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The launch log as a best-effort copy: a full disk or a failing mount must never stop training.

The launch streams rank output to the play and copies it to a log file. A write error on that file
(ENOSPC, EIO, EDQUOT...) used to escape into the launch's cleanup, which then killed a healthy run.
:class:`LogSink` turns the first such error into one warning, stops using the file and lets the
caller keep streaming.
"""
from __future__ import annotations

import errno
from collections.abc import Callable
from typing import Any


def errno_name(exc: OSError) -> str:
    """``ENOSPC`` for errno 28; the number itself when the platform has no name for it."""
    if exc.errno is None:
        return type(exc).__name__
    return errno.errorcode.get(exc.errno, f"errno {exc.errno}")


class LogSink:
    """Wraps an open text (or binary) file; ``write``/``flush`` never raise OSError.

    ``warn`` is called at most once, with a message naming the path and the errno. After that the
    file is closed (errors ignored) and every write is dropped; ``failed`` and ``error`` tell the
    caller what happened, e.g. for the task result.
    """

    def __init__(self, fh: Any, path: str, warn: Callable[[str], None],
                 scrub: Callable[[bytes], bytes] | None = None) -> None:
        self._fh = fh
        self._scrub = scrub  # applied to each write (a line): what must not reach the file (vaulted values)
        self.path = path
        self._warn = warn
        self.error: str | None = None
        self.dropped = 0

    @property
    def failed(self) -> bool:
        return self.error is not None

    def _fail(self, exc: OSError) -> None:
        name = errno_name(exc)
        self.error = name
        reason = exc.strerror if isinstance(exc.strerror, str) else name
        self._warn(
            f"launch log {self.path}: writing failed with {name} ({reason}); the log file stops here, "
            "the run goes on and its output is still streamed. Free space on (or fix) that file system "
            "to keep logs of later runs."
        )
        fh, self._fh = self._fh, None
        try:
            fh.close()
        except (OSError, ValueError):
            pass  # a close that flushes into the same full disk

    def write(self, data: Any) -> bool:
        """Write ``data``; False when the log is (now) unusable and the data was dropped."""
        if self._fh is None:
            self.dropped += 1
            return False
        try:
            self._fh.write(self._scrub(data) if self._scrub is not None else data)
        except OSError as exc:
            self.dropped += 1
            self._fail(exc)
            return False
        return True

    def flush(self) -> bool:
        if self._fh is None:
            return False
        try:
            self._fh.flush()
        except OSError as exc:
            self._fail(exc)
            return False
        return True

    def close(self) -> None:
        if self._fh is None:
            return
        fh, self._fh = self._fh, None
        try:
            fh.flush()
        except OSError as exc:
            self._fh = fh
            self._fail(exc)
            return
        try:
            fh.close()
        except OSError:
            pass

    def __enter__(self) -> "LogSink":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
