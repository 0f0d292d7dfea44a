"""The CPU arch part: one script section and one parser for the workers, the build host and the controller."""
from __future__ import annotations

import os
import subprocess

from ansible_collections.flodl.cluster.plugins.module_utils._probe import abi
from ansible_collections.flodl.cluster.plugins.module_utils._probe import free_space as fs
from ansible_collections.flodl.cluster.plugins.module_utils._probe import preflight_probe as pf
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import Armed, Ask


def _sh(script: str) -> str:
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=10, check=True).stdout


def test_the_arch_part_alone_is_read_back_by_the_shared_parser() -> None:
    said = pf.parse_probe("a login banner\n" + _sh(pf.probe_script(Ask(arch=True))))
    assert said.uname == os.uname().machine and said.complete
    assert said.answers == {} and said.ldd is None  # only what was asked


def test_the_build_hosts_arch_and_free_space_share_one_round_trip(tmp_path) -> None:
    paths = (str(tmp_path / "target" / "cluster"), str(tmp_path))
    said = pf.parse_probe(_sh(pf.probe_script(Ask(arch=True), (Armed(fs.CHECK, 1.0),), paths)))
    assert said.uname == os.uname().machine
    free = said.answers["free_space"]
    assert free.path == str(tmp_path) and (free.kb or 0) > 0


def test_the_workers_abi_section_starts_with_the_same_part() -> None:
    assert pf.probe_script(Ask(prebuilt=True)).startswith(abi.ARCH_PART + ";")
    said = pf.parse_probe(_sh(pf.probe_script(Ask(data_path="/", prebuilt=True))))
    assert said.uname == os.uname().machine and said.pkill in ("present", "absent")
