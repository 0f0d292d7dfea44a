"""preflight and cluster_train validate in their run-once step, not with a task per worker (issue 8 bench)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[5]


@pytest.mark.parametrize("playbook,roles", [
    ("preflight", ["flodl.cluster.preflight"]),
    ("prebuild", ["flodl.cluster.prebuild"]),
    ("cluster_train", ["flodl.cluster.preflight", "flodl.cluster.prebuild", "flodl.cluster.launch"]),
])
def test_roles_are_imported_without_their_per_host_validation_task(playbook, roles):
    play = yaml.safe_load((REPO / "playbooks" / f"{playbook}.yml").read_text())[0]
    assert "roles" not in play
    tasks = play["tasks"]
    assert all("ansible.builtin.import_role" in t for t in tasks), "validation lives in the preflight step"
    assert [t["ansible.builtin.import_role"]["name"] for t in tasks] == roles
    assert all(t["ansible.builtin.import_role"]["rolespec_validate"] is False for t in tasks)


def test_cluster_train_preflight_covers_every_phase_it_runs():
    play = yaml.safe_load((REPO / "playbooks" / "cluster_train.yml").read_text())[0]
    # The preflight step validates (and locks) for the phases named here.
    assert play["vars"]["flodl_preflight_phases"] == ["preflight", "prebuild", "launch"]
    step = yaml.safe_load((REPO / "roles" / "preflight" / "tasks" / "main.yml").read_text())[0]["block"][0]
    assert "flodl_preflight_phases" in step["flodl.cluster.preflight_check"]["phases"]


def _worker_reports(tasks):
    """The worker_result tasks of a task list, blocks included."""
    found = []
    for task in tasks:
        found += _worker_reports(task.get("block", []) + task.get("always", []))
        if "flodl.cluster.worker_result" in task:
            found.append(task["flodl.cluster.worker_result"])
    return found


def test_cluster_train_reports_a_build_with_its_launch_and_launches_nothing_after_a_failed_build():
    """Two report tasks per worker (preflight; build + launch), not three: one output line and task each fewer."""
    play = yaml.safe_load((REPO / "playbooks" / "cluster_train.yml").read_text())[0]
    prebuild = play["tasks"][1]["ansible.builtin.import_role"]
    assert prebuild["name"] == "flodl.cluster.prebuild" and prebuild["tasks_from"] == "build"
    assert _worker_reports(yaml.safe_load((REPO / "roles" / "prebuild" / "tasks" / "build.yml").read_text())) == []
    # The prebuild role on its own still reports every worker's build.
    assert [r["phase"] for r in _worker_reports(
        yaml.safe_load((REPO / "roles" / "prebuild" / "tasks" / "main.yml").read_text()))] == ["prebuild"]
    launch = yaml.safe_load((REPO / "roles" / "launch" / "tasks" / "main.yml").read_text())
    assert launch[0]["when"] == "not (flodl_prebuild_run.builds_failed | default(false))"
    walk_in = "{{ 'flodl_agent_end' if flodl_agent_end is defined and flodl_agent_end is not skipped else 'flodl_launch_run' }}"
    assert _worker_reports(launch) == [{"phase": "launch", "result_var": walk_in,
                                        "prior_phase": "prebuild", "prior_result_var": "flodl_prebuild_run"}]
