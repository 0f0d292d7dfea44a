"""Each action's argument spec (module_utils.action_specs) is what its module stub documents."""
from __future__ import annotations

import importlib

import pytest
import yaml

from ansible_collections.flodl.cluster.plugins.module_utils import action_specs

KEYS = ("type", "required", "default", "elements", "choices")


@pytest.mark.parametrize("module, spec", [("worker_result", action_specs.WORKER_RESULT),
                                          ("orphan_cleanup", action_specs.ORPHAN_CLEANUP)])
def test_the_documented_options_are_the_spec(module, spec):
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
