"""A cluster block of the wrong shape is refused by its shape, before any field check can trip over it."""
from __future__ import annotations

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.validate import cluster_findings, cluster_problems
from ansible_collections.flodl.cluster.plugins.module_utils._core.problems import FDL

CONTROLLER = {"host": "c", "path": "/p"}


@pytest.mark.parametrize("cluster, got", [
    (None, "null"),
    (["gpu-a", "gpu-b"], "a list"),
    ("gpu-a", 'a string ("gpu-a")'),
])
def test_a_cluster_that_is_not_a_map_is_one_problem(cluster, got):
    assert cluster_problems(cluster, FDL) == [f"cluster: must be a map, got {got}"]
    assert cluster_problems(cluster) == [f"cluster: must be a map, got {got}"]
    assert [p.worker for p in cluster_findings(cluster)] == [None]


@pytest.mark.parametrize("controller, first", [
    (None, "is required: a map with host and path"),
    ("10.0.0.1", 'must be a map, got a string ("10.0.0.1")'),
    ([CONTROLLER], "must be a map, got a list"),
])
def test_a_controller_that_is_not_a_map_is_refused_and_its_fields_are_missing(controller, first):
    cluster = {"workers": [], "controller": controller}
    cluster = {k: v for k, v in cluster.items() if v is not None}
    found = cluster_problems(cluster, FDL)
    assert found[:3] == [f"cluster.controller: {first}",
                         "cluster.controller.host: is required: the address workers dial back to",
                         "cluster.controller.path: is required: the controller's view of the project root"]
    assert cluster_problems(cluster)[0] == f"cluster: flodl_cluster_controller: {first}"


@pytest.mark.parametrize("workers, got", [
    ({"gpu-a": {"path": "/p"}}, "a mapping"),
    ("gpu-a,gpu-b", 'a string ("gpu-a,gpu-b")'),
    (3, "an integer (3)"),
])
def test_workers_that_are_not_a_list_are_refused_and_none_is_checked(workers, got):
    found = cluster_problems({"controller": CONTROLLER, "workers": workers}, FDL)
    assert found[0] == f"cluster.workers: must be a list of workers, got {got}"
    assert all(p.startswith("cluster.workers: ") for p in found)
    inventory = cluster_problems({"controller": CONTROLLER, "workers": workers})
    assert inventory[0] == f"cluster: group flodl_workers: must be a list of workers, got {got}"


@pytest.mark.parametrize("worker, got", [("gpu-a", 'a string ("gpu-a")'), (["gpu-a"], "a list"), (None, "null")])
def test_a_worker_that_is_not_a_map_is_one_problem_at_its_index(worker, got):
    good = {"host": "gpu-b", "path": "/p", "local_devices": [0], "nccl_socket_ifname": "eth0"}
    cluster = {"controller": CONTROLLER, "workers": [good, worker]}
    assert cluster_problems(cluster, FDL) == [f"cluster.workers[1]: must be a map, got {got}"]
    assert cluster_problems(cluster) == [f"host ? (worker 1): must be a map, got {got}"]
    assert [p.worker for p in cluster_findings(cluster)] == [1]
