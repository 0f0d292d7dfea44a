"""The one rule for a missing tool: skip with a how-to outside CI, fail under CI=true."""
from __future__ import annotations

import os

import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"


def need(condition: bool, reason: str) -> None:
    """Skip outside CI; fail under CI, where every tool must be installed."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required under CI=true: {reason}")
    pytest.skip(reason)
