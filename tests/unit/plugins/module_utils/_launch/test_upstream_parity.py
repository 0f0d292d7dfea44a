"""fdl-cli parity for run: scripts (E11) and the controller's own worker's ssh block (E12), on exact bytes."""
from __future__ import annotations

import json
import shlex

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._fdl import fdl_commands
from ansible_collections.flodl.cluster.plugins.module_utils._launch import launch_env as le
from ansible_collections.flodl.cluster.plugins.module_utils._fdl.fdl_inventory import inventory_from_cluster
from ansible_collections.flodl.cluster.plugins.module_utils._core.hexcodec import hex_decode
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import build_context


def no_names(name: str) -> list[str]:
    raise OSError(f"Name or service not known: {name}")


def cluster(own_ssh: dict | None = None) -> dict:
    own = {"host": "ctl", "local_devices": [0], "nccl_socket_ifname": "lo", "path": "/opt/proj"}
    if own_ssh is not None:
        own["ssh"] = own_ssh
    return {
        "controller": {"host": "10.0.0.1", "port": 1337, "path": "/opt/proj"},
        "workers": [own, {"host": "w1", "local_devices": [0], "nccl_socket_ifname": "lo", "path": "/opt/proj",
                          "ssh": {"identity_file": ".ssh/w1_key"}}],
    }


def plan(**kw):
    inputs = {"cluster": cluster(), "project_root": "/opt/proj", "cmd": "train", "host_user": "u",
              "controller_identity": "ctl", **kw}
    return le.prepare_launch(le.LaunchInputs(**inputs), no_names)


# ---------------------------------------------------------------- run: scripts (E11)


@pytest.mark.parametrize("spec, line", [
    ({"run": "  cargo run --release --bin train  "}, "cargo run --release --bin train"),
    ({"run": "cargo test", "append": "--nocapture"}, "cargo test --nocapture"),
    ({"run": "cargo test", "append": "-- --nocapture"}, "cargo test -- --nocapture"),
    ({"run": "cargo test", "append": "-p x -- --ignored"}, "cargo test -p x -- --ignored"),
    ({"run": "cargo test", "append": "-p x --"}, "cargo test -p x --"),
    ({"run": "cargo test", "append": "--"}, "cargo test --"),
    ({"run": "cargo test", "append": "  "}, "cargo test"),
    ({"entry": "cargo run"}, None),
    ("not a map", None),
])
def test_run_line_is_the_script_with_its_append_halves(spec, line):
    assert fdl_commands.run_line(spec) == line


def test_a_run_compose_launch_is_the_e11_shape_byte_for_byte():
    got = plan(cmd_run="cargo run --release --bin train -- --epochs 'a b'", docker_service="cuda")
    assert got.command == (
        "docker compose run --rm -e FLODL_TESTING_CLUSTER_JSON cuda bash -c "
        "'cargo run --release --bin train -- --epochs '\\''a b'\\'''"
    )
    assert got.cwd == "/opt/proj"
    assert "FDL_PROJECT_ROOT" not in got.command
    # the inner line reaches bash exactly as written: no cd, nothing appended
    assert shlex.split(got.command)[-1] == "cargo run --release --bin train -- --epochs 'a b'"


def test_a_run_compose_launch_gets_the_overlay_and_forwards_the_gpu_survey():
    got = le.prepare_launch(le.LaunchInputs(
        cluster=cluster(), project_root="/opt/proj", cmd="train", host_user="u", controller_identity="ctl",
        cmd_run="make train", docker_service="dev", controller_env={"FLODL_TESTING_GPU_JSON": "{}"},
    ), lambda name: {"w1": ["10.0.0.2"]}[name] if name == "w1" else no_names(name))
    assert got.command == (
        "docker compose -f docker-compose.yml -f /opt/proj/.fdl-cluster-overlay.yml run --rm "
        "-e FLODL_TESTING_CLUSTER_JSON -e FLODL_TESTING_GPU_JSON dev bash -c 'make train'"
    )


def test_a_native_run_script_is_the_line_itself_from_the_checkout():
    got = plan(cmd_run="cargo run --release --bin train", cmd_dir="ignored/for/run", project_dir="/home/me/co")
    assert (got.command, got.cwd) == ("cargo run --release --bin train", "/home/me/co")


def test_entry_commands_keep_the_e8_wrapping():
    got = plan(docker_service="cuda", cmd_dir="ddp")
    assert got.command == (
        "docker compose run --rm -e FDL_PROJECT_ROOT=/workspace -e FLODL_TESTING_CLUSTER_JSON cuda bash -c "
        "'cd /workspace/ddp && cargo run --release --bin train '"
    )


def test_an_explicit_launch_command_still_wins_over_the_run_line():
    assert plan(cmd_run="make train", launch_command="python3 x.py").command == "python3 x.py"


def test_the_inventory_plugin_hands_over_the_run_line_and_the_commands_own_service(tmp_path):
    block = cluster()
    commands = {"train": {"run": "cargo run --release --bin train", "append": "-- --epochs 3", "docker": "cuda",
                          "cluster": True}}
    _workers, got = inventory_from_cluster(block, tmp_path, "cluster", commands=commands)
    assert got["flodl_cmd"] == "train"
    assert got["flodl_cmd_run"] == "cargo run --release --bin train -- --epochs 3"
    assert got["flodl_launch_docker"] == "cuda"
    assert "flodl_cmd_dir" not in got
    # fdl-cli runs a run: script natively when the command names no service, whatever controller.docker says
    native = {"train": {"run": "make train", "cluster": True}}
    _workers, got = inventory_from_cluster({**block, "controller": {**block["controller"], "docker": "cuda"}},
                                           tmp_path, "cluster", commands=native)
    assert (got["flodl_cmd_run"], got["flodl_launch_docker"]) == ("make train", False)
    # a directory pointer has no run line and leaves the launch service to the defaults
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "fdl.yml").write_text("entry: cargo run\n")
    _workers, got = inventory_from_cluster(block, tmp_path, "cluster", commands={"train": {"cluster": True}})
    assert "flodl_cmd_run" not in got and "flodl_launch_docker" not in got and got["flodl_cmd_dir"] == "train"


# ---------------------------------------------------------------- the controller's own ssh block (E12)


def test_the_controllers_own_worker_keeps_its_declared_ssh_block_in_both_variables():
    got = plan(cluster=cluster(own_ssh={"identity_file": ".ssh/rel_key"}), project_dir="/home/me/co")
    full = json.loads(hex_decode(got.env["FLODL_INTERNAL_FULL_CLUSTER_JSON"]))
    testing = json.loads(hex_decode(got.env["FLODL_TESTING_CLUSTER_JSON"]))
    # rewritten as for any worker: joined to the launcher's root in the full topology ...
    assert full["workers"][0]["ssh"] == {"identity_file": "/home/me/co/.ssh/rel_key"}
    assert full["workers"][1]["ssh"] == {"identity_file": "/home/me/co/.ssh/w1_key"}
    # ... and as declared in the testing JSON, as the other workers are
    assert testing["workers"][0]["ssh"] == {"identity_file": ".ssh/rel_key"}
    assert testing["workers"][1]["ssh"] == {"identity_file": ".ssh/w1_key"}
    assert '"ssh": {\n        "identity_file": "/home/me/co/.ssh/rel_key"\n      }' in got.topology_json


def test_a_compose_launch_rewrites_the_own_block_to_the_container_root():
    got = plan(cluster=cluster(own_ssh={"identity_file": ".ssh/rel_key"}), docker_service="cuda")
    full = json.loads(hex_decode(got.env["FLODL_INTERNAL_FULL_CLUSTER_JSON"]))
    assert full["workers"][0]["ssh"] == {"identity_file": "/workspace/.ssh/rel_key"}


def _task_vars(own: dict) -> dict:
    workers = {
        "ctl": {"flodl_path": "/opt/proj", "flodl_local_devices": [0], "flodl_nccl_socket_ifname": "lo", **own},
        "w1": {"flodl_path": "/opt/proj", "flodl_local_devices": [0], "flodl_nccl_socket_ifname": "lo",
               "ansible_host": "10.0.0.2"},
    }
    return {
        "groups": {"all": [*workers, "localhost"], "flodl_workers": list(workers)},
        "hostvars": {**workers, "localhost": {}},
        "flodl_controller_host": "10.0.0.1", "flodl_controller_path": "/opt/proj", "flodl_cmd": "train",
        "flodl_prebuild": False,
    }


def test_the_run_model_keeps_the_own_declared_block_and_derives_none_from_its_connection(monkeypatch):
    monkeypatch.setenv("FLODL_HOST_NAME", "ctl")
    declared = build_context(_task_vars({"flodl_ssh": {"identity_file": ".ssh/rel_key"}, "ansible_port": 2222}),
                             None, ["launch"])
    assert declared.cluster.document["workers"][0]["ssh"] == {"identity_file": ".ssh/rel_key"}
    undeclared = build_context(_task_vars({"ansible_host": "10.0.0.1", "ansible_user": "bob"}), None, ["launch"])
    assert "ssh" not in undeclared.cluster.document["workers"][0]
    empty = build_context(_task_vars({"flodl_ssh": {}}), None, ["launch"])
    assert empty.cluster.document["workers"][0]["ssh"] == {}


def test_the_run_model_reads_the_run_line(monkeypatch):
    monkeypatch.setenv("FLODL_HOST_NAME", "ctl")
    ctx = build_context({**_task_vars({}), "flodl_cmd_run": "  make train  "}, None, ["launch"])
    assert ctx.cmd_run == "make train"
    assert build_context({**_task_vars({}), "flodl_cmd_run": ""}, None, ["launch"]).cmd_run is None
