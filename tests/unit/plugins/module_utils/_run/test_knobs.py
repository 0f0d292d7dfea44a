"""The run's numeric knobs take a finite number or its text, nothing else; a NUL anywhere in a run-level value
is refused by name, its value never shown."""
from __future__ import annotations

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._run import knobs

ALL = ["preflight", "prebuild", "launch"]


@pytest.mark.parametrize("value", [True, False, None, "", "ten", "1e400", float("inf"), float("nan"), [5], {"s": 5}])
def test_only_a_finite_number_or_its_text_is_a_number(value):
    assert knobs.number(value) is None


@pytest.mark.parametrize("value, found", [(5, 5.0), (" 2.5 ", 2.5), ("-1", -1.0), (0, 0.0)])
def test_a_number_or_its_text_is_read(value, found):
    assert knobs.number(value) == found


@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_timeout_is_refused_not_read_as_one_or_zero(value):
    [problem] = knobs.knob_problems({"flodl_launch_timeout": value}, ALL, prebuild=True)
    assert problem.startswith(
        f"controller: flodl_launch_timeout must be a number of seconds (0 or more), got bool '{value}'")


def test_each_number_is_refused_in_its_own_unit():
    [problem] = knobs.knob_problems({"flodl_preflight_min_free_gb": "-1"}, ALL, prebuild=True)
    assert problem.startswith("controller: flodl_preflight_min_free_gb must be a number of GB (0 or more), got str "
                              "'-1' (the GB that must be free")
    assert "seconds" not in problem


def test_a_nul_is_refused_by_variable_and_its_value_never_shown():
    values = {"flodl_launch_host": "gpu-a", "flodl_prebuild_env": {"CARGO_HOME": ["/c\x00secret"]},
              "flodl_launch_log_dir": "/l\x00hunter2"}
    found = knobs.nul_problems(values)
    assert [p.split(" contains ")[0] for p in found] == ["controller: flodl_launch_log_dir",
                                                         "controller: flodl_prebuild_env"]
    assert not any("secret" in p or "hunter2" in p for p in found)
    assert knobs.nul_problems({"flodl_launch_host": "gpu-a", "flodl_run_lock_ttl": 60}) == []
