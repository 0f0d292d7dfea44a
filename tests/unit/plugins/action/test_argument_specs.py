"""Each action validates its arguments with the one spec module_utils.action_specs defines for it."""
from __future__ import annotations

import pytest
from ansible.plugins.action import ActionBase

from ansible_collections.flodl.cluster.plugins.module_utils import action_specs

from .conftest import Case, make_action

SPECS = {
    "worker_result": action_specs.WORKER_RESULT, "orphan_cleanup": action_specs.ORPHAN_CLEANUP,
    "preflight_check": action_specs.PREFLIGHT_CHECK, "topology": action_specs.TOPOLOGY,
    "launch_env": action_specs.LAUNCH_ENV, "run_launcher": action_specs.RUN_LAUNCHER,
    "launch_status": action_specs.LAUNCH_STATUS,
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
