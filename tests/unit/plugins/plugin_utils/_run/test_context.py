"""build_context: inventory task_vars -> validated RunContext, before any host is contacted."""
from __future__ import annotations

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.model import Ssh
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import RunContext, build_context

WORKERS = {
    "ctl-box": {
        "flodl_host": "gpu-a",
        "flodl_path": "/opt/proj",
        "flodl_local_devices": [0, 1],
        "flodl_nccl_socket_ifname": "enp1s0",
        "unrelated_var": "ignored",
    },
    "gpu-b": {
        "flodl_path": "/srv/proj",
        "flodl_local_devices": "all",
        "flodl_nccl_socket_ifname": "enp1s0",
        "flodl_arch": "precompiled/rocm70",
        "ansible_host": "10.0.0.12",
        "ansible_user": "alice",
    },
    "gpu-c": {
        "flodl_path": "/srv/proj",
        "flodl_local_devices": [0],
        "flodl_nccl_socket_ifname": "enp1s0",
        "flodl_arch": "precompiled/cu128",
    },
}


def task_vars(workers=None, order=("gpu-c", "ctl-box", "gpu-b"), **extra):
    workers = WORKERS if workers is None else workers
    tv = {
        "groups": {"all": list(workers) + ["localhost"], "flodl_workers": list(order)},
        "hostvars": {**{k: dict(v) for k, v in workers.items()}, "localhost": {}},
        "flodl_controller_host": "10.0.0.1",
        "flodl_controller_path": "/opt/proj",
        "flodl_cmd": "train",
    }
    tv.update(extra)
    return tv


@pytest.fixture(autouse=True)
def controller_env(monkeypatch):
    monkeypatch.setenv("FLODL_HOST_NAME", " gpu-a ")
    monkeypatch.delenv("FLODL_NET_TIMEOUT_SCALE", raising=False)


def problems(tv, phases):
    with pytest.raises(TopologyError) as exc:
        build_context(tv, None, phases)
    return exc.value.problems


def test_full_run_context():
    ctx = build_context(task_vars(flodl_cmd_dir="/ddp-bench/", flodl_fdl_env="cluster"), None, ["preflight", "prebuild", "launch"])
    assert isinstance(ctx, RunContext)
    assert [w.host for w in ctx.cluster.workers] == ["gpu-c", "gpu-a", "gpu-b"]  # group order
    assert ctx.cluster.workers[2].ssh == Ssh(target="10.0.0.12", user="alice")
    assert ctx.cluster.document["workers"][2]["ssh"] == {"target": "10.0.0.12", "user": "alice"}
    assert "unrelated_var" not in ctx.cluster.source
    assert ctx.controller_identity == "gpu-a"
    assert [w.host for w in ctx.remotes] == ["gpu-c", "gpu-b"]
    assert ctx.project_root == "/opt/proj"
    assert ctx.prebuild is True
    assert ctx.cmd == "train"
    assert ctx.cmd_dir == "ddp-bench"
    assert ctx.fdl_env == "cluster"
    assert ctx.build_host == "localhost"
    assert ctx.launch_command is None
    assert ctx.net_timeout_scale is None
    assert ctx.cluster.controller.port == 1337


def test_optional_values():
    tv = task_vars(flodl_fdl_env="  ", flodl_build_host="builder", flodl_launch_command="fdl train", flodl_cmd_dir=None)
    tv["hostvars"]["builder"] = {}
    ctx = build_context(tv, None, ["launch"])
    assert ctx.fdl_env is None
    assert ctx.build_host == "builder"
    assert ctx.launch_command == "fdl train"
    assert ctx.cmd_dir == ""


@pytest.mark.parametrize("phases", [["launch"], ["prebuild"], ["preflight", "prebuild", "launch"]])
@pytest.mark.parametrize("cmd", [None, "", "   "])
def test_flodl_cmd_required_for_launch_and_prebuild(phases, cmd):
    tv = task_vars()
    if cmd is None:
        del tv["flodl_cmd"]
    else:
        tv["flodl_cmd"] = cmd
    (msg,) = problems(tv, phases)
    assert msg.startswith("controller: flodl_cmd is required")


def test_flodl_cmd_not_needed_for_preflight_or_teardown_or_skipped_prebuild():
    tv = task_vars()
    del tv["flodl_cmd"]
    assert build_context(tv, None, ["preflight"]).cmd is None
    assert build_context(tv, None, ["teardown"]).cmd is None
    assert build_context({**tv, "flodl_prebuild": False}, None, ["prebuild"]).prebuild is False


def test_arch_required_for_remote_workers_when_prebuilding():
    workers = {k: dict(v) for k, v in WORKERS.items()}
    del workers["gpu-b"]["flodl_arch"]
    (msg,) = problems(task_vars(workers), ["prebuild"])
    assert msg.startswith("host gpu-b (worker 2): flodl_arch is required for prebuild")
    # the controller's own box (gpu-a, no arch) is not built remotely
    assert "gpu-a" not in msg
    # not needed without prebuild, nor for launch alone
    assert build_context(task_vars(workers, flodl_prebuild=False), None, ["prebuild", "launch"]).prebuild is False
    build_context(task_vars(workers), None, ["launch"])


@pytest.mark.parametrize("raw,expected", [("false", False), ("no", False), ("False", False), ("0", False), (0, False),
                                          ("true", True), ("yes", True), (1, True), (True, True)])
def test_flodl_prebuild_text_from_extra_vars(raw, expected):
    assert build_context(task_vars(flodl_prebuild=raw), None, ["launch"]).prebuild is expected


@pytest.mark.parametrize("raw", ["maybe", "", 2, [True]])
def test_flodl_prebuild_must_be_boolean(raw):
    (msg,) = problems(task_vars(flodl_prebuild=raw), ["launch"])
    assert "flodl_prebuild must be true or false" in msg


def test_net_scale_from_variable():
    assert build_context(task_vars(flodl_net_timeout_scale=" 2.0 "), None, ["launch"]).net_timeout_scale == " 2.0 "
    assert build_context(task_vars(flodl_net_timeout_scale=3), None, ["launch"]).net_timeout_scale == "3"


def test_net_scale_from_controller_env(monkeypatch):
    monkeypatch.setenv("FLODL_NET_TIMEOUT_SCALE", "0.5")
    assert build_context(task_vars(), None, ["preflight"]).net_timeout_scale == "0.5"


def test_net_scale_variable_beats_env(monkeypatch):
    monkeypatch.setenv("FLODL_NET_TIMEOUT_SCALE", "abc")
    assert build_context(task_vars(flodl_net_timeout_scale="4"), None, ["launch"]).net_timeout_scale == "4"


@pytest.mark.parametrize("blank", ["", "  "])
def test_blank_net_scale_variable_is_unset(blank, monkeypatch):
    # A survey leaves an optional answer as "": that means unset, not a bad number.
    assert build_context(task_vars(flodl_net_timeout_scale=blank), None, ["preflight"]).net_timeout_scale is None
    monkeypatch.setenv("FLODL_NET_TIMEOUT_SCALE", "")
    (msg,) = problems(task_vars(), ["preflight"])
    assert msg.startswith("controller: controller environment FLODL_NET_TIMEOUT_SCALE:")


@pytest.mark.parametrize("bad", ["0.05", "inf", "1_0", "abc"])
def test_bad_net_scale_variable(bad):
    (msg,) = problems(task_vars(flodl_net_timeout_scale=bad), ["preflight"])
    assert msg.startswith("controller: flodl_net_timeout_scale: FLODL_NET_TIMEOUT_SCALE=")


def test_bad_net_scale_from_env_names_the_env(monkeypatch):
    monkeypatch.setenv("FLODL_NET_TIMEOUT_SCALE", "-1")
    (msg,) = problems(task_vars(), ["teardown"])
    assert msg.startswith("controller: controller environment FLODL_NET_TIMEOUT_SCALE:")


def test_controller_identity_from_env_decides_remotes(monkeypatch):
    monkeypatch.setenv("FLODL_HOST_NAME", "gpu-b")
    ctx = build_context(task_vars(), None, ["launch"])
    assert ctx.controller_identity == "gpu-b"
    assert [w.host for w in ctx.remotes] == ["gpu-c", "gpu-a"]
    # gpu-a is now a remote without flodl_arch: prebuild must say so
    (msg,) = problems(task_vars(), ["prebuild"])
    assert msg.startswith("host gpu-a (worker 1): flodl_arch is required for prebuild")


def test_blank_host_name_override_falls_back_to_hostname(monkeypatch):
    import shutil
    import subprocess

    monkeypatch.setenv("FLODL_HOST_NAME", "   ")
    real = "unknown-host"
    if shutil.which("hostname"):
        real = subprocess.run(["hostname"], capture_output=True, text=True, check=False).stdout.strip() or real
    assert build_context(task_vars(), None, ["launch"]).controller_identity == real


def test_every_problem_reported_together(monkeypatch):
    monkeypatch.setenv("FLODL_NET_TIMEOUT_SCALE", "nan")
    workers = {k: dict(v) for k, v in WORKERS.items()}
    workers["gpu-b"]["flodl_env"] = {"CUDA_VISIBLE_DEVICES": "0"}
    del workers["gpu-c"]["flodl_arch"]
    tv = task_vars(workers)
    del tv["flodl_cmd"]
    del tv["flodl_controller_path"]
    msgs = problems(tv, ["preflight", "prebuild", "launch"])
    assert len(msgs) == 5, msgs
    joined = "\n".join(msgs)
    for fragment in ("flodl_controller_path", "CUDA_VISIBLE_DEVICES", "FLODL_NET_TIMEOUT_SCALE", "flodl_cmd", "host gpu-c"):
        assert fragment in joined


def test_empty_worker_group():
    tv = task_vars(order=())
    (msg,) = problems(tv, ["preflight"])
    assert msg.startswith("cluster: group flodl_workers: is empty; add one inventory host per worker")
    # a gang phase (the playbook then runs on localhost) says so whatever else is set
    (msg,) = problems(tv, ["launch"])
    assert msg.startswith("cluster: group flodl_workers is empty or missing, so there is no worker to launch for")


def test_templar_is_applied_to_cluster_and_worker_vars():
    class Templar:
        def template(self, value):
            return value.replace("{{ root }}", "/opt/proj") if isinstance(value, str) else value

    workers = {k: dict(v) for k, v in WORKERS.items()}
    workers["gpu-c"]["flodl_path"] = "{{ root }}/c"
    ctx = build_context(task_vars(workers, flodl_controller_path="{{ root }}"), Templar(), ["launch"])
    assert ctx.project_root == "/opt/proj"
    assert ctx.cluster.workers[0].path == "/opt/proj/c"


def test_build_host_must_be_in_the_inventory():
    (msg,) = problems(task_vars(flodl_build_host="ghost"), ["prebuild"])
    assert msg.startswith("controller: flodl_build_host 'ghost' is not an inventory host")
    assert build_context(task_vars(flodl_build_host="ghost", flodl_prebuild=False), None, ["launch"]).prebuild is False


@pytest.mark.parametrize("phases", [["prebuild"], ["launch"], ["preflight", "prebuild", "launch"]])
def test_gang_phases_refuse_a_limited_play(phases):
    (msg,) = problems(task_vars(ansible_play_hosts_all=["gpu-c"]), phases)
    assert msg.startswith("cluster: this play runs on 1 of 3 workers; missing ctl-box, gpu-b")
    assert "preflight and teardown accept a limit" in msg


@pytest.mark.parametrize("phases", [["preflight"], ["teardown"]])
def test_preflight_and_teardown_honour_a_limit(phases):
    ctx = build_context(task_vars(ansible_play_hosts_all=["gpu-b"]), None, phases)
    assert ctx.play_hosts == ("gpu-b",)
    assert [w.host for w in ctx.cluster.workers if ctx.in_play(w.host)] == ["gpu-b"]


def test_connection_problems_are_reported_with_the_rest():
    workers = {k: dict(v) for k, v in WORKERS.items()}
    workers["gpu-b"]["ansible_ssh_extra_args"] = "-F /etc/other"
    workers["gpu-c"]["ansible_password"] = "hunter2"
    workers["ctl-box"]["ansible_connection"] = "local"  # the controller's own box: never reached over ssh
    msgs = problems(task_vars(workers), ["preflight"])
    assert len(msgs) == 2, msgs
    assert msgs[0].startswith("host gpu-c: a password is set")
    assert "hunter2" not in "\n".join(msgs)
    assert msgs[1].startswith("host gpu-b: ansible_ssh_extra_args: -F is not supported")


@pytest.mark.parametrize(
    "extra,fragment",
    [
        ({"flodl_cmd": "train;id"}, "controller: flodl_cmd 'train;id' contains"),
        ({"flodl_cmd": "-x"}, "controller: flodl_cmd '-x' starts with '-'"),
        ({"flodl_cmd_dir": "../../.."}, "controller: flodl_cmd_dir '../../..' climbs out of the project root"),
    ],
)
def test_hostile_command_and_directory_are_refused(extra, fragment):
    (msg,) = problems(task_vars(**extra), ["launch"])
    assert msg.startswith(fragment), msg


def test_hostile_worker_values_are_refused_before_contact():
    workers = {k: dict(v) for k, v in WORKERS.items()}
    workers["gpu-b"]["flodl_host"] = "-oProxyCommand=touch /tmp/p"
    workers["gpu-c"]["flodl_arch"] = "../../../../usr"
    msgs = problems(task_vars(workers), ["preflight"])
    joined = "\n".join(msgs)
    assert "flodl_host '-oProxyCommand=touch /tmp/p' starts with '-'" in joined
    assert "host gpu-c (worker 0): flodl_arch '../../../../usr' climbs out of <path>/libtorch/" in joined


def test_an_env_value_too_big_for_exec_is_refused_up_front():
    (msg,) = problems(task_vars(flodl_cluster_env={"BLOB": "x" * 200_000}), ["launch"])
    assert msg.startswith("cluster: flodl_cluster_env: variable 'BLOB' is 200006 bytes as KEY=VALUE")
    assert "x" * 50 not in msg


def test_survey_strings_are_booleans_never_commands():
    assert build_context(task_vars(flodl_prebuild="False"), None, ["launch"]).prebuild is False
    (msg,) = problems(task_vars(flodl_prebuild="rm -rf /"), ["launch"])
    assert "flodl_prebuild must be true or false" in msg


def test_a_play_on_another_host_speaks_for_every_worker():
    # e.g. a runbook play on localhost calling flodl.cluster.topology: no limit can be told there.
    ctx = build_context(task_vars(ansible_play_hosts_all=["localhost"], inventory_hostname="localhost"), None,
                        ["prebuild"])
    assert ctx.play_hosts == ("gpu-c", "ctl-box", "gpu-b")


# ------------------------------------------------------------------ the roles' argument specs, in one pass

def test_phase_options_are_the_union_of_the_roles_specs():
    import yaml
    from pathlib import Path

    from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import phase_options

    roles = Path(__file__).resolve().parents[5] / "roles"
    union = phase_options(["preflight", "prebuild", "launch"])
    for role in ("preflight", "prebuild", "launch"):
        options = yaml.safe_load((roles / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
        for name, spec in options.items():
            assert union[name]["type"] == spec.get("type", "str"), (role, name)  # one definition per name
            if spec.get("required"):
                assert union[name]["required"] is True, (role, name)
    assert set(phase_options(["preflight"])) < set(union)
    assert phase_options(["teardown"]) == {}


def test_spec_problem_only_the_spec_knows_is_reported_on_its_worker(monkeypatch):
    from ansible_collections.flodl.cluster.plugins.plugin_utils._run import run_reader, run_rules

    def strict(phases):
        return {**run_rules.argspec.union_options([run_rules.role_options("preflight")]),
                "flodl_widgets": {"type": "int"}}  # a worker option our own rules do not know

    monkeypatch.setattr(run_rules, "phase_options", strict)
    widened = (*run_rules.WORKER_VARS, "flodl_widgets")
    monkeypatch.setattr(run_rules, "WORKER_VARS", widened)
    assert run_reader.rules.WORKER_VARS is widened
    workers = {k: dict(v) for k, v in WORKERS.items()}
    workers["gpu-b"]["flodl_widgets"] = "many"
    with pytest.raises(TopologyError) as exc:
        build_context(task_vars(workers), None, ["preflight"])
    assert exc.value.per_host == {"gpu-b": [exc.value.problems[-1]]}
    assert exc.value.problems[-1].startswith("host gpu-b: argument 'flodl_widgets' is of type")


def test_the_runs_own_rules_win_over_the_spec_for_the_same_variable():
    workers = {k: dict(v) for k, v in WORKERS.items()}
    workers["gpu-b"]["flodl_tunnel"] = "maybe"
    with pytest.raises(TopologyError) as exc:
        build_context(task_vars(workers), None, ["preflight"])
    assert [p for p in exc.value.problems if "flodl_tunnel" in p] == [
        p for p in exc.value.problems if p.startswith("host gpu-b (worker 2): flodl_tunnel")]
    assert "argument 'flodl_tunnel'" not in "\n".join(exc.value.problems)
    # ... and the problem is still that worker's own.
    assert exc.value.per_host is not None and list(exc.value.per_host) == ["gpu-b"]


def test_run_level_problems_belong_to_no_worker():
    with pytest.raises(TopologyError) as exc:
        build_context(task_vars(flodl_cmd=None), None, ["launch"])
    assert exc.value.per_host is None
    assert any(p.startswith("controller: flodl_cmd is required") for p in exc.value.problems)


def test_a_problem_belongs_to_its_worker_by_value_not_by_its_text():
    """A worker named like another worker's message is still attributed by the problem's own worker field."""
    workers = {k: dict(v) for k, v in WORKERS.items()}
    names = list(workers)
    # The first worker's logical name mimics a message about the last one; the last one's devices are bad.
    workers[names[0]]["flodl_host"] = f"{names[-1]} (worker 0)"
    workers[names[-1]]["flodl_local_devices"] = "half"
    with pytest.raises(TopologyError) as exc:
        build_context(task_vars(workers), None, ["preflight"])
    per_host = exc.value.per_host or {}
    assert any("flodl_local_devices" in p for p in per_host.get(names[-1], [])), per_host
    assert not any("flodl_local_devices" in p for p in per_host.get(names[0], [])), per_host


def test_refusal_attributes_problems_by_their_worker_index():
    from ansible_collections.flodl.cluster.plugins.module_utils._core.problems import worded
    from ansible_collections.flodl.cluster.plugins.plugin_utils._run.run_reader import _refusal

    problem = "host -oProxyCommand=touch /tmp/x (worker 1): flodl_host starts with '-'"
    exc = _refusal([worded(problem, 1), worded("controller: flodl_cmd is required")], ["h1", "h2"])
    assert exc.per_host == {"h2": [problem]}
    assert exc.problems == [problem, "controller: flodl_cmd is required"]
    assert _refusal([worded("cluster: x")], ["h1"]).per_host is None


def test_a_phase_that_reaches_no_worker_resolves_no_connection():
    """prebuild (read_run(..., connections=False)): no worker's connection is read, flodl_ssh still counts."""
    from ansible_collections.flodl.cluster.plugins.module_utils._ssh.sshargs import ResolvedConnection

    workers = {k: dict(v) for k, v in WORKERS.items()}
    workers["gpu-b"]["ansible_ssh_extra_args"] = "-F /etc/cfg"  # refused by phases that ssh, unread here
    workers["gpu-c"]["flodl_ssh"] = {"port": 2222}
    asked = []

    def resolve(name, _vars):
        asked.append(name)
        return ResolvedConnection()

    ctx = build_context(task_vars(workers), None, ["prebuild"], resolve)
    by_host = {w.host: w for w in ctx.cluster.workers}
    assert by_host["gpu-c"].ssh == Ssh(port=2222)
    assert by_host["gpu-b"].ssh is None
    assert sorted(asked) == ["gpu-b", "gpu-c"]  # the controller's own box is never asked
    with pytest.raises(TopologyError) as exc:  # the same inventory, read as a phase that reaches the workers
        build_context(task_vars(workers), None, ["preflight"])
    assert any("-F" in p for p in exc.value.problems)
