"""Prebuild planning: commands byte-exact, environment, dedupe, envelope, failure report."""
from __future__ import annotations

import json
import shlex

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._run.prebuild import PrebuildError, plan_prebuild
from ansible_collections.flodl.cluster.plugins.module_utils._run.prebuild_layout import (
    binary_subpath,
    cargo_build_command,
    controller_variant_dir,
    docker_build_command,
    envelope_entry,
    envelope_json,
    target_subdir,
)
from ansible_collections.flodl.cluster.plugins.module_utils._prebuild.prebuild_failures import (
    HostFailure,
    format_failure,
    format_failures,
    missing_variant_reason,
    tail_lines,
)

ROOT = "/srv/proj"


def w(host: str, arch: str | None, path: str = "/data/proj") -> dict:
    out = {"host": host, "path": path}
    if arch is not None:
        out["arch"] = arch
    return out


# --------------------------------------------------------------------------
# paths
# --------------------------------------------------------------------------


def test_target_subdir_is_per_host_and_variant_slug() -> None:
    assert target_subdir("gpu-b", "precompiled/cu128") == "target/cluster/gpu-b/precompiled-cu128"
    assert target_subdir("gpu-b", "builds\\sm61-sm120") == "target/cluster/gpu-b/builds-sm61-sm120"
    assert target_subdir("gpu-b", "cpu") == "target/cluster/gpu-b/cpu"
    assert target_subdir("gpu-b", "precompiled/cu118") != target_subdir("gpu-b", "precompiled/cu128")
    assert binary_subpath("gpu-b", "precompiled/cu128", "train") == (
        "target/cluster/gpu-b/precompiled-cu128/release/train"
    )


def test_controller_variant_dir_trims_trailing_slash() -> None:
    assert controller_variant_dir("/srv/proj/", "precompiled/cu128") == "/srv/proj/libtorch/precompiled/cu128"
    assert controller_variant_dir("/", "cpu") == "/libtorch/cpu"


# --------------------------------------------------------------------------
# commands
# --------------------------------------------------------------------------


def test_docker_command_byte_exact_with_features() -> None:
    assert docker_build_command("cuda", "train", "", "target/cluster/h1/precompiled-cu128", "cuda") == (
        "docker compose run --rm cuda bash -c "
        "'cd /workspace && CARGO_TARGET_DIR=/workspace/target/cluster/h1/precompiled-cu128 "
        "cargo build --release --features cuda --bin train'"
    )


def test_docker_command_cpu_has_no_features_and_cmd_dir_is_entered() -> None:
    assert docker_build_command("dev", "ddp-bench", "/bench/", "target/cluster/h2/precompiled-cpu", "") == (
        "docker compose run --rm dev bash -c "
        "'cd /workspace/bench && CARGO_TARGET_DIR=/workspace/target/cluster/h2/precompiled-cpu "
        "cargo build --release --bin ddp-bench'"
    )


def test_docker_command_quotes_odd_names_twice() -> None:
    # Inner tokens are posix-quoted, then the whole inner script is quoted again for bash -c.
    cmd = docker_build_command("my svc", "it's", "sub dir", "target/cluster/h 1/cu128", "rocm")
    assert cmd == (
        "docker compose run --rm 'my svc' bash -c "
        "'cd '\\''/workspace/sub dir'\\'' && CARGO_TARGET_DIR='\\''/workspace/target/cluster/h 1/cu128'\\'' "
        "cargo build --release --features rocm --bin '\\''it'\\''\\'\\'''\\''s'\\'''"
    )
    outer = shlex.split(cmd)
    assert outer[:7] == ["docker", "compose", "run", "--rm", "my svc", "bash", "-c"]
    assert shlex.split(outer[7]) == [
        "cd",
        "/workspace/sub dir",
        "&&",
        "CARGO_TARGET_DIR=/workspace/target/cluster/h 1/cu128",
        "cargo",
        "build",
        "--release",
        "--features",
        "rocm",
        "--bin",
        "it's",
    ]


def test_native_command_byte_exact() -> None:
    assert cargo_build_command("train", "cuda") == "cargo build --release --features cuda --bin train"
    assert cargo_build_command("train", "") == "cargo build --release --bin train"
    assert cargo_build_command("my bin", "rocm") == "cargo build --release --features rocm --bin 'my bin'"


# --------------------------------------------------------------------------
# plan
# --------------------------------------------------------------------------


def test_native_plan_per_host_command_env_and_dirs() -> None:
    plan = plan_prebuild(
        ROOT, "train", [w("h1", "precompiled/cu128"), w("h2", "precompiled/rocm63")], cmd_dir="trainer"
    )
    assert plan.mode == "native"
    assert [s.host for s in plan.steps] == ["h1", "h2"]
    cu, rocm = plan.steps
    assert cu.command == "cargo build --release --features cuda --bin train"
    assert cu.cwd == "/srv/proj/trainer"
    assert cu.target_dir == "/srv/proj/target/cluster/h1/precompiled-cu128"
    assert cu.binary == "/srv/proj/target/cluster/h1/precompiled-cu128/release/train"
    assert cu.log_path == "/srv/proj/target/cluster/h1/precompiled-cu128/prebuild.log"
    assert cu.env == {
        "LIBTORCH_PATH": "/srv/proj/libtorch/precompiled/cu128",
        "CARGO_TARGET_DIR": "/srv/proj/target/cluster/h1/precompiled-cu128",
        "CUDA_VERSION": "12.8.0",
        "CUDA_TAG": "12.8",
    }
    assert rocm.command == "cargo build --release --features rocm --bin train"
    assert rocm.env == {
        "LIBTORCH_PATH": "/srv/proj/libtorch/precompiled/rocm63",
        "CARGO_TARGET_DIR": "/srv/proj/target/cluster/h2/precompiled-rocm63",
    }
    assert all(isinstance(v, str) for s in plan.steps for v in s.env.values())


def test_docker_plan_runs_from_project_root_with_compose_env() -> None:
    plan = plan_prebuild(
        ROOT + "/", "train", [w("h1", "precompiled/cu118"), w("h2", "precompiled/cpu")], docker_service="cuda"
    )
    assert plan.mode == "docker"
    cu, cpu = plan.steps
    assert cu.cwd == "/srv/proj"
    assert cu.command == (
        "docker compose run --rm cuda bash -c 'cd /workspace && "
        "CARGO_TARGET_DIR=/workspace/target/cluster/h1/precompiled-cu118 cargo build --release --features cuda "
        "--bin train'"
    )
    assert cu.env == {
        "LIBTORCH_HOST_PATH": "/srv/proj/libtorch/precompiled/cu118",
        "LIBTORCH_CPU_PATH": "./libtorch/precompiled/cpu",
        "CUDA_VERSION": "11.8.0",
        "CUDA_TAG": "11.8",
    }
    assert cpu.env == {
        "LIBTORCH_HOST_PATH": "/srv/proj/libtorch/precompiled/cpu",
        "LIBTORCH_CPU_PATH": "./libtorch/precompiled/cpu",
    }
    assert "--features" not in cpu.command
    # Target dir on the build host is the container's /workspace/<target> seen from outside.
    assert cu.target_dir == "/srv/proj/target/cluster/h1/precompiled-cu118"


def test_native_plan_builds_in_the_checkout_with_libtorch_under_controller_path() -> None:
    plan = plan_prebuild(ROOT, "train", [w("h1", "precompiled/cu128")], cmd_dir="trainer", project_dir="/home/me/co/")
    (step,) = plan.steps
    assert step.cwd == "/home/me/co/trainer"
    assert step.env == {
        "LIBTORCH_PATH": "/srv/proj/libtorch/precompiled/cu128",
        "CARGO_TARGET_DIR": "/home/me/co/target/cluster/h1/precompiled-cu128",
        "CUDA_VERSION": "12.8.0",
        "CUDA_TAG": "12.8",
    }
    assert step.variant_dir == "/srv/proj/libtorch/precompiled/cu128"
    assert step.binary == "/home/me/co/target/cluster/h1/precompiled-cu128/release/train"
    assert plan.targets[0].target_dir == "/home/me/co/target/cluster/h1/precompiled-cu128"
    assert (plan.project_root, plan.project_dir) == ("/srv/proj", "/home/me/co")
    # the envelope is relative to worker.path, so the checkout does not change it
    assert plan.envelope() == plan_prebuild(ROOT, "train", [w("h1", "precompiled/cu128")], cmd_dir="trainer").envelope()


def test_docker_plan_runs_compose_in_the_checkout() -> None:
    plan = plan_prebuild(ROOT, "train", [w("h1", "precompiled/cu118")], docker_service="cuda", project_dir="/co")
    (step,) = plan.steps
    assert step.cwd == "/co"
    assert step.env["LIBTORCH_HOST_PATH"] == "/srv/proj/libtorch/precompiled/cu118"
    assert step.target_dir == "/co/target/cluster/h1/precompiled-cu118"


def test_project_dir_defaults_to_controller_path() -> None:
    plan = plan_prebuild(ROOT, "train", [w("h1", "cpu")])
    assert plan.project_dir == "/srv/proj" and plan.steps[0].cwd == "/srv/proj"


def test_source_build_variants_get_no_cuda_env() -> None:
    plan = plan_prebuild(ROOT, "train", [w("h1", "builds/sm61-sm120"), w("h2", "builds/gfx1030-gfx1100")])
    assert [s.feature for s in plan.steps] == ["cuda", "rocm"]
    assert all("CUDA_VERSION" not in s.env and "CUDA_TAG" not in s.env for s in plan.steps)


def test_empty_docker_service_means_native() -> None:
    assert plan_prebuild(ROOT, "train", [w("h1", "cpu")], docker_service="").mode == "native"


def test_dedupe_groups_hosts_sharing_a_variant_in_inventory_order() -> None:
    workers = [
        w("h1", "precompiled/rocm63"),
        w("h2", "precompiled/cu128"),
        w("h3", "precompiled/rocm63"),
        w("h4", "precompiled/cu128"),
    ]
    plan = plan_prebuild(ROOT, "train", workers)
    assert plan.groups() == [
        {"arch": "precompiled/rocm63", "built_by": "h1", "hosts": ["h1", "h3"]},
        {"arch": "precompiled/cu128", "built_by": "h2", "hosts": ["h2", "h4"]},
    ]
    assert plan.built_by == {"h1": "h1", "h2": "h2", "h3": "h1", "h4": "h2"}
    assert plan.step_for("h3") is plan.steps[0]
    # The envelope stays per host: h3 runs its own path, linked from h1's build.
    env = plan.envelope()
    assert env["h3"]["bin"] == "target/cluster/h3/precompiled-rocm63/release/train"
    assert list(env) == ["h1", "h2", "h3", "h4"]


def test_dedupe_off_builds_once_per_host() -> None:
    workers = [w(f"h{i}", "precompiled/cu128") for i in (1, 2, 3)]
    on = plan_prebuild(ROOT, "train", workers)
    off = plan_prebuild(ROOT, "train", workers, dedupe=False)
    assert len(on.steps) == 1 and on.steps[0].hosts == ("h1", "h2", "h3")
    assert [s.host for s in off.steps] == ["h1", "h2", "h3"]
    assert len({s.target_dir for s in off.steps}) == 3


def test_missing_arch_is_a_host_problem_not_a_build() -> None:
    plan = plan_prebuild(ROOT, "train", [w("h1", None), w("h2", "cpu")])
    assert [s.host for s in plan.steps] == ["h2"]
    bad = plan.targets[0]
    assert not bad.buildable
    assert "flodl_arch" in (bad.problem or "")
    assert "h1" not in plan.envelope()


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"project_root": "", "cmd": "train", "workers": []}, "project_root"),
        ({"project_root": ROOT, "cmd": " ", "workers": []}, "cmd"),
        ({"project_root": ROOT, "cmd": "t", "workers": [w("h", "cpu"), w("h", "cpu")]}, "twice"),
        ({"project_root": ROOT, "cmd": "t", "workers": [w("", "cpu")]}, "host"),
    ],
)
def test_unusable_inputs_raise(kwargs: dict, needle: str) -> None:
    with pytest.raises(PrebuildError, match=needle):
        plan_prebuild(kwargs.pop("project_root"), kwargs.pop("cmd"), kwargs.pop("workers"))


# --------------------------------------------------------------------------
# envelope (ported from the seed's envelope tests)
# --------------------------------------------------------------------------


def test_envelope_serialises_compact_and_sorted_regardless_of_insertion_order() -> None:
    env = {
        "host-b": {"bin": "target/cluster/host-b/release/bench", "ld_library_path": "/opt/lt-b/lib"},
        "host-a": {"ld_library_path": "/opt/lt-a/lib", "bin": "target/cluster/host-a/release/bench"},
    }
    assert envelope_json(env) == (
        '{"host-a":{"bin":"target/cluster/host-a/release/bench","ld_library_path":"/opt/lt-a/lib"},'
        '"host-b":{"bin":"target/cluster/host-b/release/bench","ld_library_path":"/opt/lt-b/lib"}}'
    )


def test_envelope_round_trips_with_cwd_subpath() -> None:
    env = {"h1": {"bin": "t/c/h1/release/x", "ld_library_path": "/opt/lt/lib", "cwd_subpath": "ddp-bench"}}
    text = envelope_json(env)
    assert text == '{"h1":{"bin":"t/c/h1/release/x","cwd_subpath":"ddp-bench","ld_library_path":"/opt/lt/lib"}}'
    assert json.loads(text) == env


def test_envelope_entry_omits_empty_cwd_subpath_and_orders_rocm_first() -> None:
    assert envelope_entry("/home/me/rdl/", "precompiled/cu128", "gpu-a", "train", "") == {
        "bin": "target/cluster/gpu-a/precompiled-cu128/release/train",
        "ld_library_path": "/home/me/rdl/libtorch/precompiled/cu128/lib",
    }
    assert envelope_entry("/srv/proj", "precompiled/rocm70", "gpu-b", "train", "/bench/") == {
        "bin": "target/cluster/gpu-b/precompiled-rocm70/release/train",
        "ld_library_path": "/opt/rocm/lib:/srv/proj/libtorch/precompiled/rocm70/lib",
        "cwd_subpath": "bench",
    }


def test_plan_envelope_exact_json_for_mixed_cluster() -> None:
    plan = plan_prebuild(
        ROOT,
        "train",
        [w("gpu-c", "builds/gfx1030-gfx1100", "/opt/p/"), w("gpu-b", "precompiled/cu128", "/home/u/p")],
    )
    assert envelope_json(plan.envelope()) == (
        '{"gpu-b":{"bin":"target/cluster/gpu-b/precompiled-cu128/release/train",'
        '"ld_library_path":"/home/u/p/libtorch/precompiled/cu128/lib"},'
        '"gpu-c":{"bin":"target/cluster/gpu-c/builds-gfx1030-gfx1100/release/train",'
        '"ld_library_path":"/opt/rocm/lib:/opt/p/libtorch/builds/gfx1030-gfx1100/lib"}}'
    )
    with_dir = plan_prebuild(ROOT, "train", [w("h1", "cpu", "/p")], cmd_dir="sub/dir")
    assert envelope_json(with_dir.envelope()) == (
        '{"h1":{"bin":"target/cluster/h1/cpu/release/train","cwd_subpath":"sub/dir",'
        '"ld_library_path":"/p/libtorch/cpu/lib"}}'
    )


def test_envelope_keeps_non_ascii_raw() -> None:
    assert envelope_json({"hé": {"bin": "b", "ld_library_path": "/l"}}) == '{"hé":{"bin":"b","ld_library_path":"/l"}}'


# --------------------------------------------------------------------------
# failure report
# --------------------------------------------------------------------------


def test_tail_lines() -> None:
    assert tail_lines("a\nb\nc\n", 2) == ["b", "c"]
    assert tail_lines("a\n", 5) == ["a"]
    assert tail_lines("", 5) == []
    assert tail_lines("a\nb", 0) == []


def test_failure_message_names_every_host_with_variant_command_tail_and_log() -> None:
    build = HostFailure(
        host="h2",
        arch="precompiled/rocm63",
        reason="build exited with status 101",
        command="cargo build --release --features rocm --bin train",
        cwd="/srv/proj",
        log="/srv/proj/target/cluster/h2/precompiled-rocm63/prebuild.log",
        tail=("error: broken", "error: could not compile `flodl-demo`"),
    )
    missing = HostFailure(
        host="h3",
        arch="precompiled/cu999",
        reason=missing_variant_reason("/srv/proj/libtorch/precompiled/cu999"),
    )
    assert format_failures([build, missing], built=1) == (
        "flodl prebuild failed on 2 host(s): h2, h3 (1 other build(s) completed); "
        "no envelope was produced and nothing will be launched\n"
        "- host h2, variant precompiled/rocm63: build exited with status 101\n"
        "    command: cargo build --release --features rocm --bin train\n"
        "    cwd: /srv/proj\n"
        "    full log: /srv/proj/target/cluster/h2/precompiled-rocm63/prebuild.log\n"
        "    last 2 line(s) of output:\n"
        "      | error: broken\n"
        "      | error: could not compile `flodl-demo`\n"
        "- host h3, variant precompiled/cu999: libtorch variant not found on the build host: "
        "/srv/proj/libtorch/precompiled/cu999/lib is not a directory "
        "(resolved as <flodl_controller_path>/libtorch/<flodl_arch>)"
    )


def test_failure_without_arch_says_so() -> None:
    text = format_failure(HostFailure(host="h1", arch=None, reason="flodl_arch is not set"))
    assert text == "- host h1, variant (no flodl_arch): flodl_arch is not set"


def test_timeout_reason_names_the_limit_and_the_fix():
    from ansible_collections.flodl.cluster.plugins.module_utils._prebuild.prebuild_failures import timeout_reason

    assert timeout_reason(3600) == (
        "build timed out after 3600 s; its process group was killed (raise build_timeout if it needs longer)"
    )
    assert timeout_reason(2.5).startswith("build timed out after 2.5 s;")
