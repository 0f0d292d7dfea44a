"""flodl.cluster.preflight_check: the refusals before contact (the probe itself is the integration tests')."""
from __future__ import annotations

ACTION = "preflight_check"


def test_recorded_case(recorded, run, expect, no_processes):
    expect(run(recorded), recorded.expected)
    assert no_processes == []  # no probe, no ssh, not even a local check


def test_each_worker_reports_its_own_refusal(case, run, no_processes):
    per_host = run(case("refused_one_worker"))["per_host"]
    assert per_host["gpu-c"]["status"] == "failed"
    assert "host gpu-c (worker 2): flodl_local_devices" in per_host["gpu-c"]["msg"]
    assert {per_host[h]["status"] for h in ("ctl", "gpu-b")} == {"skipped"}
    assert "refused for the variables of gpu-c" in per_host["gpu-b"]["msg"]


def test_a_run_level_problem_fails_the_step_itself(case, run, no_processes):
    result = run(case("refused_run"))
    assert result["failed"] is True and "per_host" not in result
