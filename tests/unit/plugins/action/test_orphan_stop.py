"""flodl.cluster.orphan_cleanup for real: leftover ranks stopped by their binary's path, through the stand-in ssh.

A "rank" is a copy of ``sleep`` at the path the envelope names for gpu-b, started here and stopped by
its pid if the test fails; gpu-c's binary runs nowhere. Both workers' ssh runs the teardown script here.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import orphans

from .conftest import make_action

ACTION = "orphan_cleanup"


@pytest.fixture
def rank(tmp_path):
    binary = tmp_path / "gpu-b/target/cluster/gpu-b/precompiled-rocm70/release/train"
    binary.parent.mkdir(parents=True)
    shutil.copy("/bin/sleep", binary)
    proc = subprocess.Popen([str(binary), "30"])
    yield proc
    proc.kill()
    proc.wait()


def cleanup_case(case, tmp_path: Path) -> object:
    loaded = case("check_mode")
    loaded.check_mode = False
    loaded.args = {"prebuild_envelope": json.dumps({
        "gpu-b": {"bin": f"{tmp_path}/gpu-b/target/cluster/gpu-b/precompiled-rocm70/release/train", "ld_library_path": "/x"},
        "gpu-c": {"bin": f"{tmp_path}/gpu-c/train", "ld_library_path": "/y"},
    }), "stop_launcher": False, "timeout": 10}
    return loaded


def test_the_ranks_left_on_a_worker_are_stopped_and_the_other_has_nothing_running(case, run, tmp_path, rank, ssh_log):
    out = run(cleanup_case(case, tmp_path))
    gpu_b, gpu_c = out["per_host"]["gpu-b"], out["per_host"]["gpu-c"]
    assert gpu_b["status"] == "changed" and gpu_b["data"]["found"] == 1 and gpu_b["data"]["left"] == 0
    assert rank.wait(timeout=5) == -15  # TERM first
    assert gpu_c == {"status": "ok", "msg": f"nothing of {tmp_path}/gpu-c/train was running",
                     "data": {"bin": f"{tmp_path}/gpu-c/train", "found": 0, "left": 0}}
    assert out["changed"] is True and out["msg"] == "orphan cleanup ran on 2 host(s), 0 warning(s)"
    assert out["per_host"]["ctl"]["status"] == "skipped"
    calls = ssh_log.read_text(encoding="utf-8")
    assert "-l alice -- 192.0.2.12 " in calls and " -p 2222 " in calls  # as Ansible reaches each


def test_an_unreachable_worker_and_one_without_pkill_are_warnings_naming_them(case, run, tmp_path, ssh_log, monkeypatch):
    monkeypatch.setenv("FAKE_SSH_DOWN", "192.0.2.12")
    monkeypatch.setenv("FAKE_SSH_NOPKILL", "192.0.2.13")
    out = run(cleanup_case(case, tmp_path))
    gpu_b, gpu_c = out["per_host"]["gpu-b"], out["per_host"]["gpu-c"]
    assert gpu_b["status"] == "unreachable"
    assert gpu_b["msg"].startswith("host gpu-b: cleanup could not run (ssh exited 255: ssh: connect to host 192.0.2.12")
    assert gpu_c["status"] == "ok" and gpu_c["data"]["pkill"] == "absent"
    assert "host gpu-c: pkill is not installed" in gpu_c["msg"] and "install procps" in gpu_c["msg"]
    assert out["changed"] is False and out["msg"] == "orphan cleanup ran on 2 host(s), 2 warning(s)"


def test_after_an_interrupt_the_launch_step_runs_the_cleanup_and_sums_up(case, tmp_path, ssh_log, monkeypatch):
    monkeypatch.setenv("FAKE_SSH_DOWN", "192.0.2.13")
    loaded = cleanup_case(case, tmp_path)
    loaded.task_vars["flodl_prebuild_run"] = {"envelope": json.loads(loaded.args["prebuild_envelope"])}
    shown: list[str] = []
    warned: list[str] = []
    summary = orphans.after_interrupt(make_action(ACTION, loaded), loaded.task_vars, 10.0, shown.append, warned.append)
    assert summary == "ran on 2 host(s), 1 warning(s)" and len(warned) == 1 and warned[0].startswith("host gpu-c: ")
    assert shown[0].startswith("flodl launch: orphan cleanup after the interrupt:")
    assert f"gpu-b: ok — nothing of {tmp_path}/gpu-b/" in shown[0] and "gpu-c: unreachable — host gpu-c" in shown[0]


def test_the_cleanup_plan_and_the_watchers_argvs_name_every_target(case, tmp_path, ssh_log):
    loaded = cleanup_case(case, tmp_path)
    loaded.task_vars["flodl_prebuild_run"] = {"envelope": json.loads(loaded.args["prebuild_envelope"])}
    action = make_action(ACTION, loaded)
    argvs = orphans.watcher_cleanup_argvs(action, loaded.task_vars)
    assert len(argvs) == 2 and all(a[0] == "ssh" for a in argvs)
    by_target = {a[-2]: a for a in argvs}  # "--", the target, the script
    assert sorted(by_target) == ["192.0.2.12", "192.0.2.13"]
    assert "gpu-c/train" in by_target["192.0.2.13"][-1] and "gpu-b/" in by_target["192.0.2.12"][-1]
    assert "alice" in by_target["192.0.2.12"]
    plan = orphans.launch_host_plan(action, loaded.task_vars, "alice")
    assert "gpu-c/train" in plan and "192.0.2.13" in plan
    assert not ssh_log.exists()  # computed, nothing run


def test_a_run_that_cannot_be_read_leaves_the_watcher_without_cleanup_and_the_interrupt_told(case):
    loaded = case("refused")
    action = make_action(ACTION, loaded)
    assert orphans.watcher_cleanup_argvs(action, loaded.task_vars) == []
    summary = orphans.after_interrupt(action, loaded.task_vars, 1.0, print, print)
    assert summary.startswith("could not run (TopologyError") and summary.endswith("run flodl.cluster.teardown")
