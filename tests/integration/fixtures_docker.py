"""Fixtures for the docker engine and the demo project.

Star-imported by conftest.py. Public names:

* ``docker_engine`` (session fixture): a Docker daemon that answers, docker
  compose v2, and the builder image ``flodl-test/builder:bookworm``. Yields a
  ``DockerEngine``; stops the daemon at session end only if the harness started
  it and no other session still uses it. The image is left in place.
* ``demo_project`` (function fixture): a factory
  ``demo_project(dest=None, *, name="demo") -> Path`` copying ``examples/demo``
  (without ``target/`` and ``.cargo-home/``) to ``dest/name``. Without ``dest``
  the copy goes under ``/var/tmp/flodl-cluster-tests/projects/`` (outside
  ``/tmp``: the namespace ssh hosts have a private ``/tmp``) and is removed
  after the test; an explicit ``dest`` is left to its owner.
* ``copy_demo_project(dest, name="demo") -> Path``: the same copy, as a plain
  function (for session/module fixtures).
* ``DEMO_SRC``, ``BUILDER_IMAGE``, ``PROJECTS_ROOT``.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

_REPO_ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(_REPO_ROOT / "tests" / "harness"))

from ci_policy import need  # noqa: E402
from docker_engine import BUILDER_IMAGE, DockerEngine, DockerError, ensure_builder_image, ensure_compose_v2, needed_engine  # noqa: E402

__all__ = [
    "BUILDER_IMAGE",
    "DEMO_SRC",
    "PROJECTS_ROOT",
    "copy_demo_project",
    "demo_project",
    "docker_engine",
]

DEMO_SRC = _REPO_ROOT / "examples" / "demo"
PROJECTS_ROOT = Path(os.environ.get("FLODL_TEST_PROJECTS_ROOT", "/var/tmp/flodl-cluster-tests/projects"))
_COPY_IGNORE = shutil.ignore_patterns("target", ".cargo-home", ".fdl-cluster-overlay.yml")


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[DockerEngine]:
    with needed_engine(need) as engine:
        reason = ensure_compose_v2(install=True)
        need(reason is None, reason or "")
        t0 = time.monotonic()
        try:
            timings = ensure_builder_image()
        except DockerError as exc:
            need(False, f"builder image {BUILDER_IMAGE} could not be built: {exc}")
            return
        if timings:
            steps = ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())
            print(f"\n[docker_engine] built {BUILDER_IMAGE} in {time.monotonic() - t0:.1f}s ({steps})")
        yield engine


def copy_demo_project(dest: Path | str, name: str = "demo") -> Path:
    """Copy examples/demo to ``dest/name`` (which must not exist); return it."""
    target = Path(dest) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(DEMO_SRC, target, ignore=_COPY_IGNORE, symlinks=True)
    return target


@pytest.fixture
def demo_project(request: pytest.FixtureRequest) -> Iterator[Callable[..., Path]]:
    owned: list[Path] = []

    def make(dest: Path | str | None = None, *, name: str = "demo") -> Path:
        if dest is None:
            PROJECTS_ROOT.mkdir(parents=True, exist_ok=True)
            slug = "".join(c if c.isalnum() or c in "-_" else "-" for c in request.node.name)[:60]
            dest = Path(tempfile.mkdtemp(prefix=f"{slug}-", dir=PROJECTS_ROOT))
            owned.append(dest)
        return copy_demo_project(dest, name)

    yield make
    for path in owned:
        shutil.rmtree(path, ignore_errors=True)
