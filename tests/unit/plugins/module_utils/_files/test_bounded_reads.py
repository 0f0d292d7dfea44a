"""Every read from the shared project is non-blocking, regular-file only and capped: a FIFO, a device or
a huge file planted where the run reads ends at once with a message naming the file, for each reader."""
from __future__ import annotations

import json
import os
import threading
import time
from types import SimpleNamespace

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._fdl import fdl_chain
from ansible_collections.flodl.cluster.plugins.module_utils._launch import libtorch_env as lt
from ansible_collections.flodl.cluster.plugins.module_utils._run import runlock
from ansible_collections.flodl.cluster.plugins.module_utils._files import safe_files
from ansible_collections.flodl.cluster.plugins.module_utils._files import safe_reads as sf
from ansible_collections.flodl.cluster.plugins.module_utils._prebuild import build_files
from ansible_collections.flodl.cluster.plugins.module_utils._fdl.fdl_error import FdlConfigError
from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import detached_io, launch_io
from ansible_collections.flodl.cluster.plugins.plugin_utils._host import runlock_io


def bounded(fn, seconds: float = 5.0):
    """``fn()``'s outcome; fails the test when it does not end within ``seconds`` (a FIFO read blocks)."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001  (handed to the test)
            box["error"] = exc

    started = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still reading after {seconds} s"
    assert time.monotonic() - started < seconds
    if "error" in box:
        raise box["error"]
    return box.get("value")


def fifo(path) -> str:
    os.mkfifo(path)
    return str(path)


def big(path, size: int) -> str:
    with open(path, "wb") as fh:
        fh.truncate(size)  # sparse: as large as asked, no disk used
    return str(path)


# ------------------------------------------------------------ the helper


def test_read_capped_reads_a_regular_file(tmp_path):
    (tmp_path / "f").write_bytes(b"abc")
    assert sf.read_capped(str(tmp_path / "f"), 3) == b"abc"
    assert sf.read_capped_text(str(tmp_path / "f"), 10) == "abc"


def test_read_capped_refuses_a_fifo_without_blocking(tmp_path):
    path = fifo(tmp_path / "pipe")
    with pytest.raises(safe_files.UnsafePathError) as err:
        bounded(lambda: sf.read_capped(path, 100))
    assert path in err.value.strerror and "not a regular file" in err.value.strerror


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_read_capped_refuses_a_device(device):
    with pytest.raises(safe_files.UnsafePathError) as err:
        bounded(lambda: sf.read_capped(device, 100))
    assert device in err.value.strerror


def test_read_capped_refuses_a_directory(tmp_path):
    with pytest.raises(safe_files.UnsafePathError, match="not a regular file"):
        sf.read_capped(str(tmp_path), 100)


def test_read_capped_refuses_an_oversized_file_unread(tmp_path):
    path = big(tmp_path / "huge", 8 << 30)
    with pytest.raises(safe_files.UnsafePathError) as err:
        bounded(lambda: sf.read_capped(path, 1 << 20))
    assert path in err.value.strerror and "over the 1048576-byte cap" in err.value.strerror


def test_read_capped_follows_links_only_when_allowed(tmp_path):
    (tmp_path / "real").write_bytes(b"x")
    os.symlink(tmp_path / "real", tmp_path / "link")
    assert sf.read_capped(str(tmp_path / "link"), 10) == b"x"
    with pytest.raises(safe_files.UnsafePathError, match="symbolic link"):
        sf.read_capped(str(tmp_path / "link"), 10, follow=False)


def test_read_capped_missing_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        sf.read_capped(str(tmp_path / "gone"), 10)


# ------------------------------------------------------------ each reader


@pytest.mark.parametrize("plant", ["fifo", "huge"])
def test_run_lock_planted_as_fifo_or_huge_is_taken_over_at_once(tmp_path, plant):
    lock_dir = tmp_path / "target" / "cluster"
    lock_dir.mkdir(parents=True)
    path = lock_dir / "run.lock"
    fifo(path) if plant == "fifo" else big(path, 1 << 30)
    refusal, warnings, _written = bounded(lambda: runlock_io.take_lock(str(tmp_path), "ctl", os.getpid()))
    assert refusal is None
    assert len(warnings) == 1 and str(path) in warnings[0] and "taking it over" in warnings[0]
    held, problem = runlock.parse_lock(path.read_bytes())  # replaced by a real record
    assert problem is None and held.pid == os.getpid()


@pytest.mark.parametrize("plant", ["fifo", "huge"])
def test_launch_envelope_planted_as_fifo_or_huge_is_not_read(tmp_path, monkeypatch, plant):
    path = tmp_path / "target" / "cluster" / "prebuild-envelope.json"
    path.parent.mkdir(parents=True)
    fifo(path) if plant == "fifo" else big(path, sf.ENVELOPE_MAX + 1)
    said: list[str] = []
    monkeypatch.setattr(launch_io, "Display", lambda: SimpleNamespace(warning=said.append))
    ctx = SimpleNamespace(prebuild=True, project_root=str(tmp_path), project_dir=str(tmp_path))
    assert bounded(lambda: launch_io.read_envelope(ctx, None, None)) == (None, None)
    assert len(said) == 1 and str(path) in said[0]


def test_launch_envelope_missing_is_silent(tmp_path, monkeypatch):
    said: list[str] = []
    monkeypatch.setattr(launch_io, "Display", lambda: SimpleNamespace(warning=said.append))
    ctx = SimpleNamespace(prebuild=True, project_root=str(tmp_path), project_dir=str(tmp_path))
    assert launch_io.read_envelope(ctx, None, None) == (None, None) and said == []


@pytest.mark.parametrize("plant", ["fifo", "huge"])
def test_prebuild_previous_envelope_planted_is_removed_unread(tmp_path, plant):
    path = tmp_path / "prebuild-envelope.json"
    fifo(path) if plant == "fifo" else big(path, sf.ENVELOPE_MAX + 1)
    assert bounded(lambda: build_files.take_envelope(str(path))) is None
    assert not os.path.lexists(path)


def test_prebuild_previous_envelope_is_read(tmp_path):
    path = tmp_path / "prebuild-envelope.json"
    path.write_text('{"h2": {}}', encoding="utf-8")
    assert build_files.take_envelope(str(path)) == '{"h2": {}}'


@pytest.mark.parametrize("plant", ["fifo", "huge"])
def test_fdl_file_planted_as_fifo_or_huge_is_refused_naming_it(tmp_path, plant):
    path = tmp_path / "fdl.cluster.yml"
    fifo(path) if plant == "fifo" else big(path, sf.FDL_FILE_MAX + 1)
    with pytest.raises(FdlConfigError) as err:
        bounded(lambda: fdl_chain.load_document(path))
    assert str(path) in str(err.value)


@pytest.mark.parametrize("plant", ["fifo", "huge"])
def test_inherit_from_target_planted_as_fifo_or_huge_is_refused_naming_it(tmp_path, plant):
    (tmp_path / "fdl.yml").write_text("inherit-from: parent.yml\n", encoding="utf-8")
    parent = tmp_path / "parent.yml"
    fifo(parent) if plant == "fifo" else big(parent, sf.FDL_FILE_MAX + 1)
    with pytest.raises(FdlConfigError) as err:
        bounded(lambda: fdl_chain.resolve_chain(tmp_path / "fdl.yml"))
    assert str(parent) in str(err.value) and "its content is not shown" in str(err.value)


@pytest.mark.parametrize("name", [".active", "precompiled/cu126/.arch"])
@pytest.mark.parametrize("plant", ["fifo", "huge"])
def test_libtorch_pointer_files_planted_read_as_absent(tmp_path, name, plant):
    variant = tmp_path / "libtorch" / "precompiled" / "cu126"
    variant.mkdir(parents=True)
    (variant / ".arch").write_text("cuda=12.6\n", encoding="utf-8")
    (tmp_path / "libtorch" / ".active").write_text("precompiled/cu126\n", encoding="utf-8")
    target = tmp_path / "libtorch" / name
    target.unlink()
    fifo(target) if plant == "fifo" else big(target, sf.POINTER_MAX + 1)
    env = bounded(lambda: lt.read_libtorch_env(str(tmp_path), "me", [], {}))
    assert "CUDA_TAG" not in env


def test_detached_run_record_planted_as_fifo_is_reported_not_read(tmp_path):
    directory = tmp_path / "target" / "cluster" / "runs"
    directory.mkdir(parents=True)
    fifo(directory / "r1.json")
    run, why, problems = bounded(lambda: detached_io.find_run(str(tmp_path), None))
    assert run is None and "r1.json" in why and "not a regular file" in why and problems == [why]


def test_overlay_planted_as_fifo_is_replaced_without_blocking(tmp_path):
    path = fifo(tmp_path / ".fdl-cluster-overlay.yml")
    warnings: list[str] = []
    assert bounded(lambda: launch_io.write_overlay(path, "services: {}\n", warnings)) is True
    assert (tmp_path / ".fdl-cluster-overlay.yml").read_text() == "services: {}\n" and warnings == []


def test_envelope_json_round_trip_still_reads(tmp_path):
    path = tmp_path / "target" / "cluster" / "prebuild-envelope.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"h2": {"bin": "x"}}), encoding="utf-8")
    ctx = SimpleNamespace(prebuild=True, project_root=str(tmp_path), project_dir=str(tmp_path))
    text, source = launch_io.read_envelope(ctx, None, None)
    assert json.loads(text) == {"h2": {"bin": "x"}} and str(path) in source
