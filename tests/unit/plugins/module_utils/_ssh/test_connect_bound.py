"""A connect bound on flodl's launcher ssh, in the topology, on the launched bytes."""
from __future__ import annotations

import json

from ansible_collections.flodl.cluster.plugins.module_utils._launch import launch_env as le
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.connect_bound import cluster_with_connect_bound
from ansible_collections.flodl.cluster.plugins.module_utils._core.hexcodec import hex_decode
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import build_context

CLUSTER = {
    "controller": {"host": "10.0.0.1", "port": 1337, "path": "/p"},
    "workers": [
        {"host": "ctl", "local_devices": [0], "nccl_socket_ifname": "lo", "path": "/p"},
        {"host": "a", "local_devices": [0], "nccl_socket_ifname": "lo", "path": "/p"},
        {"host": "b", "local_devices": [0], "nccl_socket_ifname": "lo", "path": "/p",
         "ssh": {"user": "u", "options": ["connecttimeout=3"]}},
    ],
}


def test_every_remote_worker_gets_the_bound_unless_it_sets_its_own():
    out = cluster_with_connect_bound(CLUSTER, 10, frozenset({"ctl"}))
    assert [w.get("ssh") for w in out["workers"]] == [
        None, {"options": ["ConnectTimeout=10"]}, {"user": "u", "options": ["connecttimeout=3"]}]
    assert "ssh" not in CLUSTER["workers"][1]  # a copy
    assert cluster_with_connect_bound(CLUSTER, 0) is CLUSTER  # 0: fdl-cli's bytes


def test_the_launched_topology_carries_it_before_the_reuse_option():
    plan = le.prepare_launch(le.LaunchInputs(
        cluster=CLUSTER, project_root="/p", cmd="train", host_user="u", controller_identity="ctl",
        connect_timeout=10, ssh_reuse_dir="/tmp/flodl-ssh-x"), lambda name: ["10.0.0.9"])
    full = json.loads(hex_decode(plan.env["FLODL_INTERNAL_FULL_CLUSTER_JSON"]))
    assert full["workers"][1]["ssh"]["options"] == ["ConnectTimeout=10", "ControlPath=/tmp/flodl-ssh-x/%C"]
    assert "ssh" not in full["workers"][0]
    testing = json.loads(hex_decode(plan.env["FLODL_TESTING_CLUSTER_JSON"]))
    assert "ssh" not in testing["workers"][1]  # test binaries make no ssh


def _tv(**extra):
    w = {"flodl_path": "/p", "flodl_local_devices": [0], "flodl_nccl_socket_ifname": "lo"}
    return {"groups": {"all": ["a", "b"], "flodl_workers": ["a", "b"]},
            "hostvars": {"a": dict(w, ansible_host="10.0.0.2"), "b": dict(w, ansible_host="10.0.0.3")},
            "flodl_controller_host": "10.0.0.1", "flodl_controller_path": "/p", "flodl_cmd": "train",
            "flodl_prebuild": False, **extra}


def test_the_run_model_reads_the_knob_with_its_default(monkeypatch):
    monkeypatch.setenv("FLODL_HOST_NAME", "ctl")
    assert build_context(_tv(), None, ["launch"]).connect_timeout == 10
    assert build_context(_tv(flodl_launch_connect_timeout="2.5"), None, ["launch"]).connect_timeout == 3
    assert build_context(_tv(flodl_launch_connect_timeout=""), None, ["launch"]).connect_timeout == 10
    assert build_context(_tv(flodl_launch_connect_timeout=0), None, ["launch"]).connect_timeout == 0


def test_the_collections_launcher_shaped_ssh_is_bounded_where_the_launcher_is():
    from ansible_collections.flodl.cluster.plugins.module_utils._ssh.ssh import LAUNCHER_DEFAULTS, launcher_argv

    bare = {"host": "a"}
    assert launcher_argv(bare, "true", connect_timeout=10) == [
        "ssh", "-o", "ConnectTimeout=10", *LAUNCHER_DEFAULTS, "--", "a", "true"]
    own = {"host": "b", "ssh": {"options": ["ConnectTimeout=3"]}}
    assert launcher_argv(own, "true", connect_timeout=10) == [
        "ssh", "-o", "ConnectTimeout=3", *LAUNCHER_DEFAULTS, "--", "b", "true"]
    assert launcher_argv(bare, "true") == ["ssh", *LAUNCHER_DEFAULTS, "--", "a", "true"]
