"""flodl.cluster.topology: the validated run, before any host is contacted."""
from __future__ import annotations

import os

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._run import runlock

ACTION = "topology"


def test_recorded_case(recorded, run, expect, no_processes):
    expect(run(recorded), recorded.expected)
    assert no_processes == []  # FLODL_HOST_NAME names the controller: not even `hostname` runs


def test_the_join_token_never_reaches_the_result(case, run, no_processes):
    loaded = case("three_workers")
    loaded.task_vars["flodl_controller_join"] = {"token": "s3cret-session-salt"}
    result = run(loaded)
    assert "failed" not in result
    assert "s3cret-session-salt" not in str(result)
    assert result["cluster"]["controller"]["join"]["token"] != "s3cret-session-salt"


def test_an_unknown_phase_is_refused_by_the_argument_spec(case, run):
    loaded = case("three_workers")
    loaded.args["phases"] = ["deploy"]
    with pytest.raises(Exception, match="deploy"):
        run(loaded)


def test_a_live_run_holding_the_lock_refuses_the_run_and_its_lock_stays_that_runs(case, run, no_processes, tmp_path,
                                                                                  monkeypatch, leases):
    loaded = case("three_workers")
    loaded.task_vars["flodl_project_dir"] = str(tmp_path)
    loaded.args = {"phases": ["launch"], "lock": True}
    first = run(loaded)
    assert "refused" not in first and not first.get("failed"), first
    held = (tmp_path / runlock.LOCK_FILE_REL).read_bytes()
    assert len(leases) == 1  # the first run keeps its lease
    # Another ansible-playbook run of the same project (another holder process), while the first one lives.
    monkeypatch.setattr(os, "getppid", os.getpid)
    result = run(loaded)
    assert not result.get("failed") and result["refused"] is True, result
    assert result["msg"].startswith("the run lock was not taken; nothing was started"), result["msg"]
    assert f"another run of project {tmp_path} is live" in result["msg"]
    assert {e["status"] for e in result["per_host"].values()} == {"failed"}
    assert (tmp_path / runlock.LOCK_FILE_REL).read_bytes() == held and len(leases) == 1
    assert no_processes == []
