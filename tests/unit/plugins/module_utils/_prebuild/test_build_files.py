"""The prebuild's files and one build's process, on real files: links, copies, the envelope, the PATH."""
from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._prebuild.build_files import link_binary, take_envelope
from ansible_collections.flodl.cluster.plugins.module_utils._prebuild.build_process import (
    _build_environ,
    _run_bounded,
    os_error_text,
)


def test_link_binary_links_once_then_reports_no_change(tmp_path):
    source = tmp_path / "a/train"
    source.parent.mkdir()
    source.write_bytes(b"elf")
    dest = tmp_path / "b/release/train"
    assert link_binary(str(source), str(dest)) is True
    assert os.path.samefile(source, dest)
    assert link_binary(str(source), str(dest)) is False


def test_link_binary_replaces_another_file(tmp_path):
    source, dest = tmp_path / "train", tmp_path / "old"
    source.write_bytes(b"new")
    dest.write_bytes(b"stale")
    assert link_binary(str(source), str(dest)) is True and dest.read_bytes() == b"new"


def test_link_binary_refuses_a_planted_link(tmp_path):
    source = tmp_path / "train"
    source.write_bytes(b"elf")
    dest = tmp_path / "dest"
    dest.symlink_to(tmp_path / "nowhere")  # dangling: exists() is False, the link is still there
    with pytest.raises(OSError) as raised:
        link_binary(str(source), str(dest))
    assert raised.value.errno == errno.ELOOP and "is a symbolic link; remove it" in str(raised.value)


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs a second filesystem")
def test_link_binary_copies_across_filesystems_and_keeps_the_mode(tmp_path):
    with tempfile.TemporaryDirectory(dir="/dev/shm") as other:
        if os.stat(other).st_dev == os.stat(tmp_path).st_dev:
            pytest.skip("/dev/shm is on the same filesystem here")
        source = Path(other) / "train"
        source.write_bytes(b"elf")
        source.chmod(0o750)
        dest = tmp_path / "release/train"
        assert link_binary(str(source), str(dest)) is True
        assert dest.read_bytes() == b"elf" and (dest.stat().st_mode & 0o777) == 0o750
        assert not os.path.samefile(source, dest)
        # The copy has the source's size but its own mtime: another link_binary copies again.
        assert link_binary(str(source), str(dest)) is True


def test_take_envelope_returns_the_old_text_and_removes_it(tmp_path):
    envelope = tmp_path / "env.json"
    envelope.write_text('{"w1":{}}', encoding="utf-8")
    assert take_envelope(str(envelope)) == '{"w1":{}}' and not envelope.exists()
    assert take_envelope(str(envelope)) is None
    assert take_envelope("") is None


def test_take_envelope_removes_a_fifo_unread(tmp_path):
    fifo = tmp_path / "env.json"
    os.mkfifo(fifo)
    assert take_envelope(str(fifo)) is None and not os.path.lexists(fifo)


def test_a_build_finds_rustups_cargo_when_path_has_none(tmp_path, monkeypatch):
    rustup = tmp_path / ".cargo/bin"
    rustup.mkdir(parents=True)
    (rustup / "cargo").write_text("#!/bin/sh\n", encoding="utf-8")
    monkeypatch.setenv("HOME", str(tmp_path))
    env = _build_environ({"PATH": "/nonexistent"}, {"CARGO_TARGET_DIR": "/t"}, native=True)
    assert env["PATH"] == f"/nonexistent:{rustup}" and env["CARGO_TARGET_DIR"] == "/t"
    assert _build_environ({"PATH": ""}, {}, native=True)["PATH"] == str(rustup)
    assert _build_environ({"PATH": "/nonexistent"}, {}, native=False)["PATH"] == "/nonexistent"  # docker: its own


def test_a_build_host_without_timeout_is_told_to_install_coreutils(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with open(tmp_path / "log", "w+", encoding="utf-8") as log, pytest.raises(OSError) as raised:
        _run_bounded(["true"], str(tmp_path), {"PATH": str(tmp_path)}, log, 5.0)
    assert "install coreutils there" in str(raised.value)


def test_a_build_that_exits_nonzero_reports_its_status(tmp_path):
    with open(tmp_path / "log", "w+", encoding="utf-8") as log:
        rc = _run_bounded(["sh", "-c", "echo out; exit 7"], str(tmp_path), dict(os.environ), log, 5.0)
        log.seek(0)
        assert rc == 7 and log.read() == "out\n"


def test_os_error_text_names_the_file_when_known():
    assert os_error_text(FileNotFoundError(errno.ENOENT, "No such file", "/p/x")) == "/p/x: No such file"
    assert os_error_text(OSError("plain")) == "plain"
