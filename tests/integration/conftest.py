"""Integration fixtures shared by every phase's tests.

Everything here is real: the collection is built with ``ansible-galaxy
collection build`` and installed from that tarball, and playbooks run
through the ``ansible-playbook`` of the interpreter running pytest (so
the same tests exercise each supported ansible-core line).
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
sys.path.insert(0, str(REPO_ROOT / "tests" / "harness"))
sys.path.insert(0, str(HERE))

# The namespace hosts' sshd offers curve25519 only (tests/harness/netns_cluster.py): a third of the CPU of
# OpenSSH 9's default post-quantum key exchange per handshake, and the tests make thousands of them. The
# collection never chooses the algorithm; docs/preflight.md "Speed" suggests the same to operators.
os.environ.setdefault("FLODL_NETNS_SSH_KEX", "curve25519-sha256,curve25519-sha256@libssh.org")

# Namespace ssh hosts and the docker engine, as fixtures.
pytest_plugins = ["fixtures_netns", "fixtures_docker"]
if os.environ.get("FLODL_CPU_METER"):  # CPU per test (cpu_meter.py)
    pytest_plugins.append("cpu_meter")

from ci_policy import need  # noqa: E402  (also imported by the tests from here)


def ansible_bin(name: str) -> str:
    """The ansible CLI that belongs to the interpreter running the tests."""
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    need(found is not None, f"{name} not found: run the README test command, which creates the venvs")
    return str(found)


@dataclass
class Collection:
    """The collection as installed from its own tarball."""

    collections_path: Path
    tarball: Path
    local_temp: Path | None = None  # ANSIBLE_LOCAL_TEMP (beside collections_path when not given)

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            ANSIBLE_COLLECTIONS_PATH=str(self.collections_path),
            ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
            ANSIBLE_HOST_KEY_CHECKING="false",
            ANSIBLE_RETRY_FILES_ENABLED="false",
            ANSIBLE_NOCOLOR="1",
            ANSIBLE_FORCE_COLOR="0",
            ANSIBLE_LOCAL_TEMP=str(self.local_temp or self.collections_path.parent / "ansible-local"),
            ANSIBLE_REMOTE_TEMP="/tmp/.ansible-remote",
            ANSIBLE_PYTHON_INTERPRETER="auto_silent",
        )
        env.update(extra)
        return env


def _build_and_install(work: Path) -> tuple[Path, Path]:
    build = subprocess.run(
        [ansible_bin("ansible-galaxy"), "collection", "build", str(REPO_ROOT), "--output-path", str(work), "--force"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    tarball = next(work.glob("flodl-cluster-*.tar.gz"))
    dest = work / "collections"
    install = subprocess.run(
        [ansible_bin("ansible-galaxy"), "collection", "install", str(tarball), "-p", str(dest), "--force", "--offline"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    assert (dest / "ansible_collections" / "flodl" / "cluster" / "galaxy.yml").exists() or (
        dest / "ansible_collections" / "flodl" / "cluster" / "MANIFEST.json"
    ).exists()
    return dest, tarball


@pytest.fixture(scope="session")
def installed_collection(tmp_path_factory: pytest.TempPathFactory) -> Collection:
    """Built and installed once per test run: under pytest-xdist, the first worker builds it in the run's own
    temporary root (the workers' common parent) and the others take it (2.8 CPU-s each saved). Read only."""
    local_temp = tmp_path_factory.mktemp("ansible-local")
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    work = root / "installed-collection"
    with open(root / "installed-collection.lock", "a", encoding="ascii") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (work / "done").exists():
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir()
            _build_and_install(work)
            (work / "done").touch()
    return Collection(collections_path=work / "collections", tarball=next(work.glob("flodl-cluster-*.tar.gz")),
                      local_temp=local_temp)


def run_ansible(
    collection: Collection,
    argv: list[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """Run an ansible CLI (first argv item is its name) and keep all output."""
    full_env = collection.env(**(env or {}))
    proc = subprocess.run(
        [ansible_bin(argv[0]), *argv[1:]],
        cwd=str(cwd) if cwd else None,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    # Shown by pytest only when the test fails.
    print(f"$ {' '.join(argv)}\n--- rc={proc.returncode}\n{proc.stdout}\n--- stderr\n{proc.stderr}")
    return proc


# Seconds each file took on one line (2026-12-02, 2 CPUs; test_play_shape.py estimated and test_walk_in_stops.py
# measured 2026-12-06): with pytest-xdist (scripts/test.sh), the longest files start first, so that no long one
# is left alone at the end.
# A file not listed is cheap; it sorts after these, in collection order.
FILE_SECONDS = {
    "test_signals.py": 138, "test_hardening.py": 114, "test_prebuild.py": 86, "test_launch_host.py": 66,
    "test_run_lease.py": 80, "test_play_shape.py": 60, "test_launch.py": 58, "test_ssh_reuse.py": 45,
    "test_build_infra.py": 42, "test_launch_host_kill.py": 38, "test_runner.py": 35, "test_preflight.py": 34,
    "test_modes.py": 30, "test_vault.py": 30, "test_walk_in.py": 115, "test_walk_in_stops.py": 47,
    "test_prebuild_hardening.py": 24,
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: -FILE_SECONDS.get(item.path.name, 0))  # stable: a file's tests keep their order
