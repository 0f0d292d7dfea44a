"""LogSink: the first failing write warns once, later writes are dropped, nothing raises."""
from __future__ import annotations

import errno
import io

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._files.logsink import LogSink, errno_name


class FlakyFile:
    """A file that accepts ``ok_writes`` writes, then fails every operation with ``err``."""

    def __init__(self, ok_writes: int, err: int = errno.ENOSPC, fail_close: bool = False, fail_flush: bool = False):
        self.ok_writes = ok_writes
        self.err = err
        self.fail_close = fail_close
        self.fail_flush = fail_flush
        self.data: list[str] = []
        self.closed = False
        self.calls = 0

    def write(self, text):
        self.calls += 1
        if len(self.data) >= self.ok_writes:
            raise OSError(self.err, "No space left on device" if self.err == errno.ENOSPC else "I/O error")
        self.data.append(text)
        return len(text)

    def flush(self):
        if self.fail_flush:
            raise OSError(self.err, "I/O error")

    def close(self):
        self.closed = True
        if self.fail_close:
            raise OSError(self.err, "No space left on device")


def test_writes_pass_through_while_the_file_works():
    warnings: list[str] = []
    fh = io.StringIO()
    sink = LogSink(fh, "/p/launch.log", warnings.append)
    assert sink.write("rank0: step 1\n") and sink.write("rank1: step 1\n")
    assert sink.flush()
    assert fh.getvalue() == "rank0: step 1\nrank1: step 1\n"
    assert not sink.failed and warnings == []


def test_first_error_warns_once_then_drops_quietly():
    warnings: list[str] = []
    fh = FlakyFile(ok_writes=2)
    sink = LogSink(fh, "/p/launch.log", warnings.append)
    results = [sink.write(f"line {i}\n") for i in range(6)]
    assert results == [True, True, False, False, False, False]
    assert fh.data == ["line 0\n", "line 1\n"]
    assert fh.calls == 3  # the file is not touched again after it failed
    assert fh.closed
    assert warnings == [
        "launch log /p/launch.log: writing failed with ENOSPC (No space left on device); the log file stops "
        "here, the run goes on and its output is still streamed. Free space on (or fix) that file system to "
        "keep logs of later runs."
    ]
    assert sink.failed and sink.error == "ENOSPC" and sink.dropped == 4


def test_a_close_that_also_fails_is_swallowed():
    warnings: list[str] = []
    sink = LogSink(FlakyFile(ok_writes=0, err=errno.EIO, fail_close=True), "/l", warnings.append)
    assert sink.write("x") is False
    sink.close()
    assert len(warnings) == 1 and "EIO" in warnings[0]


def test_flush_failure_counts_as_the_first_error():
    warnings: list[str] = []
    sink = LogSink(FlakyFile(ok_writes=10, err=errno.EIO, fail_flush=True), "/l", warnings.append)
    assert sink.write("x")
    assert sink.flush() is False
    assert sink.write("y") is False
    assert sink.flush() is False
    sink.close()
    assert len(warnings) == 1 and "writing failed with EIO" in warnings[0]


def test_close_flushes_and_reports_a_late_failure_once():
    warnings: list[str] = []
    fh = FlakyFile(ok_writes=10, err=errno.EDQUOT, fail_flush=True)
    with LogSink(fh, "/l", warnings.append) as sink:
        sink.write("x")
    assert fh.closed
    assert len(warnings) == 1 and "EDQUOT" in warnings[0]
    sink.close()  # idempotent
    assert len(warnings) == 1


def test_non_os_errors_are_not_hidden():
    class Broken:
        def write(self, text):
            raise TypeError("not text")

    with pytest.raises(TypeError):
        LogSink(Broken(), "/l", print).write(b"x")


def test_errno_name():
    assert errno_name(OSError(errno.ENOSPC, "x")) == "ENOSPC"
    assert errno_name(OSError(99999, "x")) == "errno 99999"
    assert errno_name(OSError("no errno")) == "OSError"


def test_a_scrub_filters_every_write_before_the_file():
    fh = io.BytesIO()
    sink = LogSink(fh, "/x.log", lambda _m: None, scrub=lambda data: data.replace(b"secret", b"<withheld>"))
    assert sink.write(b"rank says secret\n")
    assert fh.getvalue() == b"rank says <withheld>\n"
