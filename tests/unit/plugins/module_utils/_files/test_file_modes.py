"""file_modes: the modes of what the collection writes, whatever the umask (docs/hardening.md, "Modes")."""
from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._files import file_modes as fm


def _mode(path: Path | str) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def umask_000():
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize("current, expected", [(0o000, 0o022), (0o002, 0o022), (0o022, 0o022), (0o077, 0o077),
                                               (0o027, 0o027), (0o007, 0o027)])
def test_tightened_umask_adds_group_and_world_write_and_keeps_the_rest(current, expected):
    assert fm.tightened_umask(current) == expected


def test_loose_bits():
    assert fm.loose_bits(0o777) == 0o022 and fm.loose_bits(0o755) == 0
    assert fm.without_loose_bits(0o666) == 0o644 and fm.without_loose_bits(0o4777) == 0o4755


def test_current_umask_reads_without_changing_it(umask_000):
    os.umask(0o027)
    assert fm.current_umask() == 0o027
    assert os.umask(0o027) == 0o027


@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_shell_lines_set_the_umask_in_the_same_shell(tmp_path, umask_000, shell):
    """The build's explicit umask, and the launch's ``umask go-w`` from 000 and from 077."""
    script = fm.with_umask(f"echo x >{tmp_path}/built; mkdir {tmp_path}/d")
    subprocess.run([shell, "-c", script], check=True)
    assert _mode(tmp_path / "built") == 0o644 and _mode(tmp_path / "d") == 0o755
    out = subprocess.run([shell, "-c", f"{fm.SHELL_TIGHTEN_UMASK}; umask; umask 077; {fm.SHELL_TIGHTEN_UMASK}; umask"],
                         check=True, capture_output=True, text=True).stdout.split()
    assert out == ["0022", "0077"]


def test_make_dirs_sets_every_new_component_under_umask_000(tmp_path, umask_000):
    leaf = tmp_path / "a" / "b" / "logs"
    assert fm.make_dirs(str(leaf), fm.PRIVATE_DIR_MODE) == str(leaf)
    assert _mode(tmp_path / "a") == 0o755 and _mode(tmp_path / "a" / "b") == 0o755
    assert _mode(leaf) == 0o750


def test_make_dirs_leaves_existing_directories_as_they_are(tmp_path):
    (tmp_path / "shared").mkdir()
    os.chmod(tmp_path / "shared", 0o2775)  # an operator's group directory
    fm.make_dirs(str(tmp_path / "shared"), fm.DIR_MODE)
    assert _mode(tmp_path / "shared") == 0o2775


def test_make_dirs_refuses_a_file_in_the_way(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(OSError):
        fm.make_dirs(str(tmp_path / "f" / "d"), fm.DIR_MODE)


def test_tighten_tree_strips_group_and_world_write_and_follows_no_link(tmp_path):
    root = tmp_path / "t"
    (root / "release" / "deps").mkdir(parents=True)
    (root / "release" / "train").write_text("elf")
    (root / "release" / "deps" / "lib.rlib").write_text("")
    outside = tmp_path / "outside"
    outside.write_text("not ours to change")
    os.chmod(outside, 0o666)
    (root / "release" / "link").symlink_to(outside)
    for path, mode in ((root, 0o777), (root / "release", 0o775), (root / "release" / "deps", 0o757),
                       (root / "release" / "train", 0o777), (root / "release" / "deps" / "lib.rlib", 0o666)):
        os.chmod(path, mode)
    assert fm.tighten_tree(str(root)) == 5
    assert [_mode(p) for p in (root, root / "release", root / "release" / "deps")] == [0o755, 0o755, 0o755]
    assert _mode(root / "release" / "train") == 0o755 and _mode(root / "release" / "deps" / "lib.rlib") == 0o644
    assert _mode(outside) == 0o666
    assert fm.tighten_tree(str(root)) == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another user")
def test_tighten_tree_and_set_exact_mode_skip_another_users_file(tmp_path):
    other = tmp_path / "theirs"
    other.write_text("")
    os.chmod(other, 0o666)
    os.chown(other, 65534, 65534)
    assert fm.tighten_tree(str(tmp_path)) == 0 and _mode(other) == 0o666
    assert fm.set_exact_mode(str(other), 0o755) is False and _mode(other) == 0o666


def test_set_exact_mode(tmp_path):
    binary = tmp_path / "train"
    binary.write_text("elf")
    os.chmod(binary, 0o700)
    assert fm.set_exact_mode(str(binary), fm.BIN_MODE) is True and _mode(binary) == 0o755
    assert fm.set_exact_mode(str(binary), fm.BIN_MODE) is True  # already so
    assert fm.set_exact_mode(str(tmp_path / "gone"), fm.BIN_MODE) is False
    (tmp_path / "link").symlink_to(binary)
    os.chmod(binary, 0o700)
    assert fm.set_exact_mode(str(tmp_path / "link"), fm.BIN_MODE) is False and _mode(binary) == 0o700
