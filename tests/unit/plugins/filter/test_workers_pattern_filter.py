"""The workers_pattern filter: the playbooks' hosts, and the steps' code loaded in the process that templates it."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.flodl.cluster.plugins.filter.workers_pattern import (
    STEP_PLUGINS,
    FilterModule,
    workers_pattern,
)


@pytest.mark.parametrize("groups, fallback, expected", [
    ({"flodl_workers": ["h1"]}, "localhost", "flodl_workers"),
    ({"flodl_workers": []}, "localhost", "localhost"),
    ({"all": ["h1"]}, "localhost", "localhost"),
    ({"all": ["h1"]}, None, "flodl_workers"),  # no fallback: the play honours a limit and matches nothing
    ({"flodl_workers": []}, "", "flodl_workers"),
])
def test_the_pattern_is_the_worker_group_unless_it_is_empty_and_a_fallback_is_given(groups, fallback, expected):
    assert workers_pattern(groups, fallback=fallback) == expected
    assert FilterModule().filters()["workers_pattern"] is workers_pattern


def test_another_group_can_be_named():
    assert workers_pattern({"gpus": ["h1"]}, fallback="localhost", group="gpus") == "gpus"
    assert workers_pattern({"flodl_workers": ["h1"]}, fallback="localhost", group="gpus") == "localhost"


@pytest.mark.parametrize("groups, group, words", [
    (["flodl_workers"], "flodl_workers", "workers_pattern expects the `groups` mapping, got list"),
    ({}, "", "workers_pattern: `group` must be a group name"),
    ({}, 3, "workers_pattern: `group` must be a group name"),
])
def test_bad_input_is_refused_by_the_filter(groups, group, words):
    with pytest.raises(AnsibleFilterError) as raised:
        workers_pattern(groups, group=group)
    assert str(raised.value) == words


@pytest.mark.parametrize("steps, named", [(["worker_result", "shell"], "'shell'"), ("worker_result", "'worker_result'")])
def test_steps_must_list_the_collections_step_plugins(steps, named):
    with pytest.raises(AnsibleFilterError) as raised:
        workers_pattern({"flodl_workers": ["h1"]}, steps=steps)
    assert str(raised.value).startswith("workers_pattern: `steps` must list step plugins among topology, ")
    assert str(raised.value).endswith(f"got {named}")


def test_a_fresh_process_that_templates_the_pattern_holds_every_step_plugin_afterwards():
    # A fresh interpreter, as ansible-playbook is: the forks of a task inherit what it imported.
    probe = textwrap.dedent(f"""
        import sys
        sys.path[:0] = {sys.path!r}
        from ansible_collections.flodl.cluster.plugins.filter import workers_pattern as wp
        before = [n for n in wp.STEP_PLUGINS if "ansible_collections.flodl.cluster.plugins.action." + n in sys.modules]
        wp.workers_pattern({{"flodl_workers": ["h1"]}}, fallback="localhost")
        after = [n for n in wp.STEP_PLUGINS if "ansible_collections.flodl.cluster.plugins.action." + n in sys.modules]
        print(len(before), ",".join(after), ",".join(wp.load_steps()))
    """)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["0", ",".join(STEP_PLUGINS), ",".join(STEP_PLUGINS)]


def test_a_play_that_names_its_steps_loads_only_those():
    probe = textwrap.dedent(f"""
        import sys
        sys.path[:0] = {sys.path!r}
        from ansible_collections.flodl.cluster.plugins.filter import workers_pattern as wp
        wp.workers_pattern({{"flodl_workers": ["h1"]}}, steps=["preflight_check", "worker_result"])
        print(",".join(n for n in wp.STEP_PLUGINS if "ansible_collections.flodl.cluster.plugins.action." + n in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["preflight_check,worker_result"]
