"""One run model per run: built (validated, every worker's connection resolved) once, taken back by later phases."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._run.run_model import RESULT_KEY, TRACE_KEY
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.sshargs import ResolvedConnection
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.plugin_utils._run import context, run_handoff

TOKEN = "0123456789abcdef0123456789abcdef"
WORKERS = {
    name: {"flodl_path": "/srv/proj", "flodl_local_devices": [0], "flodl_nccl_socket_ifname": "eth0",
           "flodl_arch": "precompiled/cu128", "ansible_host": f"10.0.0.{i}"}
    for i, name in enumerate(["h1", "h2", "h3"], start=11)
}


def task_vars(**extra):
    tv = {
        "inventory_hostname": "h1",
        "ansible_play_hosts_all": ["h1", "h2", "h3"],
        "groups": {"all": list(WORKERS), "flodl_workers": list(WORKERS)},
        "hostvars": {k: dict(v) for k, v in WORKERS.items()},
        "flodl_controller_host": "10.0.0.1", "flodl_controller_path": "/srv/proj", "flodl_cmd": "train",
        "flodl_controller_join": {"token": TOKEN},
    }
    tv.update(extra)
    return tv


@pytest.fixture(autouse=True)
def controller(monkeypatch):
    """The controller is not a worker; every resolution of a worker's connection is counted."""
    monkeypatch.setenv("FLODL_HOST_NAME", "ctl")
    monkeypatch.delenv("FLODL_NET_TIMEOUT_SCALE", raising=False)
    asked: list[str] = []

    class Connections:
        def __init__(self, *_args):
            pass

        def resolve(self, host_vars):
            asked.append(host_vars["ansible_host"])
            return ResolvedConnection(connection="ssh", host=host_vars["ansible_host"])

    monkeypatch.setattr(context, "AnsibleConnections", Connections)
    return asked


def action():
    return SimpleNamespace(_play_context=SimpleNamespace(become=False, password=None), _templar=None,
                           _task=SimpleNamespace())


def first_step(tv, phases=("preflight", "prebuild", "launch")):
    ctx = context.read_run(action(), tv, list(phases))
    return ctx, run_handoff.fields(ctx)


def test_a_cluster_train_resolves_each_worker_once_and_validates_once(controller):
    tv = task_vars()
    ctx, result = first_step(tv)
    assert result[TRACE_KEY] == {"source": "built", "validations": 1, "connections_resolved": 3}
    assert sorted(controller) == ["10.0.0.11", "10.0.0.12", "10.0.0.13"]
    model = result[RESULT_KEY]
    assert json.loads(json.dumps(model)) == model  # plain data
    assert TOKEN not in json.dumps(model)  # the join token stays out of registered results
    tv["flodl_preflight_run"] = {"per_host": {}, **result}  # registered by the preflight role, on every host
    # prebuild, launch and the launch role's cleanup: the same model, nothing read or resolved again.
    for phases, connections in ((["prebuild"], False), (["launch"], True), (["teardown"], True)):
        later = context.read_run(action(), tv, phases, connections=connections)
        assert later == ctx
        assert later.cluster.controller.join.token == TOKEN
        assert run_handoff.fields(later) == {TRACE_KEY: {"source": "flodl_preflight_run", "validations": 0,
                                                         "connections_resolved": 0}}
    assert len(controller) == 3  # one resolution per worker for the whole run
    total = [result[TRACE_KEY]] + [run_handoff.fields(context.read_run(action(), tv, ["launch"]))[TRACE_KEY]]
    assert sum(t["validations"] for t in total) == 1


def _rebuilt(tv, phases=("launch",)):
    return context.read_run(action(), tv, list(phases)).trace["source"] == "built"


def test_a_model_of_another_run_or_other_inputs_is_not_taken(monkeypatch):
    tv = task_vars()
    _ctx, result = first_step(tv)
    tv["flodl_preflight_run"] = dict(result)
    assert not _rebuilt(tv)
    assert _rebuilt({**tv, "flodl_cmd": "eval"})  # a run-level variable changed since
    assert _rebuilt({**tv, "ansible_play_hosts_all": ["h1", "h2"]}, ("teardown",))  # another play
    assert _rebuilt({**tv, "flodl_controller_join": {"token": "f" * 32}})
    monkeypatch.setattr(run_handoff, "run_nonce", lambda: "1:2")  # another ansible-playbook run
    assert _rebuilt(tv)


def test_a_model_that_does_not_cover_the_phase_or_has_the_wrong_shape_is_not_taken():
    tv = task_vars()
    _ctx, result = first_step(tv, ("preflight",))
    assert not _rebuilt({**tv, "flodl_preflight_run": result}, ("preflight",))
    assert _rebuilt({**tv, "flodl_preflight_run": result}, ("launch",))  # launch's rules were not checked
    model = result[RESULT_KEY]
    for broken in ({**model, "version": 99}, {**model, "connections": False},
                   {**model, "context": {**model["context"], "connect_timeout": "10"}},
                   {**model, "context": {**model["context"], "cluster": {"workers": "h1"}}},
                   {**model, "context": {**model["context"], "inventory_names": {"h1": 3}}},
                   "not a model"):
        assert _rebuilt({**tv, "flodl_preflight_run": {RESULT_KEY: broken}}, ("preflight",)), broken


def test_the_typed_cluster_comes_back_the_same_value():
    tv = task_vars(flodl_cluster_env={"A": "1"})
    tv["hostvars"]["h2"].update(flodl_local_devices="all", flodl_env={"W": "2"}, flodl_ssh={"options": ["X=1"]})
    ctx, result = first_step(tv)
    later = context.read_run(action(), {**tv, "flodl_preflight_run": result}, ["launch"])
    assert later.trace["source"] == "flodl_preflight_run"
    assert later.cluster == ctx.cluster and later == ctx
    assert later.cluster.workers[1].all_devices and later.cluster.workers[1].ssh.options == ("X=1",)
    assert later.cluster.document == ctx.cluster.document  # the renderers' input, unchanged by the trip


@pytest.mark.parametrize("where, value", [
    ("workers.0.local_devices", "some"), ("workers.0.local_devices", ["0"]), ("workers.1.env", {"W": 2}),
    ("workers.2.ssh", "10.0.0.13"), ("controller.port", "1337"), ("controller.host", None),
    ("controller.join", "token"), ("env", ["A=1"]), ("workers.0", "h1"),
])
def test_a_malformed_handed_back_cluster_is_refused(where, value):
    tv = task_vars()
    tv["hostvars"]["h2"]["flodl_env"] = {"W": "2"}
    _ctx, result = first_step(tv)
    model = json.loads(json.dumps(result[RESULT_KEY]))
    *path, key = [int(p) if p.isdigit() else p for p in where.split(".")]
    target = model["context"]["cluster"]
    for part in path:
        target = target[part]
    target[key] = value
    assert _rebuilt({**tv, "flodl_preflight_run": {RESULT_KEY: model}}), where


def test_a_step_that_reaches_no_worker_resolves_nothing_and_hands_nothing_on(controller):
    ctx = context.read_run(action(), task_vars(), ["prebuild"], connections=False)
    assert controller == [] and ctx.trace["connections_resolved"] == 0
    assert RESULT_KEY not in run_handoff.fields(ctx)  # its ssh blocks are not the workers' real ones


def test_the_launch_playbooks_first_step_hands_its_model_on():
    tv = task_vars()
    _ctx, result = first_step(tv, ("launch",))
    later = context.read_run(action(), {**tv, "flodl_topology_run": result}, ["launch"])
    assert later.trace["source"] == "flodl_topology_run"


def test_a_later_step_that_becomes_is_refused_though_a_model_was_handed_on(controller):
    """Its become is its own (a become keyword on the launch role): the model is not taken, each worker refused."""
    tv = task_vars()
    _ctx, result = first_step(tv)
    tv["flodl_preflight_run"] = {"per_host": {}, **result}
    becoming = SimpleNamespace(
        _play_context=SimpleNamespace(become=True, become_user="nobody", become_method=None, password=None),
        _templar=None, _task=SimpleNamespace(become=True, become_user="nobody", become_method=None))
    with pytest.raises(TopologyError) as exc:
        context.read_run(becoming, tv, ["launch"])
    assert sorted(exc.value.per_host) == sorted(tv["groups"]["flodl_workers"]), exc.value.per_host
    assert all("become_user nobody" in found[0] for found in exc.value.per_host.values())
