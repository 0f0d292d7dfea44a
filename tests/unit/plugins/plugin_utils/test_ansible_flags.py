"""Ansible's own flags: -v becomes FLODL_VERBOSITY for the launch; become is refused before contact."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils import launch_env as le
from ansible_collections.flodl.cluster.plugins.module_utils.ansible_flags import ENV_VERBOSITY, launch_verbosity
from ansible_collections.flodl.cluster.plugins.module_utils.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.plugin_utils.context import read_run

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


def fake_action(become):
    return SimpleNamespace(_play_context=SimpleNamespace(become=become, become_user="root"), _templar=None,
                           _task=SimpleNamespace())


TASK_VARS = {
    "inventory_hostname": "gpu-a",
    "groups": {"all": ["gpu-a"], "flodl_workers": ["gpu-a"]},
    "hostvars": {"gpu-a": {"flodl_path": "/srv/proj", "flodl_local_devices": [0], "flodl_nccl_socket_ifname": "eth0",
                           "flodl_arch": "precompiled/cu128"}},
    "flodl_controller_host": "10.0.0.1", "flodl_controller_path": "/srv/proj", "flodl_cmd": "train",
}


@pytest.mark.parametrize("phases", [["preflight", "prebuild", "launch"], ["launch"], ["teardown"]])
def test_become_is_refused_before_contact_by_the_steps_that_run_here(phases):
    with pytest.raises(TopologyError) as exc:
        read_run(fake_action(True), TASK_VARS, phases)
    (problem,) = exc.value.problems
    assert problem.startswith("controller: become is set for gpu-a")
    assert "become: false" in problem and "ansible_user" in problem
    assert exc.value.per_host is None  # a problem of the run: the step fails before any host is touched


def test_the_prebuild_build_honours_become(monkeypatch):
    monkeypatch.setenv("FLODL_HOST_NAME", "ctl")
    ctx = read_run(fake_action(True), TASK_VARS, ["prebuild"], connections=False, become_ok=True)
    assert ctx.cmd == "train"
