"""module_utils._run.argspec: the roles' argument specs applied to a whole run in one pass."""
from __future__ import annotations

from ansible_collections.flodl.cluster.plugins.module_utils._run import argspec

SPEC = {
    "flodl_path": {"type": "str", "required": True, "description": ["docs only"]},
    "flodl_tunnel": {"type": "bool"},
    "flodl_build_timeout": {"type": "float", "default": 3600, "version_added": "0.1.0"},
    "flodl_preflight_phases": {"type": "list", "elements": "str", "choices": ["preflight", "launch"]},
}


def test_spec_of_keeps_what_the_validator_reads_only():
    assert argspec.spec_of(SPEC["flodl_path"]) == {"type": "str", "required": True}
    nested = {"type": "dict", "options": {"a": {"type": "int", "description": "x"}}}
    assert argspec.spec_of(nested) == {"type": "dict", "options": {"a": {"type": "int"}}}


def test_union_required_by_one_role_is_required_and_the_first_definition_wins():
    union = argspec.union_options([
        {"flodl_cmd": {"type": "str"}, "flodl_arch": {"type": "str"}},
        {"flodl_cmd": {"type": "raw", "required": True}},
    ])
    assert union == {"flodl_cmd": {"type": "str", "required": True}, "flodl_arch": {"type": "str"}}


def test_problems_per_option_with_ansibles_own_wording():
    found = argspec.problems({k: argspec.spec_of(v) for k, v in SPEC.items()}, {
        "flodl_tunnel": "maybe", "flodl_build_timeout": "soon", "flodl_preflight_phases": ["nope"], "other": 1})
    assert sorted(found) == ["flodl_build_timeout", "flodl_path", "flodl_preflight_phases", "flodl_tunnel"]
    assert "missing required arguments: flodl_path" in found["flodl_path"][0]
    assert "argument 'flodl_tunnel' is of type" in found["flodl_tunnel"][0]
    assert "argument 'flodl_build_timeout' is of type" in found["flodl_build_timeout"][0]
    assert "nope" in found["flodl_preflight_phases"][0]


def test_no_problem_no_entry_and_survey_strings_convert():
    options = {k: argspec.spec_of(v) for k, v in SPEC.items()}
    assert argspec.problems(options, {"flodl_path": "/p", "flodl_tunnel": "true", "flodl_build_timeout": "60"}) == {}


def test_run_problems_checks_worker_options_on_each_worker_and_the_rest_once():
    options = {k: argspec.spec_of(v) for k, v in SPEC.items()}
    run, per_host = argspec.run_problems(
        options,
        {"flodl_build_timeout": "soon"},
        [("h1", {"flodl_path": "/p"}), ("h2", {"flodl_tunnel": "maybe"}), ("h3", {"flodl_path": "/p"})],
        ["flodl_path", "flodl_tunnel"],
    )
    assert list(run) == ["flodl_build_timeout"]
    assert sorted(per_host) == ["h2"]
    assert sorted(per_host["h2"]) == ["flodl_path", "flodl_tunnel"]


def test_uncovered_drops_what_the_runs_own_rules_already_said_about_that_subject():
    from ansible_collections.flodl.cluster.plugins.module_utils._core.problems import worded

    found = {"flodl_tunnel": ["argument 'flodl_tunnel' is of type str"], "flodl_path": ["missing required arguments: flodl_path"]}
    ours = [worded("host gpu-b (worker 2): flodl_tunnel: must be true or false, got a string (\"maybe\")", 2, "flodl_tunnel"),
            worded("host gpu-c (worker 1): flodl_path: must be a string", 1, "flodl_path"),
            # The text names flodl_path and this worker, but the problem is the run's: it covers nothing here.
            worded("controller: flodl_path of host gpu-b is odd", None, "flodl_cmd")]
    left = argspec.uncovered(found, 2, ours, "host h2")
    # flodl_tunnel is covered for this worker; flodl_path was said of another worker only.
    assert [p.text() for p in left] == ["host h2: missing required arguments: flodl_path"]
    assert left[0].worker == 2 and left[0].variable == "flodl_path"
