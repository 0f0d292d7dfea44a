"""CPU seconds by command, from Linux process accounting (bench/README.md, "Stop 41").

The kernel writes one record per process that ends, with its own user and system time, so processes that
detach from a test (the namespace hosts' sshd, the modules run under them) count too, unlike ``/usr/bin/time``::

    apt-get install acct            # accton, dump-acct
    accton /tmp/pacct               # on (as root)
    <the command to measure>
    accton off
    dump-acct /tmp/pacct | python3 bench/acct_summary.py

A process that forked and never called ``exec`` (Ansible's workers) is listed as ``<command>*``. rustc often
ends from its Ctrl-C handler thread, whose name the record carries: those records count as rustc.
"""
from __future__ import annotations

import sys
from collections import defaultdict
from typing import Iterable

# dump-acct's columns: command | version | user | system | elapsed | uid | gid | memory | io | pid | ppid | flags | ...
_COMMAND, _USER, _SYSTEM, _FLAGS = 0, 2, 3, 11
_TICKS = 100.0  # dump-acct prints times in clock ticks
_ALIASES = {"ctrl-c": "rustc"}


def summarize(lines: Iterable[str]) -> dict[str, tuple[int, float]]:
    """{command: (processes, CPU seconds)} from dump-acct's output lines."""
    counts: dict[str, int] = defaultdict(int)
    seconds: dict[str, float] = defaultdict(float)
    for line in lines:
        cols = [col.strip() for col in line.split("|")]
        if len(cols) <= _FLAGS:
            continue
        try:
            cpu = (float(cols[_USER]) + float(cols[_SYSTEM])) / _TICKS
        except ValueError:
            continue
        name = _ALIASES.get(cols[_COMMAND], cols[_COMMAND]) + ("*" if "F" in cols[_FLAGS] else "")
        counts[name] += 1
        seconds[name] += cpu
    return {name: (counts[name], seconds[name]) for name in counts}


def main(argv: list[str]) -> int:
    top = int(argv[1]) if len(argv) > 1 else 20
    rows = sorted(summarize(sys.stdin).items(), key=lambda item: -item[1][1])
    total = sum(cpu for _name, (_count, cpu) in rows)
    print(f"{'command':20} {'processes':>9} {'CPU-s':>8} {'each':>7}")
    for name, (count, cpu) in rows[:top]:
        print(f"{name:20} {count:9d} {cpu:8.1f} {cpu / count:7.3f}")
    print(f"{'all':20} {sum(count for _name, (count, _cpu) in rows):9d} {total:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
