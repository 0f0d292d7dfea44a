"""Each action validates its arguments with the one spec module_utils._run.action_specs defines for it, and its
module stub documents exactly that spec."""
from __future__ import annotations

import importlib

import pytest
import yaml
from ansible.plugins.action import ActionBase

from ansible_collections.flodl.cluster.plugins.module_utils._run import action_specs

from .conftest import Case, make_action

KEYS = ("type", "required", "default", "elements", "choices")
SPECS = {
    "worker_result": action_specs.WORKER_RESULT, "orphan_cleanup": action_specs.ORPHAN_CLEANUP,
    "preflight_check": action_specs.PREFLIGHT_CHECK, "topology": action_specs.TOPOLOGY,
    "launch_env": action_specs.LAUNCH_ENV, "run_launcher": action_specs.RUN_LAUNCHER,
    "launch_status": action_specs.LAUNCH_STATUS, "walk_in_agent": action_specs.WALK_IN_AGENT,
}


class _Validated(Exception):
    pass


@pytest.mark.parametrize("action", sorted(SPECS))
def test_the_action_validates_with_its_spec_from_action_specs(action, monkeypatch):
    seen = []

    def record(self, *args, **kwargs):
        seen.append((args, kwargs))
        raise _Validated

    monkeypatch.setattr(ActionBase, "validate_argument_spec", record)
    with pytest.raises(_Validated):
        make_action(action, Case({}, {}, False, {})).run(task_vars={})
    assert seen == [((), SPECS[action])]


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
