"""Each action's argument spec (module_utils.action_specs) is what its module stub documents."""
from __future__ import annotations

import importlib

import pytest
import yaml

from ansible_collections.flodl.cluster.plugins.module_utils import action_specs

KEYS = ("type", "required", "default", "elements", "choices")


SPECS = {
    "worker_result": action_specs.WORKER_RESULT, "orphan_cleanup": action_specs.ORPHAN_CLEANUP,
    "preflight_check": action_specs.PREFLIGHT_CHECK, "topology": action_specs.TOPOLOGY,
    "launch_env": action_specs.LAUNCH_ENV, "run_launcher": action_specs.RUN_LAUNCHER,
    "launch_status": action_specs.LAUNCH_STATUS,
}


@pytest.mark.parametrize("module", sorted(SPECS))
def test_the_documented_options_are_the_spec(module):
    spec = SPECS[module]
    stub = importlib.import_module(f"ansible_collections.flodl.cluster.plugins.modules.{module}")
    documented = yaml.safe_load(stub.DOCUMENTATION)["options"]
    assert sorted(documented) == sorted(spec["argument_spec"])
    for name, option in spec["argument_spec"].items():
        doc = documented[name]
        assert {k: doc.get(k) for k in KEYS if k != "required"} == {k: option.get(k) for k in KEYS if k != "required"}, name
        assert bool(doc.get("required")) == bool(option.get("required")), name


@pytest.mark.parametrize("module", ["cargo_prebuild", "launch_env", "launch_status", "orphan_cleanup",
                                    "preflight_check", "run_launcher", "topology", "worker_result"])
def test_every_module_stub_documents_in_valid_yaml(module):
    stub = importlib.import_module(f"ansible_collections.flodl.cluster.plugins.modules.{module}")
    for text in (stub.DOCUMENTATION, stub.EXAMPLES, stub.RETURN):
        assert yaml.safe_load(text)


def test_a_blank_answer_to_an_optional_option_is_its_default():
    args = {"grace_seconds": "", "timeout": " \t", "detach": "false", "prepared_var": "x", "unknown": ""}
    # Options that are not required lose their blank value (the default applies); everything else stays as given,
    # including an option the spec does not know (its validation refuses it).
    assert action_specs.without_blanks(args, action_specs.RUN_LAUNCHER) == {
        "detach": "false", "prepared_var": "x", "unknown": ""}
    # A required option keeps its blank value, for its validation to refuse.
    assert action_specs.without_blanks({"phase": " ", "result_var": ""}, action_specs.WORKER_RESULT) == {"phase": " "}
