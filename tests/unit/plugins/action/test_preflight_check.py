"""flodl.cluster.preflight_check: the refusals before contact, and a play on the controller's own box.

The probe over ssh is the integration tests'.
"""
from __future__ import annotations

import importlib

import pytest
import yaml

from .conftest import load_case, run_case

ACTION = "preflight_check"
# Every action result may hold these (Ansible's own).
COMMON = {"changed", "failed", "msg", "skipped"}


def test_recorded_case(recorded, run, expect, no_ssh):
    expect(run(recorded), recorded.expected)
    assert [argv for argv in no_ssh if "ssh" in str(argv)] == []


@pytest.mark.parametrize("name", ["refused_one_worker", "refused_run", "check_mode_refused"])
def test_a_refusal_starts_no_process(case, run, name, no_processes):
    assert run(case(name))["refused"] is True
    assert no_processes == []  # no probe, no ssh, not even a local check


def test_the_controllers_own_box_is_checked_without_ssh(case, run, no_ssh, tmp_path):
    result = run(case("controller_only"))
    entry = result["per_host"]["ctl"]
    # The inventory host's entry names its logical host's report, which the result holds once.
    assert entry == {"status": "ok", "msg": "preflight passed", "host": "gpu-a"}
    report = result["hosts"]["gpu-a"]
    assert report["data_path"] == {"path": str(tmp_path), "declared": True, "state": "ok"}
    assert report["controller"] is True


@pytest.mark.parametrize("given, timeout, parallel", [({}, 30.0, 64), (
    {"flodl_preflight_timeout": "7", "flodl_preflight_max_parallel": 3}, 7.0, 3)])
def test_the_sweep_gets_the_runs_timeout_and_parallelism(case, run, no_ssh, monkeypatch, given, timeout, parallel):
    """One source for each: the variables as the run read them; the step has no option of its own for them."""
    preflight = importlib.import_module("ansible_collections.flodl.cluster.plugins.action.preflight_check")
    seen = {}
    real = preflight.sweep.sweep

    def sweep(ctx, **kwargs):
        seen.update(timeout=kwargs["timeout"], max_parallel=kwargs["max_parallel"])
        return real(ctx, **kwargs)

    monkeypatch.setattr(preflight.sweep, "sweep", sweep)
    loaded = case("controller_only")
    loaded.task_vars = dict(loaded.task_vars, **given)
    assert run(loaded)["per_host"]["ctl"]["status"] == "ok"
    assert seen == {"timeout": timeout, "max_parallel": parallel}


def test_the_job_artifact_is_the_result_without_the_run_model(case, run, no_ssh):
    result = run(case("controller_only"))
    artifact = result["ansible_stats"]["data"]["flodl_preflight"]
    assert "run_model" in result and "run_model" not in artifact
    assert {k: v for k, v in result.items() if k not in ("run_model", "ansible_stats")} == artifact


@pytest.mark.parametrize("name", ["controller_only", "refused_one_worker", "refused_run"])
def test_every_key_of_the_result_is_documented(case, run, name, no_ssh):
    stub = importlib.import_module("ansible_collections.flodl.cluster.plugins.modules.preflight_check")
    documented = set(yaml.safe_load(stub.RETURN)) | COMMON
    assert set(run(case(name))) <= documented


def test_each_worker_reports_its_own_refusal(case, run, no_processes):
    per_host = run(case("refused_one_worker"))["per_host"]
    assert per_host["gpu-c"]["status"] == "failed"
    assert "host gpu-c (worker 2): flodl_local_devices" in per_host["gpu-c"]["msg"]
    assert {per_host[h]["status"] for h in ("ctl", "gpu-b")} == {"skipped"}
    assert "refused for the variables of gpu-c" in per_host["gpu-b"]["msg"]


def test_a_run_level_problem_fails_every_worker_and_not_the_step(case, run, no_processes):
    # The step runs on one worker: failing it charged that worker alone, and the play stopped before the others
    # reported (one host in PLAY RECAP). Every worker's own report fails instead.
    result = run(case("refused_run"))
    assert not result.get("failed") and result["refused"] is True
    assert sorted(result["per_host"]) == ["ctl", "gpu-b", "gpu-c"]
    for found in result["per_host"].values():
        assert found["status"] == "failed" and "controller: flodl_cmd is required" in found["msg"], found
        assert found["msg"].startswith("refused before contact (no host was contacted): ")


def test_a_run_level_problem_with_no_worker_fails_the_step(case, run, no_processes):
    # An empty worker group (the gang playbooks' play on localhost): nobody else can carry the failure.
    loaded = case("refused_run")
    loaded.task_vars = dict(loaded.task_vars, groups={"all": ["localhost"], "flodl_workers": []},
                            ansible_play_hosts_all=["localhost"])
    result = run(loaded)
    assert result["failed"] is True and "per_host" not in result
    assert "no host was contacted" in result["msg"]


@pytest.mark.parametrize("answer,fails", [("true", True), (True, True), ("false", False), ("", False), (None, False)])
def test_require_all_fails_an_unreachable_worker_with_its_own_message(answer, fails, ssh_log, monkeypatch, tmp_path):
    """issue 38: 30 of 60 workers unreachable ended a standalone preflight with rc 0, nothing flagged."""
    loaded = load_case("topology", "three_workers", tmp_path)
    for host in loaded.task_vars["hostvars"].values():
        host["flodl_path"] = str(tmp_path)  # the stand-in ssh runs the probe here
    loaded.task_vars["hostvars"]["gpu-b"]["flodl_local_devices"] = [0]  # this machine has no GPU
    if answer is not None:  # a survey answer is a string, blank when unanswered
        loaded.task_vars["flodl_preflight_require_all"] = answer
    loaded.task_vars["flodl_preflight_timeout"] = 20
    loaded.args = {"phases": ["preflight"]}
    monkeypatch.setenv("FAKE_SSH_DOWN", "192.0.2.13")  # gpu-c
    result = run_case(ACTION, loaded)
    assert result["per_host"]["gpu-b"]["status"] == "ok", result["per_host"]
    entry = result["per_host"]["gpu-c"]
    if fails:
        assert entry["status"] == "failed" and result["failed_hosts"] == ["gpu-c"], entry
        assert entry["msg"].startswith("gpu-c: preflight probe could not run (ssh failed: ssh: connect to host "
                                       "192.0.2.13: No route to host)")
        assert "flodl_preflight_require_all is true" in entry["msg"]
        assert "set flodl_preflight_require_all: false" in entry["msg"]
    else:
        assert entry["status"] == "unreachable" and result["failed_hosts"] == [], entry
