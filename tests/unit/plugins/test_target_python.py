"""Code that runs on managed hosts (modules and module_utils) parses as Python 3.8, ansible-core 2.19's oldest target.

ansible-test sanity compiles it only with the line's controller Python; the build host that runs
flodl.cluster.cargo_prebuild may have an older one.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PLUGINS = Path(__file__).resolve().parents[3] / "plugins"
TARGET_FILES = sorted([*PLUGINS.glob("modules/*.py"), *PLUGINS.glob("module_utils/*.py")])


def test_there_is_target_code():
    assert len(TARGET_FILES) > 5


@pytest.mark.parametrize("path", TARGET_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_parses_as_python_3_8(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path), feature_version=(3, 8))
    future = [n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "__future__"]
    # Annotations such as `str | None` are only safe on 3.8 when they are never evaluated.
    assert any(a.name == "annotations" for n in future for a in n.names), f"{path.name}: no `from __future__ import annotations`"
