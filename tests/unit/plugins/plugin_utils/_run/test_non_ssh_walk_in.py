"""A worker on a non-ssh Ansible connection (community.docker.docker): refused in fanout, reached by its agent in
walk_in; what assumes flodl's ssh for every worker (preflight's probe, the orphan cleanup, the status count) skips
it and says so."""
from __future__ import annotations

from dataclasses import replace

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.model import Ssh
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.module_utils._preflight import preflight_report as pf_report
from ansible_collections.flodl.cluster.plugins.module_utils._run.run_model import from_model, to_model
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.sshargs import ResolvedConnection, derive_worker_ssh
from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import orphans
from ansible_collections.flodl.cluster.plugins.plugin_utils._preflight import preflight_sweep as sweep
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.processes import SshResult
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import build_context

DOCKER = "community.docker.docker"
FANOUT_REFUSAL = (
    "host box: ansible_connection is 'community.docker.docker': flodl's launcher reaches remote workers "
    "with ssh only; use the ssh connection for this host (or make it the controller's own worker)"
)


def task_vars(devices=(0,), **extra):
    workers = {
        "h1": {"flodl_path": "/srv/proj", "flodl_local_devices": [0], "flodl_nccl_socket_ifname": "eth0",
               "ansible_host": "10.0.0.2"},
        "box": {"flodl_path": "/srv/proj", "flodl_local_devices": devices if devices == "all" else list(devices),
                "flodl_nccl_socket_ifname": "eth0", "ansible_connection": DOCKER, "ansible_host": "c0ffee"},
    }
    tv = {
        "groups": {"all": [*workers, "localhost"], "flodl_workers": list(workers)},
        "hostvars": {**workers, "localhost": {}},
        "flodl_controller_host": "10.0.0.1",
        "flodl_controller_path": "/srv/proj",
        "flodl_cmd": "train",
        "flodl_prebuild": False,
    }
    tv.update(extra)
    return tv


@pytest.fixture(autouse=True)
def controller_env(monkeypatch):
    monkeypatch.setenv("FLODL_HOST_NAME", "ctl")
    monkeypatch.delenv("FLODL_NET_TIMEOUT_SCALE", raising=False)


def test_fanout_still_refuses_a_non_ssh_worker_with_the_same_words():
    for mode in ({}, {"flodl_launch_mode": "fanout"}):
        with pytest.raises(TopologyError) as exc:
            build_context(task_vars(**mode), None, ["preflight", "launch"])
        assert exc.value.per_host == {"box": [FANOUT_REFUSAL]}
    # the refusal's own text, unchanged
    assert derive_worker_ssh("box", ResolvedConnection(connection=DOCKER)).problems == [
        FANOUT_REFUSAL]


@pytest.mark.parametrize("phases", [["preflight", "launch"], ["launch"], ["preflight"], ["teardown"]])
def test_walk_in_accepts_it_and_records_the_connection(phases):
    ctx = build_context(task_vars(flodl_launch_mode="walk_in"), None, phases)
    assert ctx.ansible_only == {"box": DOCKER}
    box = next(w for w in ctx.cluster.workers if w.host == "box")
    assert box.ssh is None  # nothing derived from a connection flodl's ssh never uses
    assert ctx.reached_by_ansible(box.host) == DOCKER and ctx.reached_by_ansible("h1") is None


def test_walk_in_keeps_a_declared_flodl_ssh_as_written():
    tv = task_vars(flodl_launch_mode="walk_in")
    tv["hostvars"]["box"]["flodl_ssh"] = {"port": 2222}
    box = build_context(tv, None, ["launch"]).cluster.workers[1]
    assert box.ssh == Ssh(port=2222)


def test_walk_in_refuses_all_devices_on_a_non_ssh_worker():
    with pytest.raises(TopologyError) as exc:
        build_context(task_vars("all", flodl_launch_mode="walk_in"), None, ["preflight", "launch"])
    (problem,) = exc.value.per_host["box"]
    assert problem.startswith("host box: flodl_local_devices is 'all', but this worker is reached by "
                              "Ansible's community.docker.docker connection, not ssh")
    assert "list its devices explicitly" in problem


def test_the_model_carries_it_to_the_later_steps():
    ctx = build_context(task_vars(flodl_launch_mode="walk_in"), None, ["preflight", "launch"])
    back = from_model(to_model(ctx, ["preflight", "launch"], True, "p"), ["launch"], True, "p", None)
    assert back is not None and back.ansible_only == {"box": DOCKER}
    old = to_model(ctx, ["launch"], True, "p")
    del old["context"]["ansible_only"]  # a model written before the field: none reached by Ansible only
    assert from_model(old, ["launch"], True, "p", None).ansible_only == {}


def test_preflight_skips_its_ssh_probe_and_says_why(monkeypatch):
    ctx = build_context(task_vars(flodl_launch_mode="walk_in"), None, ["preflight", "launch"])
    ctx = replace(ctx, play_hosts=["h1", "box"])
    asked = {}

    def probes(jobs, timeout, max_parallel):
        asked.update(jobs)
        return {h: SshResult(host=h, argv=a, returncode=255, stdout="", stderr="no route", seconds=0.1)
                for h, a in jobs.items()}

    monkeypatch.setattr(sweep, "run_probes", probes)
    found = sweep.sweep(ctx, build_arch=None, build_host_argv=None, timeout=5, max_parallel=2, require_all=True)
    assert list(asked) == ["h1"]  # only the ssh worker was probed
    box = found["hosts"]["box"]
    assert box["status"] == "ok" and box["errors"] == [] and box["warnings"] == []
    assert box["notes"] == ["host box: preflight probe skipped: reached by Ansible's community.docker.docker "
                            "connection, not ssh; checked by its agent's start (its data path, ABI and running "
                            "ranks are not probed before the launch)"]
    assert box["data_path"]["state"] == "unchecked"
    row = pf_report.summary_row(box)
    assert row.problem  # shown on its own line, not folded with the healthy hosts
    assert "probe skipped: reached by Ansible's community.docker.docker connection, not ssh" in row.line
    assert found["hosts"]["h1"]["status"] != "ok"  # the ssh worker is judged as before


def test_orphan_cleanup_skips_it_by_name(monkeypatch):
    ctx = build_context(task_vars(flodl_launch_mode="walk_in"), None, ["teardown"])
    ctx = replace(ctx, play_hosts=["h1", "box"])
    monkeypatch.setattr(orphans.launch_io, "read_envelope", lambda *_a: (None, None))
    per_host, targets, _source = orphans.targets_of(ctx, None, None)
    assert "box" not in targets
    assert per_host["box"]["status"] == "skipped"
    assert "reached by Ansible's community.docker.docker connection, not ssh" in per_host["box"]["msg"]


def test_its_name_is_not_looked_up_for_the_launchers_extra_hosts():
    from ansible_collections.flodl.cluster.plugins.module_utils._launch import launch_env as le

    asked = []

    def resolve(name):
        asked.append(name)
        raise OSError(f"Name or service not known: {name}")

    ctx = build_context(task_vars(flodl_launch_mode="walk_in"), None, ["launch"])
    inputs = le.LaunchInputs(cluster=ctx.cluster.document, project_root="/srv/proj", cmd="train", host_user="alice",
                             ansible_only=frozenset(ctx.ansible_only))
    plan = le.prepare_launch(inputs, resolve)
    assert "box" not in asked and not any("'box'" in w for w in plan.warnings), (asked, plan.warnings)
    assert any("'box'" in w for w in le.prepare_launch(replace(inputs, ansible_only=frozenset()), resolve).warnings)
