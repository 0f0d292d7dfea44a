"""module_utils._run.action_specs: every module stub documents in valid YAML; a blank optional answer is its default."""
from __future__ import annotations

import importlib

import pytest
import yaml

from ansible_collections.flodl.cluster.plugins.module_utils._run import action_specs


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
