"""flodl.cluster.topology: the validated run, before any host is contacted."""
from __future__ import annotations

import pytest

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
