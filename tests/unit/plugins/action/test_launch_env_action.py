"""The launch step's action: what it registers for the launch command is what its size check measured."""
from __future__ import annotations

import json
from unittest.mock import MagicMock

import pytest

from ansible_collections.flodl.cluster.plugins.action import launch_env as action_mod
from ansible_collections.flodl.cluster.plugins.module_utils._launch import launch_size as ls
from ansible_collections.flodl.cluster.plugins.module_utils._core.hexcodec import hex_decode
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import build_context
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.variants import GpuCounts


def _task_vars(workers: int, pad: int) -> dict:
    hostvars = {
        f"w{i}": {"ansible_host": f"10.0.{i // 200}.{i % 200 + 10}", "flodl_host": f"10.1.{i // 200}.{i % 200 + 10}",
                  "flodl_path": "/srv/proj", "flodl_local_devices": [0, 1], "flodl_nccl_socket_ifname": "eth0",
                  **({"flodl_env": {"PAD": "p" * pad}} if i == 0 else {})}
        for i in range(workers)
    }
    return {"groups": {"flodl_workers": list(hostvars)}, "hostvars": hostvars, "flodl_controller_host": "10.0.0.1",
            "flodl_controller_path": "/nonexistent/proj", "flodl_cmd": "train", "flodl_prebuild": False,
            "flodl_testing_cluster": True}


def _action(args: dict):
    task = MagicMock()
    task.args = args
    task.async_val = 0
    task.check_mode = False
    task.diff = False
    act = action_mod.ActionModule(task, MagicMock(), MagicMock(), MagicMock(), None, MagicMock())
    return act


@pytest.fixture()
def measured(monkeypatch):
    """Spies on the one render: every Fitted the action computed."""
    seen: list[ls.Fitted] = []
    real = action_mod.render_checked

    def spy(*a, **kw):
        plan, fitted = real(*a, **kw)
        seen.append(fitted)
        return plan, fitted

    monkeypatch.setattr(action_mod, "render_checked", spy)
    monkeypatch.setattr(action_mod, "read_run", lambda _a, tv, phases: build_context(tv, None, phases))
    monkeypatch.setattr(action_mod.launch_io, "local_gpu_counts", lambda: GpuCounts(1, 0))
    monkeypatch.setenv("FLODL_HOST_NAME", "ctl")
    monkeypatch.setenv("USER", "alice")
    for name in ("FLODL_INTERNAL_CLUSTER_JSON", "FLODL_INTERNAL_AGENT_JSON"):
        monkeypatch.delenv(name, raising=False)
    return seen


@pytest.mark.parametrize("workers, compact", [(4, False), (260, True)])
def test_the_env_registered_for_the_launch_is_the_env_measured(measured, workers, compact):
    result = _action({"show_plan": False}).run(task_vars=_task_vars(workers, 100))
    assert not result.get("failed"), result.get("msg")
    [fitted] = measured
    assert result["env"] == fitted.env  # what run_launcher receives (flodl_launch_env.env)
    assert {k: ls.entry_bytes(k, v) for k, v in result["env"].items()} == fitted.sizes
    for name in (ls.FULL_CLUSTER_JSON, ls.TESTING_CLUSTER_JSON):
        text = hex_decode(result["env"][name]).decode()
        assert (name in fitted.compacted) is compact and text.startswith("{\n") is not compact
        assert fitted.sizes[name] <= ls.MAX_ARG_STRLEN
        json.loads(text)
    assert any(ls.FULL_CLUSTER_JSON in w and "compact JSON" in w for w in result["launch_warnings"]) is compact


def test_an_environment_that_would_not_fit_refuses_the_run_and_registers_nothing_to_run(measured):
    result = _action({"show_plan": False}).run(task_vars=_task_vars(4, 130_000))
    assert result["refused"] is True and "env" not in result and "command" not in result
    assert result["msg"].startswith("the launch environment would not fit; nothing was started")
    assert f"variable {ls.FULL_CLUSTER_JSON} is too long even as compact JSON" in result["msg"]


# --------------------------------------------------------------------------- this box's GPU count, for the testing JSON


def _counting(monkeypatch) -> list[int]:
    calls: list[int] = []

    def count():
        calls.append(1)
        return GpuCounts(3, 0)

    monkeypatch.setattr(action_mod.launch_io, "local_gpu_counts", count)
    return calls


def _testing_workers(result) -> list:
    return json.loads(hex_decode(result["env"][ls.TESTING_CLUSTER_JSON]).decode())["workers"]


def test_without_an_all_worker_the_count_script_does_not_run(measured, monkeypatch):
    calls = _counting(monkeypatch)
    result = _action({"show_plan": False}).run(task_vars=_task_vars(4, 10))
    assert not result.get("failed"), result.get("msg")
    assert calls == [] and ls.TESTING_CLUSTER_JSON in result["env"]


def test_the_controllers_own_all_worker_is_counted_once_for_both_jsons(measured, monkeypatch):
    calls = _counting(monkeypatch)
    tv = _task_vars(2, 10)
    tv["hostvars"]["w0"].update(flodl_host="ctl", flodl_local_devices="all")  # FLODL_HOST_NAME=ctl: this box
    result = _action({"show_plan": False}).run(task_vars=tv)
    assert not result.get("failed"), result.get("msg")
    assert calls == [1]
    assert result["gpu_counts"]["ctl"] == {"nvidia": 3, "amd": 0}
    assert len(_testing_workers(result)[0]["local_devices"]) == 3


def test_a_remote_all_worker_takes_this_boxs_count_in_the_testing_json(measured, monkeypatch):
    calls = _counting(monkeypatch)
    tv = _task_vars(2, 10)
    tv["hostvars"]["w1"]["flodl_local_devices"] = "all"
    tv["flodl_preflight_run"] = {"hosts": {"10.1.0.11": {"gpus": {"nvidia": 2, "amd": 0}}}}
    result = _action({"show_plan": False}).run(task_vars=tv)
    assert not result.get("failed"), result.get("msg")
    assert calls == [1]  # its own count came from preflight; the testing JSON counts here, as fdl-cli does
    assert result["gpu_counts"]["10.1.0.11"] == {"nvidia": 2, "amd": 0}
    assert len(_testing_workers(result)[1]["local_devices"]) == 3
