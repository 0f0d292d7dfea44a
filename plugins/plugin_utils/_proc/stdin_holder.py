# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Holds a command's stdin open for the command's whole life; run as a script.

``stdin_holder.py <end mark> <argv...>`` copies this process's stdin to the command's, up to and including
the ``<end mark>`` line (the environment lines of module_utils._ssh.remote_launch), then keeps the command's
stdin open, writing nothing more, until the command ends, and exits with its exit code (128 + N for a signal N).

A walk-in launcher on ``flodl_launch_host`` runs under it: the command is the ssh that runs the remote wrapper,
which stops the launcher there when its stdin closes, that is when this process or its ssh is gone (the
launch's group stopped, or killed with the job). Without the end mark on stdin nothing starts (exit 97): the
wrapper would wait for the rest of an environment that never comes. Standard library only: it runs without
Ansible (``-I -S``).
"""
from __future__ import annotations

import subprocess
import sys

NO_ENVIRONMENT = 97


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: stdin_holder.py <end mark> <argv...>", file=sys.stderr)
        return 2
    end = argv[0].encode("utf-8") + b"\n"
    head = bytearray()
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            print("flodl launch: the launch environment did not arrive whole; nothing was started", file=sys.stderr)
            return NO_ENVIRONMENT
        head += line
        if line == end:
            break
    sys.stdout.flush()
    proc = subprocess.Popen(argv[1:], stdin=subprocess.PIPE)
    try:
        if proc.stdin is not None:
            proc.stdin.write(bytes(head))
            proc.stdin.flush()
    except BrokenPipeError:
        pass  # the command ended already: its code says why
    rc = proc.wait()
    return rc if rc >= 0 else 128 - rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
