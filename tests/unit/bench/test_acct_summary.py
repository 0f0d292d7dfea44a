"""bench/acct_summary.py: dump-acct lines summed by command (bench/README.md, "Stop 41")."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import acct_summary  # noqa: E402  pylint: disable=wrong-import-position


def _record(command: str, user: float, system: float, flags: str = "") -> str:
    """One line as dump-acct prints it (times in clock ticks)."""
    return (f"{command:16}|v3|{user:9.2f}|{system:9.2f}|   400.00|     0|     0|  36000.00|     0.00|   101|"
            f"    100|{flags:5}|       0|__      |Mon Dec  7 05:09:05 2026")


def test_processes_and_seconds_by_command_forks_apart_and_rustc_under_its_name():
    lines = [
        _record("ansible-playboo", 110, 7),
        _record("ansible-playboo", 90, 3),
        _record("ansible-playboo", 1, 1, " F"),
        _record("ctrl-c", 5, 7, "    X"),
        _record("rustc", 3, 1),
        "not a record",
        "ssh |v3| x| y| 1| 0| 0| 1| 0| 1| 1| | 0|__|Mon",
    ]
    assert acct_summary.summarize(lines) == {
        "ansible-playboo": (2, pytest.approx(2.10)),
        "ansible-playboo*": (1, pytest.approx(0.02)),
        "rustc": (2, pytest.approx(0.16)),
    }


def test_the_table_is_sorted_by_cpu_and_ends_with_the_total(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", [_record("sshd", 1, 1), _record("python3", 50, 10), _record("sshd", 2, 0)])
    assert acct_summary.main(["acct_summary.py"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["python3", "1", "0.6", "0.600"]
    assert out[2].split() == ["sshd", "2", "0.0", "0.020"]
    assert out[-1].split() == ["all", "3", "0.6"]
