"""Fixtures of the execution-environment test: the namespace hosts of the integration tests and the EE image.

Run on its own (``pytest tests/ee``, the EE step of scripts/test.sh): the image build and the job in it
happen once per test command, not once per ansible-core line (the image carries its own ansible-core).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
for _path in (REPO_ROOT / "tests" / "harness", REPO_ROOT / "tests" / "integration", HERE):
    sys.path.insert(0, str(_path))

pytest_plugins = ["fixtures_netns"]

from ci_policy import need  # noqa: E402
from docker_engine import image_exists, needed_engine  # noqa: E402
from ee_image import EE_IMAGE, ensure_ee_image  # noqa: E402

# Set by scripts/test.sh after its timed "EE image build" step: use that image as it is.
BUILT = os.environ.get("FLODL_EE_IMAGE_BUILT", "") == "1"


@pytest.fixture(scope="session")
def ee_image() -> Iterator[str]:
    """The EE image of this checkout: built here (Docker's cache makes a rebuild quick) unless just built."""
    with needed_engine(need):
        if not (BUILT and image_exists(EE_IMAGE)):
            timings = ensure_ee_image(EE_IMAGE)
            print("\n[ee_image] " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
        yield EE_IMAGE
