"""The live-rank probe part (module_utils._probe.live_ranks), its script run for real."""
from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._probe import check_registry, live_ranks
from ansible_collections.flodl.cluster.plugins.module_utils._probe.preflight_probe import parse_probe


def test_the_count_is_read_by_the_one_probe_parser():
    assert parse_probe("noise\n__FLODL_RUNNING__=3\n").running == 3
    assert parse_probe("__FLODL_RUNNING__=x\n").running is None
    assert parse_probe("").running is None
    # After an end mark too: the parse reads every mark line wherever it stands (a launch that follows preflight
    # now asks for the part inside the worker's probe, before its end mark).
    assert parse_probe("__FLODL_END__\n__FLODL_RUNNING__=0\n").running == 0
    assert live_ranks.PART in check_registry.PARTS


@pytest.mark.parametrize("bad", ["relative/train", "/a\nb", "/a\0b"])
def test_running_script_refuses_unsafe_paths(bad):
    with pytest.raises(ValueError):
        live_ranks.running_script(bad)


def _count(binary: str) -> int | None:
    proc = subprocess.run(["sh", "-c", live_ranks.running_script(binary)], capture_output=True, text=True, timeout=30,
                          check=False)
    return parse_probe(proc.stdout).running


@pytest.fixture
def fake_rank(tmp_path):
    """A copy of sleep at a path with a quote, a space and awk/glob metacharacters in it."""
    directory = tmp_path / "it's a \"proj\" [x]*$HOME"
    directory.mkdir()
    binary = directory / "train"
    shutil.copy(shutil.which("sleep"), binary)
    procs = [subprocess.Popen([str(binary), "30"]) for unused in range(2)]
    time.sleep(0.2)
    yield str(binary), procs
    for p in procs:
        p.kill()
        p.wait()


def test_running_script_counts_processes_of_that_binary(fake_rank):
    binary, procs = fake_rank
    assert _count(binary) == 2
    # A prefix of the path, or a sibling, is another binary.
    assert _count(binary[:-1]) == 0
    assert _count(binary + "2") == 0
    procs[0].kill()
    procs[0].wait()
    assert _count(binary) == 1


def test_running_script_sees_a_binary_replaced_on_disk(fake_rank):
    binary, dummy = fake_rank
    os.unlink(binary)
    assert _count(binary) == 2


def test_running_script_ignores_its_own_command_line(tmp_path):
    # The probe's argv holds the path; only real executables count.
    assert _count(str(tmp_path / "train")) == 0
