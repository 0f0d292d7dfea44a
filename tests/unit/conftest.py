"""Fixtures shared by the unit tests of every plugin type."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pytest


@pytest.fixture
def stand_in_on_path(tmp_path, monkeypatch) -> Callable[[str, str], Path]:
    """Put a stand-in command first on PATH: ``install(name, script)`` -> the log file its script may write to
    (``$SSH_LOG``; absent until a call writes it)."""
    tools = tmp_path / "stand-in-bin"
    log = tmp_path / "ssh.log"

    def install(name: str, script: str) -> Path:
        tools.mkdir(exist_ok=True)
        (tools / name).write_text(script, encoding="utf-8")
        (tools / name).chmod(0o755)
        monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
        monkeypatch.setenv("SSH_LOG", str(log))
        return log
    return install
