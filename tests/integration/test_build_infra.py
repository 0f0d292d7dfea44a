"""The build infrastructure itself: demo crate, native and docker prebuilds.

Builds use exactly the command shapes of the flodl contract (§3a step 5):
native ``cargo build`` with ``LIBTORCH_PATH`` and an absolute
``CARGO_TARGET_DIR``; docker ``sh -c "docker compose run --rm <svc> bash -c
'cd /workspace && CARGO_TARGET_DIR=/workspace/<tgt> cargo build ...'"`` from
the project root with ``LIBTORCH_HOST_PATH``/``LIBTORCH_CPU_PATH``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ci_policy import need
from fixtures_docker import PROJECTS_ROOT, copy_demo_project

CARGO = shutil.which("cargo") or "/root/.cargo/bin/cargo"


def _cargo_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(CARGO).parent}:{env.get('PATH', '')}"
    env.pop("CARGO_TARGET_DIR", None)
    env.pop("LIBTORCH_PATH", None)
    env.update(extra)
    return env


def _run(argv, *, cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, cwd=str(cwd), env=env, capture_output=True, text=True, timeout=timeout, check=False)
    print(
        f"$ {argv if isinstance(argv, str) else ' '.join(argv)}\n--- rc={proc.returncode}\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    )
    return proc


def _fields(stdout: str) -> dict[str, str]:
    out = {}
    for line in stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.isidentifier():
            out.setdefault(key, value)
    return out


def _native_build(project: Path, host: str, variant: str, features: str | None) -> Path:
    slug = variant.replace("/", "-").replace("\\", "-")
    target = project / "target" / "cluster" / host / slug
    argv = [CARGO, "build", "--release", *(["--features", features] if features else []), "--bin", "train"]
    proc = _run(
        argv,
        cwd=project,
        env=_cargo_env(CARGO_TARGET_DIR=str(target), LIBTORCH_PATH=str(project / "libtorch" / variant)),
    )
    assert proc.returncode == 0, proc.stderr
    return target / "release" / "train"


@pytest.fixture
def cargo_available() -> None:
    need(Path(CARGO).exists(), f"cargo not found ({CARGO})")


def test_native_build_embeds_variant_and_feature(cargo_available, demo_project) -> None:
    project = demo_project()
    binary = _native_build(project, "h1", "precompiled/cu128", "cuda")
    assert binary == project / "target/cluster/h1/precompiled-cu128/release/train"
    proc = _run(
        [str(binary), "--epochs", "2", "two words"],
        cwd=project,
        env=dict(os.environ, FLODL_DEMO_STEP_MS="1", FLODL_HOST_NAME="h1", LD_LIBRARY_PATH="/x/lib"),
    )
    assert proc.returncode == 0
    fields = _fields(proc.stdout)
    assert fields["variant"] == "precompiled/cu128"
    assert fields["features"] == "cuda"
    assert fields["host"] == "h1"
    assert fields["cwd"] == str(project)
    assert fields["ld_library_path"] == "/x/lib"
    assert fields["args"] == "--epochs 2 two words"
    assert [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("step ")] == ["1", "2", "3"]


def test_demo_binary_knobs(cargo_available, demo_project) -> None:
    """No LIBTORCH_PATH ⇒ variant none; FLODL_DEMO_FAIL_HOST picks the exit code."""
    project = demo_project()
    target = project / "target" / "plain"
    proc = _run(
        [CARGO, "build", "--release", "--bin", "train"], cwd=project, env=_cargo_env(CARGO_TARGET_DIR=str(target))
    )
    assert proc.returncode == 0, proc.stderr
    binary = target / "release" / "train"
    base = dict(os.environ, FLODL_DEMO_STEP_MS="1", FLODL_DEMO_STEPS="1")
    base.pop("FLODL_HOST_NAME", None)
    ok = _run([str(binary)], cwd=project, env=base)
    assert ok.returncode == 0
    fields = _fields(ok.stdout)
    assert fields["variant"] == "none" and fields["features"] == "cpu"
    assert fields["host"] == Path("/proc/sys/kernel/hostname").read_text().strip()
    failing = _run([str(binary)], cwd=project, env=dict(base, FLODL_HOST_NAME="h2", FLODL_DEMO_FAIL_HOST="h1:3,h2:7"))
    assert failing.returncode == 7
    spared = _run([str(binary)], cwd=project, env=dict(base, FLODL_HOST_NAME="h3", FLODL_DEMO_FAIL_HOST="h1:3,h2:7"))
    assert spared.returncode == 0


@dataclass
class DockerBuild:
    project: Path
    proc: subprocess.CompletedProcess[str]
    seconds: float


def _docker_build(project: Path, host: str, variant: str, features: str | None, service: str = "dev") -> DockerBuild:
    slug = variant.replace("/", "-")
    inner = (
        f"cd /workspace && CARGO_TARGET_DIR=/workspace/target/cluster/{host}/{slug} cargo build --release"
        f"{' --features ' + features if features else ''} --bin train"
    )
    command = f"docker compose run --rm {service} bash -c '{inner}'"
    env = dict(
        os.environ,
        LIBTORCH_HOST_PATH=str(project / "libtorch" / variant),
        LIBTORCH_CPU_PATH="./libtorch/precompiled/cpu",
    )
    t0 = time.monotonic()
    proc = _run(["sh", "-c", command], cwd=project, env=env)
    return DockerBuild(project, proc, time.monotonic() - t0)


@pytest.fixture(scope="module")
def docker_rocm_build(docker_engine):
    """One project, one docker prebuild for host h2 on precompiled/rocm63."""
    PROJECTS_ROOT.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="build-infra-", dir=PROJECTS_ROOT))
    try:
        project = copy_demo_project(root)
        yield _docker_build(project, "h2", "precompiled/rocm63", "rocm")
    finally:
        shutil.rmtree(root, ignore_errors=True)


ROCM_BIN = "target/cluster/h2/precompiled-rocm63/release/train"


def test_docker_build_embeds_mounted_variant(docker_rocm_build) -> None:
    build = docker_rocm_build
    assert build.proc.returncode == 0, build.proc.stdout + build.proc.stderr
    print(f"docker build: {build.seconds:.2f}s")
    binary = build.project / ROCM_BIN
    assert binary.is_file()
    # Built in the bookworm builder image, run on the host.
    proc = _run([str(binary)], cwd=build.project, env=dict(os.environ, FLODL_DEMO_STEP_MS="1"))
    assert proc.returncode == 0
    fields = _fields(proc.stdout)
    assert fields["variant"] == "precompiled/rocm63"
    assert fields["features"] == "rocm"
    # The container's writable cargo home stays inside the project.
    assert (build.project / ".cargo-home").is_dir()


def test_docker_rebuild_is_a_noop(docker_rocm_build) -> None:
    first = docker_rocm_build
    assert first.proc.returncode == 0, first.proc.stderr
    binary = first.project / ROCM_BIN
    before = binary.stat().st_mtime_ns
    again = _docker_build(first.project, "h2", "precompiled/rocm63", "rocm")
    print(f"docker no-op rebuild: {again.seconds:.2f}s (first build {first.seconds:.2f}s)")
    assert again.proc.returncode == 0, again.proc.stderr
    assert "Compiling" not in again.proc.stderr
    assert "Finished" in again.proc.stderr
    assert binary.stat().st_mtime_ns == before
    assert again.seconds < 30
