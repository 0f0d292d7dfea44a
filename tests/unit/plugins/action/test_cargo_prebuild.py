"""flodl.cluster.cargo_prebuild: refusals and the disabled prebuild reach no build host; check mode plans."""
from __future__ import annotations

import importlib

import pytest
from ansible.plugins.action import ActionBase

ACTION = "cargo_prebuild"


@pytest.fixture
def no_module(monkeypatch):
    """Ansible's module transport, the only way to the build host: a refusal must not get there."""
    calls = []
    monkeypatch.setattr(ActionBase, "_execute_module", lambda self, **kw: calls.append(kw) or {"failed": True})
    return calls


def test_recorded_case(recorded, run, expect, no_processes, no_module):
    expect(run(recorded), recorded.expected)
    assert no_processes == [] and no_module == []  # check mode plans in-process on a local build host


def test_check_mode_plans_one_build_per_variant_with_its_toolkit(case, run, no_processes, no_module, tmp_path):
    builds = {b["host"]: b for b in run(case("check_mode"))["builds"]}
    assert builds["gpu-c"]["command"] == "cargo build --release --features cuda --bin train"
    assert builds["gpu-c"]["env"]["CUDA_VERSION"] == "12.8.0" and builds["gpu-c"]["env"]["CUDA_TAG"] == "12.8"
    assert builds["gpu-b"]["features"] == "rocm" and "CUDA_VERSION" not in builds["gpu-b"]["env"]
    assert builds["gpu-b"]["target_dir"] == f"{tmp_path}/target/cluster/gpu-b/precompiled-rocm70"
    assert not (tmp_path / "target").exists()  # check mode writes nothing


def test_a_hand_written_call_goes_to_the_module_as_given(case, run, no_module):
    loaded = case("disabled")
    loaded.args = {"workers": [], "project_root": "/p", "cmd": "train"}
    run(loaded)
    assert no_module[0]["module_args"] == loaded.args


def test_a_refusal_fails_every_worker_and_not_the_step(case, run, no_processes, no_module):
    # The step runs once, delegated from the first worker: failing it charged that worker alone.
    result = run(case("refused"))
    assert not result.get("failed") and result["refused"] is True, result
    assert {h: e["status"] for h, e in result["per_host"].items()} == dict.fromkeys(["ctl", "gpu-b", "gpu-c"], "failed")
    assert "flodl_prebuild_dedupe must be true or false" in result["per_host"]["gpu-b"]["msg"]


def test_a_prebuild_that_failed_as_a_whole_fails_every_worker(case, run, no_processes, monkeypatch):
    # The module failed before any build (no failed host of its own): every worker's report carries it.
    action = importlib.import_module(f"ansible_collections.flodl.cluster.plugins.action.{ACTION}")
    monkeypatch.setattr(action.ActionModule, "_build", lambda self, args, tv: {"failed": True, "msg": "a link out"})
    loaded = case("check_mode")
    loaded.check_mode = False
    result = run(loaded)
    assert result["failed"] is False and result["builds_failed"] is True, result
    assert {e["status"] for e in result["per_host"].values()} == {"failed"}
    assert result["per_host"]["gpu-b"]["msg"].startswith("the prebuild failed as a whole: a link out")
