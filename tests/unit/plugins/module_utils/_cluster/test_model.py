# -*- coding: utf-8 -*-
"""The run's typed cluster: built once from the validated block, immutable, its document only for rendering."""
from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.model import (
    ALL,
    Cluster,
    ClusterShapeError,
    Join,
    Ssh,
    cluster_model,
)
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import cluster_from_inventory
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.validate import cluster_problems
from ansible_collections.flodl.cluster.plugins.module_utils._launch.cluster_json import cluster_json

CLUSTER_VARS = {
    "flodl_controller_host": "10.0.0.1", "flodl_controller_path": "/opt/proj", "flodl_controller_docker": "dev",
    "flodl_controller_join": {"token": "ab" * 16, "discovery": False, "join_timeout": 30},
    "flodl_cluster_env": {"B": "2", "A": "1"}, "flodl_cluster_gpu_ram_share": 1,
}


def _document() -> dict:
    workers = [
        ("gpu-a", {"flodl_path": "/opt/proj", "flodl_local_devices": "all", "flodl_nccl_socket_ifname": "eth0",
                   "flodl_arch": "precompiled/cu128", "flodl_env": {"W": "x"}, "flodl_gpu_ram_share": 0.5}),
        ("gpu-b", {"flodl_path": "/srv/p", "flodl_local_devices": [1, 0], "flodl_nccl_socket_ifname": "eth1",
                   "flodl_data_path": "/mnt/d", "flodl_tunnel": True}),
    ]
    ssh = {"gpu-a": None, "gpu-b": {"target": "10.0.0.12", "port": 2222, "options": ["ConnectTimeout=5"]}}
    document = cluster_from_inventory(workers, copy.deepcopy(CLUSTER_VARS), ssh)
    assert cluster_problems(document) == []
    return document


def test_every_field_read_is_typed():
    cluster = cluster_model(_document())
    ctl = cluster.controller
    assert (ctl.host, ctl.port, ctl.path, ctl.docker, ctl.arch, ctl.data_path) == (
        "10.0.0.1", 1337, "/opt/proj", "dev", None, None)
    assert ctl.join == Join(token="ab" * 16, discovery=False, join_timeout=30) and cluster.holds_secret()
    a, b = cluster.workers
    assert a.all_devices and a.local_devices == ALL and a.arch == "precompiled/cu128" and a.gpu_ram_share == 0.5
    assert a.ssh is None and dict(a.env) == {"W": "x"} and a.ranks == () and a.tunnel is False
    assert b.local_devices == (1, 0) and not b.all_devices and b.nccl_socket_ifname == "eth1"
    assert b.ssh == Ssh(target="10.0.0.12", port=2222, options=("ConnectTimeout=5",)) and b.tunnel is True
    assert b.data_path == "/mnt/d" and b.arch is None and b.gpu_ram_share is None
    assert dict(cluster.env) == {"B": "2", "A": "1"} and cluster.gpu_ram_share == 1.0
    assert cluster.hosts == ("10.0.0.1", "gpu-a", "gpu-b")
    assert [w.host for w in cluster.remotes("gpu-a")] == ["gpu-b"]
    assert "ab" * 16 not in repr(cluster)  # the join token is never shown


def test_frozen_all_the_way_down():
    cluster = cluster_model(_document())
    with pytest.raises(dataclasses.FrozenInstanceError):
        cluster.workers[0].host = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        cluster.env["A"] = "changed"  # type: ignore[index]
    with pytest.raises(TypeError):
        cluster.workers[0].env["W"] = "changed"  # type: ignore[index]
    cluster.document["workers"].clear()  # a fresh copy each time
    cluster.workers[1].document["ssh"]["port"] = 1
    assert len(cluster.document["workers"]) == 2 and cluster.workers[1].document["ssh"]["port"] == 2222


def test_the_document_renders_the_same_bytes_and_is_not_the_callers():
    document = _document()
    kept = copy.deepcopy(document)
    cluster = cluster_model(document)
    document["workers"][0]["host"] = "changed"  # the caller's dict is copied, never kept
    assert cluster.document == kept and cluster_json(cluster.document) == cluster_json(kept)
    assert cluster_model(cluster.document) == cluster  # rebuilt into the same value


BAD = [
    ("workers", "gpu-a"),
    ("controller", None),
    ("controller.host", 5),
    ("controller.port", "1337"),
    ("controller.port", True),
    ("controller.join.token", 12),
    ("controller.join.discovery", "yes"),
    ("workers.0", "gpu-a"),
    ("workers.0.host", None),
    ("workers.0.local_devices", "some"),
    ("workers.0.local_devices", [0, "1"]),
    ("workers.0.local_devices", [True]),
    ("workers.0.env", ["A=1"]),
    ("workers.0.env", {"A": 1}),
    ("workers.1.ssh", "10.0.0.12"),
    ("workers.1.ssh.options", "ConnectTimeout=5"),
    ("workers.0.gpu_ram_share", "half"),
    ("workers.0.ranks", "0"),
    ("env", {"A": None}),
]


@pytest.mark.parametrize("where, value", BAD)
def test_a_block_of_another_shape_is_refused(where, value):
    document = _document()
    *path, key = [int(p) if p.isdigit() else p for p in where.split(".")]
    target = document
    for part in path:
        target = target[part]
    target[key] = value
    with pytest.raises(ClusterShapeError):
        cluster_model(document)


def test_not_json_data_is_refused():
    with pytest.raises(ClusterShapeError):
        cluster_model({"controller": {"host": "h", "path": "/p"}, "workers": [], "gpu_ram_share": float("nan")})
    with pytest.raises(ClusterShapeError):
        cluster_model(["not", "a", "map"])
    assert isinstance(cluster_model(json.loads('{"controller": {"host": "h", "path": "/p"}, "workers": []}')), Cluster)
