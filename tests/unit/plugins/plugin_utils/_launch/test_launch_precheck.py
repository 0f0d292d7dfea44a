"""The launch environment sized before any host is contacted (issue 19): the refusal a preflight step gives."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._launch import launch_size as ls
from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import launch_precheck
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import build_context

PHASES = ["preflight", "prebuild", "launch"]


def _task_vars(pad: int, devices=(0,), **extra):
    workers = {
        f"w{i}": {"ansible_host": f"10.0.0.{i + 10}", "flodl_path": "/srv/proj", "flodl_arch": "precompiled/cu128",
                  "flodl_local_devices": list(devices) if i else "all", "flodl_nccl_socket_ifname": "eth0",
                  **({"flodl_env": {"BIG": "v" * pad}} if i == 1 else {})}
        for i in range(3)
    }
    tv = {"groups": {"flodl_workers": list(workers)}, "hostvars": workers, "flodl_controller_host": "10.0.0.1",
          "flodl_controller_path": "/opt/proj", "flodl_cmd": "train"}
    tv.update(extra)
    return tv


def _action(check: bool = False):
    return SimpleNamespace(_templar=None, _task=SimpleNamespace(check_mode=check))


@pytest.fixture(autouse=True)
def controller_env(monkeypatch):
    monkeypatch.setenv("FLODL_HOST_NAME", "ctl")
    monkeypatch.setenv("USER", "alice")
    monkeypatch.delenv("FLODL_INTERNAL_CLUSTER_JSON", raising=False)
    monkeypatch.delenv("FLODL_INTERNAL_AGENT_JSON", raising=False)


def test_a_topology_too_long_even_compact_is_refused_before_contact_naming_variable_size_limit():
    tv = _task_vars(70_000)  # one value: fine for a rank's own exec, twice that once hex-encoded in the topology
    ctx = build_context(tv, None, PHASES)
    found = launch_precheck.size_problems(_action(), tv, ctx, PHASES)
    assert len(found) >= 1
    first = found[0]
    assert first.startswith(f"controller: variable {ls.FULL_CLUSTER_JSON} is too long even as compact JSON")
    assert str(ls.MAX_ARG_STRLEN) in first and "flodl_ssh_reuse: false" in first


def test_a_run_that_fits_passes_and_a_play_that_does_not_launch_is_not_sized():
    tv = _task_vars(100)
    ctx = build_context(tv, None, PHASES)
    assert launch_precheck.size_problems(_action(), tv, ctx, PHASES) == []
    big = _task_vars(70_000)
    assert launch_precheck.size_problems(_action(), big, build_context(big, None, ["preflight"]), ["preflight"]) == []


def test_all_workers_count_one_rank_of_their_variant_before_contact():
    tv = _task_vars(0)
    ctx = build_context(tv, None, PHASES)
    assert launch_precheck.one_rank_each(ctx) == {"w0": (1, 0)}


def test_the_reuse_directory_stand_in_has_the_length_of_the_real_one():
    import os
    import tempfile

    from ansible_collections.flodl.cluster.plugins.module_utils._ssh.sshreuse import DIR_PREFIX
    from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import sshreuse_io

    real = tempfile.mkdtemp(prefix=DIR_PREFIX)  # as make_dir names it (without its watcher)
    try:
        assert len(sshreuse_io.expected_dir()) == len(real)
    finally:
        os.rmdir(real)


def _many(count: int, **extra):
    workers = {
        f"gpu-{i:04d}": {"ansible_host": f"10.1.{i // 250}.{i % 250 + 1}", "flodl_path": "/srv/cluster/projects/train",
                         "flodl_arch": "precompiled/cu128", "flodl_local_devices": [0, 1, 2, 3],
                         "flodl_nccl_socket_ifname": "enp65s0f0"}
        for i in range(count)
    }
    tv = {"groups": {"flodl_workers": list(workers)}, "hostvars": workers, "flodl_controller_host": "10.0.0.1",
          "flodl_controller_path": "/srv/cluster/projects/train", "flodl_cmd": "train"}
    tv.update(extra)
    return tv


def test_the_size_check_is_the_modes_own_a_fan_out_too_large_is_refused_naming_walk_in_which_fits():
    """Issue 37: fanout's one-string topology caps it near 128 workers; a walk-in launcher gets no roster."""
    fanout = _many(400)
    found = launch_precheck.size_problems(_action(), fanout, build_context(fanout, None, PHASES), PHASES)
    assert found and "flodl_launch_mode: walk_in" in found[0], found
    walk_in = _many(500, flodl_launch_mode="walk_in")
    assert launch_precheck.size_problems(_action(), walk_in, build_context(walk_in, None, PHASES), PHASES) == []
