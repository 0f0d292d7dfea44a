"""flodl.cluster.cargo_prebuild: refusals and the disabled prebuild reach no build host; check mode plans."""
from __future__ import annotations

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
