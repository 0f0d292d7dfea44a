"""atomic_write and open_log on a real file system: planted links are refused, targets untouched."""
from __future__ import annotations

import io
import os
import stat

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._files import safe_files as sf


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# ------------------------------------------------------------ atomic_write


def test_atomic_write_creates_and_replaces(tmp_path):
    path = sf.atomic_write(str(tmp_path), "env.json", '{"a":1}', 0o644)
    assert path == str(tmp_path / "env.json")
    assert (tmp_path / "env.json").read_text() == '{"a":1}'
    assert _mode(path) == 0o644
    sf.atomic_write(str(tmp_path), "env.json", b"two", 0o600)
    assert (tmp_path / "env.json").read_bytes() == b"two"
    assert _mode(path) == 0o600
    assert sorted(os.listdir(tmp_path)) == ["env.json"]  # no temporary left behind


def test_atomic_write_from_a_stream(tmp_path):
    sf.atomic_write(str(tmp_path), "bin", io.BytesIO(b"\x7fELF" + b"x" * 100000), 0o755)
    assert (tmp_path / "bin").read_bytes()[:4] == b"\x7fELF"
    assert _mode(tmp_path / "bin") == 0o755


def test_atomic_write_mode_ignores_the_umask(tmp_path):
    old = os.umask(0o077)
    try:
        sf.atomic_write(str(tmp_path), "f", "x", 0o644)
    finally:
        os.umask(old)
    assert _mode(tmp_path / "f") == 0o644


def test_atomic_write_refuses_a_planted_symlink_and_leaves_its_target(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("root only\n")
    os.chmod(victim, 0o600)
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "env.json").symlink_to(victim)
    with pytest.raises(sf.UnsafePathError, match="is a symbolic link; refusing to write through it"):
        sf.atomic_write(str(tmp_path / "proj"), "env.json", "payload")
    assert victim.read_text() == "root only\n" and _mode(victim) == 0o600
    assert os.path.islink(tmp_path / "proj" / "env.json")
    assert os.listdir(tmp_path / "proj") == ["env.json"]


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "x\0y"])
def test_atomic_write_takes_plain_names_only(tmp_path, name):
    with pytest.raises(ValueError):
        sf.atomic_write(str(tmp_path), name, "x")


def test_temp_names_are_unpredictable_and_hidden():
    names = {sf.temp_name("prebuild.log") for unused in range(50)}
    assert len(names) == 50
    assert all(n.startswith(".prebuild.log.") and n.endswith(".tmp") for n in names)


def test_a_failed_write_leaves_no_temporary(tmp_path):
    class Boom(io.RawIOBase):
        def readinto(self, b):
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        sf.atomic_write(str(tmp_path), "f", Boom())
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------ open_log


def test_open_log_creates_0640_and_appends(tmp_path):
    path = str(tmp_path / "prebuild.log")
    with sf.open_log(path) as log:
        log.write("one\n")
    with sf.open_log(path) as log:
        log.write("two\n")
        log.flush()
        log.seek(0)
        assert log.read() == "one\ntwo\n"
    assert _mode(path) == 0o640


def test_open_log_truncates_only_when_asked(tmp_path):
    path = str(tmp_path / "l")
    (tmp_path / "l").write_text("old\n")
    with sf.open_log(path, truncate=True) as log:
        log.write("new\n")
    assert (tmp_path / "l").read_text() == "new\n"


def test_open_log_strips_group_and_world_bits_of_an_old_log(tmp_path):
    (tmp_path / "l").write_text("")
    os.chmod(tmp_path / "l", 0o666)
    sf.open_log(str(tmp_path / "l")).close()
    assert _mode(tmp_path / "l") == 0o640


def test_open_log_keeps_an_old_log_that_is_tighter(tmp_path):
    (tmp_path / "l").write_text("")
    os.chmod(tmp_path / "l", 0o600)
    sf.open_log(str(tmp_path / "l")).close()
    assert _mode(tmp_path / "l") == 0o600


@pytest.mark.parametrize("umask", [0o000, 0o077])
def test_open_log_creates_0640_whatever_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        sf.open_log(str(tmp_path / "l")).close()
    finally:
        os.umask(old)
    assert _mode(tmp_path / "l") == 0o640


def test_open_log_refuses_a_symlink(tmp_path):
    victim = tmp_path / "shadow"
    victim.write_text("secret\n")
    (tmp_path / "prebuild.log").symlink_to(victim)
    with pytest.raises(sf.UnsafePathError, match="is a symbolic link") as err:
        sf.open_log(str(tmp_path / "prebuild.log"), truncate=True)
    assert str(tmp_path / "prebuild.log") in str(err.value)
    assert victim.read_text() == "secret\n"


def test_open_log_refuses_a_hard_link(tmp_path):
    victim = tmp_path / "shadow"
    victim.write_text("secret\n")
    os.link(victim, tmp_path / "prebuild.log")
    with pytest.raises(sf.UnsafePathError, match="has 2 hard links"):
        sf.open_log(str(tmp_path / "prebuild.log"), truncate=True)
    assert victim.read_text() == "secret\n"


def test_open_log_refuses_a_fifo_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "prebuild.log")
    with pytest.raises(sf.UnsafePathError, match="not a regular file"):
        sf.open_log(str(tmp_path / "prebuild.log"))


# ------------------------------------------------------------ create_exclusive (the lock primitive)


def test_create_exclusive_creates_once(tmp_path):
    assert sf.create_exclusive(str(tmp_path), "run.lock", '{"a":1}\n', 0o644) is True
    assert sf.create_exclusive(str(tmp_path), "run.lock", "second", 0o644) is False
    assert (tmp_path / "run.lock").read_text() == '{"a":1}\n'
    assert _mode(tmp_path / "run.lock") == 0o644


def test_create_exclusive_treats_a_planted_symlink_as_taken(tmp_path):
    (tmp_path / "run.lock").symlink_to(tmp_path / "nowhere")
    assert sf.create_exclusive(str(tmp_path), "run.lock", "x") is False
    assert not (tmp_path / "nowhere").exists()
