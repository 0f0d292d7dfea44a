"""The topology step used alone in a runbook on localhost still fails a refused run (no worker report follows)."""
from __future__ import annotations

ACTION = "topology"


def test_a_refused_run_fails_the_step_only_on_a_host_that_is_not_a_worker(case, run):
    loaded = case("no_cmd")
    on_worker = run(loaded)
    assert on_worker["refused"] is True and not on_worker.get("failed")  # each worker's report fails instead
    loaded.task_vars = dict(loaded.task_vars, inventory_hostname="localhost")
    on_localhost = run(loaded)
    assert on_localhost["refused"] is True and on_localhost["failed"] is True
    assert "flodl_cmd" in on_localhost["msg"]
