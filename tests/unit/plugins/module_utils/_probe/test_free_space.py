"""flodl_preflight_min_free_gb: the df part every host runs, its parser, and the finding (issue 36's worked example)."""
from __future__ import annotations

import subprocess

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.model import cluster_model
from ansible_collections.flodl.cluster.plugins.module_utils._preflight import preflight_verdict as pv
from ansible_collections.flodl.cluster.plugins.module_utils._probe import check_registry as reg
from ansible_collections.flodl.cluster.plugins.module_utils._probe import data_path as dp
from ansible_collections.flodl.cluster.plugins.module_utils._probe import free_space as fs
from ansible_collections.flodl.cluster.plugins.module_utils._probe import launch_host as lh
from ansible_collections.flodl.cluster.plugins.module_utils._probe import preflight_probe as pp
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import (
    DATA_PATH, ERROR, TARGET_DIR, WARNING, Armed, Ask)
from ansible_collections.flodl.cluster.plugins.module_utils._run.knobs import knob_problems
from ansible_collections.flodl.cluster.plugins.module_utils._run.run_model import RunSettings

GB = fs.KB_PER_GB


def _sh(script: str) -> str:
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True, timeout=30).stdout


def _armed(gb: float) -> tuple[Armed, ...]:
    return (Armed(fs.CHECK, gb),)


def test_it_is_one_registered_check_armed_by_its_knob_at_both_places() -> None:
    assert fs.CHECK in reg.CHECKS
    settings = RunSettings(preflight_numbers=(("flodl_preflight_min_free_gb", 2.5),))
    assert reg.armed(settings, DATA_PATH) == _armed(2.5) == reg.armed(settings, TARGET_DIR)
    for off in (RunSettings(), RunSettings(preflight_numbers=(("flodl_preflight_min_free_gb", 0.0),))):
        assert reg.armed(off, DATA_PATH) == ()


def test_the_part_measures_the_first_directory_that_exists(tmp_path) -> None:
    there = tmp_path / "a b"  # a space: the path is quoted, and kept whole by the parser
    there.mkdir()
    out = pp.parse_probe(_sh(fs.free_space_script((str(tmp_path / "gone"), str(there), "/"))))
    free = out.answers["free_space"]
    assert free.path == str(there) and free.kb is not None and free.kb > 0


def test_nothing_to_measure_says_so_and_is_no_finding(tmp_path) -> None:
    out = pp.parse_probe(_sh(fs.free_space_script((str(tmp_path / "gone"),))))
    assert out.answers["free_space"] == fs.FreeSpace(None, "")
    assert fs.check_free_space("h1", out.answers["free_space"], 5.0) is None  # the missing data path: its own finding


def test_the_probe_asks_only_when_armed() -> None:
    assert fs.MARK_FREE not in pp.probe_script(Ask(data_path="/data", prebuilt=True, gpus=True))
    script = pp.probe_script(Ask(data_path="/data"), _armed(1))
    assert fs.free_space_script(("/data",)) in script
    assert fs.MARK_FREE not in lh.session_script("/p", data_path="/data", reach=None, gpus=False, run_id=None)
    assert fs.free_space_script(("/data",)) in lh.session_script("/p", data_path="/data", reach=None, gpus=False,
                                                                 run_id=None, checks=_armed(1))


@pytest.mark.parametrize("line, expect", [
    ("__FLODL_FREE_KB__=1048576 /data", fs.FreeSpace(1048576, "/data")),
    ("__FLODL_FREE_KB__= /data", fs.FreeSpace(None, "/data")),  # df printed no number
    ("__FLODL_FREE_KB__=", fs.FreeSpace(None, "")),
    ("__FLODL_FREE_KB__=12x /d", fs.FreeSpace(None, "/d")),
])
def test_the_parser(line: str, expect: fs.FreeSpace) -> None:
    assert pp.parse_probe(f"noise\n{line}\n{pp.MARK_END}\n").answers["free_space"] == expect
    assert lh.parse_session(f"{line}\n{lh.MARK_END}\n").answers["free_space"] == expect


def test_below_the_minimum_fails_naming_host_path_free_space_and_fix() -> None:
    found = fs.check_free_space("h2", fs.FreeSpace(GB // 2, "/mnt/data"), 20.0)
    assert found is not None and found.level == ERROR
    assert found.message.startswith("h2: only 0.50 GB free on the data path /mnt/data, below "
                                    "flodl_preflight_min_free_gb (20 GB); training writes its checkpoints")
    assert "Fix: free space there" in found.message
    target = fs.check_free_space("build host b1", fs.FreeSpace(GB, "/p/target"), 8, TARGET_DIR)
    assert target is not None and "the build's target dir /p/target" in target.message and "cargo clean" in target.message


def test_enough_or_unchecked_is_no_finding_and_unreadable_warns() -> None:
    assert fs.check_free_space("h1", fs.FreeSpace(20 * GB, "/d"), 20.0) is None
    assert fs.check_free_space("h1", fs.FreeSpace(1, "/d"), 0.0) is None
    assert fs.check_free_space("h1", None, 1.0) is None
    warned = fs.check_free_space("h1", fs.FreeSpace(None, "/d"), 1.0)
    assert warned is not None and warned.level == WARNING and "df -Pk" in warned.message


H2 = cluster_model({"controller": {"host": "c", "path": "/p"},
                    "workers": [{"host": "h2", "path": "/p", "local_devices": [0]}]}).workers[0]


def test_a_worker_verdict_fails_on_its_free_space_and_reports_it() -> None:
    stdout = (f"{dp.MARK_DIR}=1\n{dp.MARK_READ}=1\n{fs.MARK_FREE}={GB // 4} /tmp/small\n{pp.MARK_END}\n")
    report = pv.evaluate_remote(H2, data_path="/tmp/small", declared=True, prebuild=False,
                                build_arch=None, returncode=0, stdout=stdout, checks=_armed(1.0))
    assert report["status"] == pv.STATUS_ERROR and report["data_path"]["free_gb"] == 0.25
    assert report["errors"][0].startswith("h2: only 0.25 GB free on the data path /tmp/small")
    ok = pv.evaluate_remote(H2, data_path="/tmp/small", declared=True, prebuild=False,
                            build_arch=None, returncode=0, stdout=stdout, checks=_armed(0.2))
    assert ok["status"] == pv.STATUS_OK and not ok["errors"]


def test_the_controller_report_uses_the_same_check() -> None:
    report = pv.controller_report("vm", "/data", True, True, True, {"free_space": fs.FreeSpace(GB, "/data")},
                                  _armed(2.0))
    assert report["status"] == pv.STATUS_ERROR and report["errors"][0].startswith("vm: only 1.00 GB free")
    assert report["data_path"]["free_gb"] == 1.0


@pytest.mark.parametrize("value, refused", [("20", False), ("0", False), ("", False), (0.5, False),
                                            ("-1", True), ("lots", True), ("inf", True)])
def test_the_knob_is_checked_with_the_run(value, refused: bool) -> None:
    problems = knob_problems({"flodl_preflight_min_free_gb": value}, ["preflight"], prebuild=True)
    assert bool(problems) is refused
    if refused:
        assert "flodl_preflight_min_free_gb must be a number of GB" in problems[0]
