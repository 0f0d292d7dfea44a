"""One machine, one worker: two workers on one sshd are refused before contact, naming both; two sshds
on one machine (different ports: containers with their own GPUs) stay allowed."""
from __future__ import annotations

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.addresses import (
    canonical_address, same_machine_problems)
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.module_utils._core.problems import FDL
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.validate import cluster_problems
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import build_context


@pytest.mark.parametrize("a, b", [
    ("10.0.0.1", "alice@10.0.0.1"),
    ("fd00::2", "fd00:0:0::2"),
    ("fd00::2", "[FD00::2]"),
    ("10.0.0.1", "::ffff:10.0.0.1"),
    ("gpu-a", "GPU-A."),
])
def test_equal_spellings_of_one_address(a, b):
    assert canonical_address(a) == canonical_address(b)


@pytest.mark.parametrize("a, b", [
    ("10.0.0.1", "010.0.0.1"),  # ssh's resolver reads a leading 0 as octal: 8.0.0.1
    ("127.0.0.1", "localhost"),  # a name lookup: not made here
    ("10.0.0.1", "10.1"),
])
def test_spellings_that_take_a_resolver_stay_distinct(a, b):
    assert canonical_address(a) != canonical_address(b)


def task_vars(h1, h2, h3=None):
    base = {"flodl_path": "/srv/proj", "flodl_local_devices": [0], "flodl_nccl_socket_ifname": "eth0"}
    hosts = {"h1": dict(base, **h1), "h2": dict(base, **h2)}
    if h3 is not None:
        hosts["h3"] = dict(base, **h3)
    return {
        "groups": {"all": list(hosts), "flodl_workers": list(hosts)},
        "hostvars": hosts, "inventory_hostname": "h1", "ansible_play_hosts_all": list(hosts),
        "flodl_controller_host": "10.0.0.1", "flodl_controller_path": "/srv/proj", "flodl_cmd": "train",
        "flodl_prebuild": False,
    }


@pytest.fixture(autouse=True)
def controller_env(monkeypatch):
    monkeypatch.setenv("FLODL_HOST_NAME", "box")


@pytest.mark.parametrize("h1, h2", [
    ({"ansible_host": "10.0.0.5"}, {"ansible_host": "10.0.0.5"}),
    ({"ansible_host": "10.0.0.5"}, {"ansible_host": "10.0.0.5", "ansible_port": 22}),
    ({"ansible_host": "fd00::5"}, {"ansible_host": "fd00:0::5"}),
    ({"ansible_host": "10.0.0.5", "ansible_user": "a"}, {"flodl_ssh": {"target": "b@10.0.0.5"}}),
    ({"ansible_host": "10.0.0.5", "ansible_port": 2222}, {"ansible_host": "10.0.0.5", "ansible_port": "2222"}),
])
def test_two_workers_on_one_sshd_are_refused_naming_both(h1, h2):
    with pytest.raises(TopologyError) as exc:
        build_context(task_vars(h1, h2), None, ["preflight", "launch"])
    found = [p for p in exc.value.problems if "same machine" in p]
    assert len(found) == 1, exc.value.problems
    assert found[0].startswith("host h2 (worker 1): flodl_ssh: reaches ") and "worker 0 (h1)" in found[0]
    assert list(exc.value.per_host) == ["h2"]


@pytest.mark.parametrize("h1, h2, h3", [
    # the controller's own box (never over ssh) and a container on it with its own sshd and GPUs
    ({"flodl_host": "box", "ansible_connection": "local"}, {"ansible_host": "127.0.0.1", "ansible_port": 2222},
     {"ansible_host": "127.0.0.1", "ansible_port": 2223}),
    # one machine behind different jump hosts is not one machine
    ({"ansible_host": "10.0.0.5", "ansible_ssh_common_args": "-J jump1"},
     {"ansible_host": "10.0.0.5", "ansible_ssh_common_args": "-J jump2"}, {"ansible_host": "10.0.0.6"}),
    # spellings a resolver would have to decide
    ({"ansible_host": "10.0.0.5"}, {"ansible_host": "010.0.0.5"}, {"ansible_host": "localhost"}),
])
def test_distinct_sshds_stay_allowed(h1, h2, h3):
    ctx = build_context(task_vars(h1, h2, h3), None, ["preflight", "launch"])
    assert len(ctx.cluster.workers) == 3


def test_fdl_files_name_both_workers():
    cluster = {"controller": {"host": "c", "path": "/p"}, "workers": [
        {"host": "a", "path": "/p", "local_devices": [0], "nccl_socket_ifname": "e", "ssh": {"target": "10.0.0.5"}},
        {"host": "b", "path": "/p", "local_devices": [1], "nccl_socket_ifname": "e", "ssh": {"target": "10.0.0.5"}},
    ]}
    found = cluster_problems(cluster, FDL)
    assert found == [p for p in found if "same machine" in p] and len(found) == 1
    assert found[0].startswith('cluster.workers[1] ("b").ssh: reaches 10.0.0.5 port 22') and "worker 0 (a)" in found[0]


@pytest.mark.parametrize("second", [
    {"host": "b", "ssh": {"target": "10.0.0.5", "port": "twenty-two"}},   # the validator reports the port
    {"host": "b", "ssh": {"target": "10.0.0.5", "options": ["Port=22x"]}},
    {"host": " ", "ssh": {"target": ""}},                                 # no address to compare
    "b",                                                                  # not a worker at all
])
def test_a_worker_whose_sshd_is_not_plainly_known_is_never_called_the_same_machine(second):
    first = {"host": "a", "ssh": {"target": "10.0.0.5"}}
    found = same_machine_problems([first, second, dict(first, host="c")], lambda i, h: f"host {h} (worker {i})")
    assert len(found) == 1  # only the plain duplicate of worker 0
    assert found[0].startswith("host c (worker 2): reaches 10.0.0.5 port 22 over ssh, the same machine as worker 0 (a);")
