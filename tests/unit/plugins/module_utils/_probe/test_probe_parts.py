# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The registry's probe parts: each defined once (mark, sh part, parser), read by the one parser of every probe."""
from __future__ import annotations

import subprocess

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._probe import check_registry as reg
from ansible_collections.flodl.cluster.plugins.module_utils._probe import preflight_probe as pp
from ansible_collections.flodl.cluster.plugins.module_utils._probe import abi, gpu_count, pkill, project_checkout
from ansible_collections.flodl.cluster.plugins.module_utils._preflight import preflight_verdict as pf_verdict
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import Ask


def _sh(script: str) -> str:
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True, timeout=30).stdout


def test_every_part_has_its_own_mark_and_a_field_of_the_probe_output() -> None:
    marks = [part.mark for part in reg.PARTS]
    assert len(set(marks)) == len(marks) and all(m.startswith(pp.SENTINEL_PREFIX) for m in marks)
    fields = set(vars(pp.ProbeOutput()))
    assert all(part.name in fields for part in reg.PARTS)


def test_the_worker_probe_runs_the_registry_parts_unchanged() -> None:
    # The probe's bytes are in each worker's report (probe_command): the parts moved, their text did not.
    assert pkill.pkill_part() == ("echo __FLODL_PKILL__; command -v pkill >/dev/null 2>&1 && echo present "
                                  "|| echo absent")
    assert ("echo __FLODL_ABI__; uname -m; echo __FLODL_LDD__; ldd --version 2>&1 | head -1; "
            "echo __FLODL_PKILL__; command -v pkill >/dev/null 2>&1 && echo present || echo absent; ") in \
        pp.probe_script(Ask(data_path="/d", prebuilt=True))
    assert gpu_count.gpu_part() == "echo __FLODL_GPUS__; " + gpu_count.GPU_COUNT_SCRIPT
    assert pp.probe_script(Ask(arch=True)) == "echo __FLODL_ABI__; uname -m; echo __FLODL_END__"
    script = pp.probe_script(Ask(data_path="/d", project="/p q"))
    assert project_checkout.project_script("/p q") in script
    assert "if [ -d '/p q' ]; then if [ -x '/p q' ]; then echo __FLODL_PROJECT__=1;" in script


def test_the_parts_answers_are_read_by_their_own_parsers(tmp_path) -> None:
    said = pp.parse_probe(_sh(pp.probe_script(Ask(data_path=str(tmp_path), prebuilt=True, project=str(tmp_path)))))
    assert said.project == "1" and said.pkill in ("present", "absent") and said.complete
    gone = pp.parse_probe(_sh(pp.probe_script(Ask(data_path=str(tmp_path), project=str(tmp_path / "x")))))
    assert gone.project == "0" and gone.pkill is None  # only what was asked
    noisy = pp.parse_probe("__FLODL_PKILL__\n\n  absent \n__FLODL_PROJECT__= 2 \n__FLODL_END__\n")
    assert (noisy.pkill, noisy.project) == ("absent", "2")
    abi_said = pp.parse_probe("__FLODL_ABI__\n\n aarch64 \n__FLODL_LDD__\n__FLODL_GPUS__\nnoise\n2 1\r\n__FLODL_END__")
    assert (abi_said.uname, abi_said.ldd, abi_said.pkill) == ("aarch64", "", None)  # an empty section: ""
    assert abi_said.gpus == "noise\n2 1" and gpu_count.parse_gpu_counts(abi_said.gpus) == (2, 1)


def test_the_data_path_script_is_two_parts_each_read_by_its_mark() -> None:
    said = pp.parse_probe("__FLODL_DP_DIR__= 1 \n__FLODL_DP_READ__=x\n__FLODL_END__\n")
    assert (said.dir_ok, said.read_ok) == (True, None)  # anything but 1 or 0 is no answer
    assert pp.probe_script(Ask(data_path="/d")).startswith(
        "if [ -d /d ]; then echo __FLODL_DP_DIR__=1; else echo __FLODL_DP_DIR__=0; fi; "
        "if [ -r /d ]; then echo __FLODL_DP_READ__=1; else echo __FLODL_DP_READ__=0; fi; ")


def test_the_section_parts_end_at_any_other_mark() -> None:
    said = pp.parse_probe("__FLODL_GPUS__\n0 0\n__FLODL_LH_END__\nshell noise\n")
    assert said.gpus == "0 0" and not said.complete
    # A one-line part's mark ends a section too (the live ranks and the threshold checks follow the sections).
    after = pp.parse_probe("__FLODL_GPUS__\n2 0\n__FLODL_RUNNING__=3\nnoise\n__FLODL_END__\n")
    assert (after.gpus, after.running, after.complete) == ("2 0", 3, True)


# Which field of an Ask turns each part on: the one place a host's parts are chosen.
ASKED = [
    (Ask(), []),
    (Ask(data_path="/d"), ["dir_ok", "read_ok"]),
    (Ask(project="/p"), ["project"]),
    (Ask(arch=True), ["uname"]),
    (Ask(prebuilt=True), ["uname", "ldd", "pkill"]),
    (Ask(arch=True, prebuilt=True), ["uname", "ldd", "pkill"]),
    (Ask(gpus=True), ["gpus"]),
    (Ask(running="/p/target/cluster/h1/cu128/release/train"), ["running"]),
]


@pytest.mark.parametrize(("ask", "names"), ASKED)
def test_each_part_is_turned_on_by_its_own_field_of_the_ask(ask: Ask, names: list[str]) -> None:
    assert [part.name for part in reg.PARTS if part.asked(ask) is not None] == names
    assert reg.scripts(ask) == [script for script in (part.asked(ask) for part in reg.PARTS) if script is not None]


def test_a_launch_that_follows_counts_the_live_ranks_inside_the_probe(tmp_path) -> None:
    binary = str(tmp_path / "release" / "train")
    script = pp.probe_script(Ask(data_path=str(tmp_path), gpus=True, running=binary))
    assert script.index("__FLODL_GPUS__") < script.index("__FLODL_RUNNING__") < script.index("__FLODL_END__")
    said = pp.parse_probe(_sh(script))
    assert said.running == 0 and said.complete and said.dir_ok is True
    with pytest.raises(ValueError):
        pp.probe_script(Ask(running="relative/train"))  # the part's own refusal: never a pattern of a relative path


def test_the_judges_live_with_their_parts_and_the_verdict_calls_them() -> None:
    assert pf_verdict.check_pkill is pkill.check_pkill
    assert pf_verdict.check_project_path is project_checkout.check_project_path and pf_verdict.check_abi is abi.check_abi
    finding = pkill.check_pkill("h1", "absent")
    assert finding is not None and finding.check == "pkill" and finding.message.startswith("h1: pkill is not")
