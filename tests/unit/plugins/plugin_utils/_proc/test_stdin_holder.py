"""The stdin holder: the environment lines go through, then the command's stdin stays open until it ends."""
from __future__ import annotations

import subprocess
import sys

from ansible_collections.flodl.cluster.plugins.plugin_utils._proc import stdin_holder

# Prints its stdin's lines as they come, then "open" when no EOF came within a second: its stdin was held.
READER = ("import select, sys\n"
          "for line in iter(sys.stdin.readline, ''):\n"
          "    print('got', line.strip(), flush=True)\n"
          "    if line.strip() == 'END':\n"
          "        break\n"
          "print('open' if not select.select([sys.stdin], [], [], 1.0)[0] else 'eof', flush=True)\n"
          "sys.exit(3)\n")


def _hold(stdin: bytes) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-I", "-S", stdin_holder.__file__, "END", sys.executable, "-c", READER],
                          input=stdin, capture_output=True, timeout=30, check=False)


def test_the_lines_up_to_the_end_mark_go_through_then_stdin_stays_open_and_the_code_comes_back():
    res = _hold(b"A=1\nEND\nnot passed\n")
    assert res.stdout.decode().splitlines() == ["got A=1", "got END", "open"]
    assert res.returncode == 3


def test_without_the_end_mark_nothing_starts():
    res = _hold(b"A=1\n")
    assert res.returncode == stdin_holder.NO_ENVIRONMENT and res.stdout == b""
    assert b"did not arrive whole" in res.stderr
