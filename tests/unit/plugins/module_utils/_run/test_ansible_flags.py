"""Ansible's own flags: -v becomes FLODL_VERBOSITY for the launch; become is refused before contact."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.flodl.cluster.plugins.module_utils._launch import launch_env as le
from ansible_collections.flodl.cluster.plugins.module_utils._run.ansible_flags import ENV_VERBOSITY, launch_verbosity
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import read_run
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.run_rules import become_findings

CLUSTER = {
    "controller": {"host": "10.0.0.1", "port": 1337, "path": "/srv/proj"},
    "workers": [{"host": "gpu-a", "local_devices": [0, 1], "nccl_socket_ifname": "eth0", "path": "/srv/proj"}],
}


@pytest.mark.parametrize("count,level", [(0, None), (1, "verbose"), (2, "debug"), (3, "trace"), (6, "trace")])
def test_v_flags_map_to_fdls_own_levels(count, level):
    assert launch_verbosity(count, {}, None) == level


def test_the_operators_value_wins():
    assert launch_verbosity(2, {ENV_VERBOSITY: "quiet"}, None) is None  # the controller's environment
    assert launch_verbosity(2, {}, {ENV_VERBOSITY: "0"}) is None  # the cluster's env (flodl_cluster_env)
    assert launch_verbosity(2, {}, {"NCCL_DEBUG": "INFO"}) == "debug"


@pytest.mark.parametrize("level", [None, "debug"])
def test_the_launch_environment_carries_it_only_when_asked(level):
    plan = le.prepare_launch(
        le.LaunchInputs(cluster=CLUSTER, project_root="/srv/proj", cmd="train", gpu_counts={"gpu-a": (2, 0)},
                        host_user="u", verbosity=level),
        lambda _name: ["10.0.0.2"],
    )
    assert plan.env.get(ENV_VERBOSITY) == level


def fake_action(become, task_become=None):
    return SimpleNamespace(_play_context=SimpleNamespace(become=become, become_user="root", become_method=None),
                           _templar=None, _task=SimpleNamespace(become=task_become, become_user=None,
                                                                become_method=None))


def worker(**own):
    return {"flodl_path": "/srv/proj", "flodl_local_devices": [0, 1], "flodl_nccl_socket_ifname": "eth0",
            "flodl_arch": "precompiled/cu128", **own}


TASK_VARS = {
    "inventory_hostname": "gpu-a",
    "groups": {"all": ["gpu-a"], "flodl_workers": ["gpu-a"]},
    "hostvars": {"gpu-a": worker()},
    "flodl_controller_host": "10.0.0.1", "flodl_controller_path": "/srv/proj", "flodl_cmd": "train",
}


def three(**own_of_b):
    """gpu-a runs the step (worker 0), gpu-b (worker 1) has ``own_of_b``, gpu-c (worker 2) nothing."""
    names = ["gpu-a", "gpu-b", "gpu-c"]
    hostvars = {n: worker(flodl_host=n) for n in names}
    hostvars["gpu-b"].update(own_of_b)
    return {**TASK_VARS, "groups": {"all": names, "flodl_workers": names}, "hostvars": hostvars}


@pytest.mark.parametrize("phases", [["preflight", "prebuild", "launch"], ["launch"], ["teardown"]])
def test_become_on_the_steps_host_is_that_workers_refusal(phases):
    with pytest.raises(TopologyError) as exc:
        read_run(fake_action(True), TASK_VARS, phases, connections=False)
    (problem,) = exc.value.problems
    assert problem.startswith("host gpu-a (worker 0): become is on for gpu-a")
    assert "ansible_become: false" not in problem and "become: false" in problem and "ansible_user" in problem
    assert "flodl_launch_mode: walk_in" in problem  # the way to honour it
    assert exc.value.per_host == {"gpu-a": [problem]}  # the worker fails with it; the step names no other


def test_in_walk_in_a_workers_become_is_honoured_not_refused():
    tv = {**three(ansible_become=True, ansible_become_user="nobody"), "flodl_launch_mode": "walk_in"}
    ctx = read_run(fake_action(False), tv, ["preflight", "prebuild", "launch"], connections=False)
    assert [w.host for w in ctx.cluster.workers] == ["gpu-a", "gpu-b", "gpu-c"]
    with pytest.raises(TopologyError):  # a step without a launch (teardown) still cannot honour it
        read_run(fake_action(False), tv, ["teardown"], connections=False)


def test_become_on_a_later_worker_is_refused_on_that_worker_only():
    tv = three(ansible_become=True, ansible_become_user="nobody")
    with pytest.raises(TopologyError) as exc:
        read_run(fake_action(False), tv, ["preflight", "prebuild", "launch"], connections=False)
    assert list(exc.value.per_host) == ["gpu-b"], exc.value.per_host
    (problem,) = exc.value.per_host["gpu-b"]
    assert problem.startswith("host gpu-b (worker 1): become is on for gpu-b (its ansible_become; "
                              "become_user nobody, become_method sudo)")
    assert "not as nobody" in problem and "set ansible_become: false for gpu-b" in problem


def test_the_plays_become_refuses_every_worker_without_its_own_false():
    tv = three(ansible_become="no")  # gpu-b turns it off for itself, as Ansible's precedence has it
    with pytest.raises(TopologyError) as exc:
        read_run(fake_action(True, task_become=True), tv, ["launch"], connections=False)
    assert sorted(exc.value.per_host) == ["gpu-a", "gpu-c"], exc.value.per_host
    assert "the play's become" in exc.value.per_host["gpu-c"][0]
    assert exc.value.per_host["gpu-c"][0].startswith("host gpu-c (worker 2): ")


def test_a_runbook_on_localhost_refuses_its_own_become_as_the_runs_and_the_workers_own():
    tv = {**three(ansible_become="yes"), "inventory_hostname": "localhost"}
    with pytest.raises(TopologyError) as exc:
        read_run(fake_action(True, task_become=True), tv, ["launch"], connections=False)
    assert exc.value.problems[0].startswith("controller: become is set for localhost")
    # The play is not on the workers: its become is not theirs, gpu-b's own is.
    assert list(exc.value.per_host) == ["gpu-b"]


def test_a_templated_become_is_read_as_its_value():
    loader = DataLoader()
    templar = Templar(loader=loader, variables={"flag": False})
    off = three(ansible_become=trust_as_template("{{ flag }}"))
    assert become_findings(off, templar, (None, None, None)) == []
    on = three(ansible_become=trust_as_template("{{ not flag }}"), ansible_become_method="su")
    (problem,) = become_findings(on, templar, (None, None, None))
    assert problem.worker == 1 and "become_method su" in problem.text()


def test_the_prebuild_build_honours_become(monkeypatch):
    monkeypatch.setenv("FLODL_HOST_NAME", "ctl")
    ctx = read_run(fake_action(True), TASK_VARS, ["prebuild"], connections=False, become_ok=True)
    assert ctx.cmd == "train"
