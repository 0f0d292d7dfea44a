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
