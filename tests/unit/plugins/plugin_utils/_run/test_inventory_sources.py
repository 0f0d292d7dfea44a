"""An empty flodl_workers fails the gang playbooks, pointing at the inventory source the run came from."""
from __future__ import annotations

import os

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import build_context
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.inventory_sources import (
    empty_group_problem,
    is_fdl_cluster_source,
)

PHASES = ["preflight", "prebuild", "launch"]


def test_an_fdl_cluster_source_is_named_with_where_to_look(tmp_path):
    source = tmp_path / "lab.fdl_cluster.yml"
    source.write_text("---\nplugin: flodl.cluster.fdl_cluster  # the fdl files next to it\n", encoding="utf-8")
    other = tmp_path / "hosts.ini"
    other.write_text("[flodl_workers]\n", encoding="utf-8")
    text = empty_group_problem([str(other), str(source)], PHASES)
    assert text.startswith("cluster: group flodl_workers is empty or missing, so there is no worker to prebuild "
                           "and launch for")
    assert f"flodl.cluster.fdl_cluster source {source}:" in text and "'Unable to parse'" in text
    assert str(other) not in text


def test_another_source_is_named_with_the_fix(tmp_path):
    text = empty_group_problem([str(tmp_path / "hosts.ini")], ["launch"])
    assert f"inventory source(s) {tmp_path}/hosts.ini" in text and "add one inventory host per worker" in text


def test_no_source_says_so():
    assert "No inventory source was given" in empty_group_problem(None, ["prebuild"])


def test_a_planted_fifo_as_source_is_not_read(tmp_path):
    os.mkfifo(tmp_path / "x.fdl_cluster.yml")
    assert is_fdl_cluster_source(str(tmp_path / "x.fdl_cluster.yml")) is False


@pytest.mark.parametrize("phases", [["prebuild"], ["launch"], PHASES])
def test_gang_phases_refuse_an_empty_or_missing_group(phases, tmp_path, monkeypatch):
    monkeypatch.setenv("FLODL_HOST_NAME", "ctl")
    for groups in ({"all": [], "flodl_workers": []}, {"all": []}):
        tv = {"groups": groups, "hostvars": {}, "inventory_hostname": "localhost",
              "ansible_inventory_sources": [str(tmp_path / "hosts.ini")],
              # discovery allows an empty roster in flodl, but a playbook of no host would still check nothing
              "flodl_controller_join": {"discovery": True}}
        with pytest.raises(TopologyError) as exc:
            build_context(tv, None, phases)
        assert len(exc.value.problems) == 1 and "group flodl_workers is empty or missing" in exc.value.problems[0]
        assert exc.value.per_host is None
