"""flodl.cluster.worker_result: a run-once phase's entry for this host, as this host's own task result."""
from __future__ import annotations

import pytest

ACTION = "worker_result"


def test_recorded_case(recorded, run, expect, no_processes):
    expect(run(recorded), recorded.expected)


def test_a_worker_with_no_entry_is_not_failed(case, run):
    loaded = case("ok_entry")
    loaded.task_vars["inventory_hostname"] = "gpu-c"  # a worker the phase filed nothing for
    result = run(loaded)
    assert not result.get("failed")


def test_result_and_result_var_are_exclusive(case, run):
    loaded = case("ok_entry")
    loaded.args["result"] = {"per_host": {}}
    with pytest.raises(Exception, match="mutually exclusive"):
        run(loaded)


def _with_build(loaded, build):
    loaded.args.update(prior_phase="prebuild", prior_result_var="flodl_prebuild_run")
    loaded.task_vars["flodl_prebuild_run"] = build
    return loaded


def test_a_failed_build_in_the_play_fails_the_worker(case, run):
    build = {"builds_failed": True, "per_host": {"ctl": {"status": "failed", "msg": "ctl: build failed", "data": {}}}}
    result = run(_with_build(case("ok_entry"), build))
    assert result["failed"] is True and result["msg"] == "ctl: build failed"


def test_a_passed_build_in_the_play_is_reported_beside_the_phase(case, run):
    build = {"per_host": {"ctl": {"status": "changed", "msg": "built", "data": {"bin": "b"}}}}
    result = run(_with_build(case("ok_entry"), build))
    assert not result.get("failed") and result["changed"] is True
    assert result["prebuild"] == {"bin": "b"} and result["msg"] == "prebuild: built; preflight: x86_64, glibc 2.36"


def test_no_build_in_the_play_is_the_phase_alone(case, run, expect):
    loaded = case("ok_entry")
    loaded.args.update(prior_phase="prebuild", prior_result_var="flodl_prebuild_run")  # not registered here
    expect(run(loaded), loaded.expected)


def test_prior_phase_needs_its_variable(case, run):
    loaded = case("ok_entry")
    loaded.args["prior_phase"] = "prebuild"
    with pytest.raises(Exception, match="prior_phase"):
        run(loaded)
