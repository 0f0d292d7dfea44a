"""Preflight on a loaded controller: does every reachable worker get checked?

Brings up N namespace ssh hosts (tests/harness/netns_cluster.py), starts a competing load on this machine
(``--load`` shell busy loops, each ``sh -c 'while :; do :; done'`` at this process's own priority, started and
stopped by PID), then runs ``ansible-playbook flodl.cluster.preflight`` once per repetition and counts the
workers it reported unreachable (every host answers: each one is a probe that ran out of time), with the
wall time. ``--collection`` points at the checkout to measure (default this one), so the same run can time
another tree (e.g. ``git archive`` of the main branch) for a before/after pair.

    nice python bench/preflight_load_bench.py --sizes 128 --load 2 --reps 1
        [--ansible-playbook .venv/ansible-2.19/bin/ansible-playbook] [--collection /tmp/main-tree]

Needs root (network namespaces).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "harness"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import ansible_env  # noqa: E402
from netns_cluster import SHARED_BASE, Cluster, HostSpec, require_root  # noqa: E402
from preflight_bench import _inventory  # noqa: E402

# A worker reported unreachable: its report is skipped, with the reason shown (phase_result.worker_outcome).
UNREACHABLE = re.compile(r"^skipping: \[(h\d+)\] => ", re.M)
NO_ANSWER = "no answer within"


def _farm(root: Path, checkout: Path) -> Path:
    link = root / "ansible_collections" / "flodl" / "cluster"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(checkout, target_is_directory=True)
    return root


def _load(count: int) -> list[subprocess.Popen]:
    """``count`` busy loops at this process's priority, each in a session of its own (stopped by PID)."""
    return [subprocess.Popen(["nice", "-n", "0", "sh", "-c", "while :; do :; done"], start_new_session=True)
            for _loop in range(count)]


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait()


def _loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def one_size(n: int, args: argparse.Namespace, env: dict[str, str], work: Path) -> list[dict[str, object]]:
    shared = SHARED_BASE / f"lb-{os.getpid()}-{n}"
    shared.mkdir(parents=True, exist_ok=True)
    os.chmod(shared, 0o755)
    cluster = Cluster([HostSpec(f"h{i + 1}") for i in range(n)], work / f"s{n}", shared_root=shared)
    cluster.up()
    rows = []
    try:
        inv = _inventory(cluster, shared, work / f"inv-{n}.json")
        play = [args.ansible_playbook, "flodl.cluster.preflight", "-i", str(inv)]
        for _rep in range(args.reps):
            load = _load(args.load)
            try:
                time.sleep(2)  # the loops are running before the play starts
                before = _loadavg()
                t0 = time.monotonic()
                proc = subprocess.run(play, env=env, capture_output=True, text=True, check=False)
                seconds = time.monotonic() - t0
                after = _loadavg()
            finally:
                _stop(load)
            out = proc.stdout
            unreachable = sorted(set(UNREACHABLE.findall(out)), key=lambda h: int(h[1:]))
            rows.append({"hosts": n, "load": args.load, "rc": proc.returncode, "seconds": round(seconds, 1),
                         "checked": n - len(unreachable), "unreachable": len(unreachable),
                         "no_answer": out.count(NO_ANSWER), "loadavg": f"{before:.1f}-{after:.1f}"})
            if proc.returncode != 0:
                print(out[-3000:], proc.stderr[-2000:], file=sys.stderr)
            print(f"  N={n}: {rows[-1]}", file=sys.stderr)
    finally:
        cluster.down()
        shutil.rmtree(shared, ignore_errors=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="128")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--load", type=int, default=2, help="busy loops beside the play")
    parser.add_argument("--ansible-playbook", default=str(REPO / ".venv" / "ansible-2.19" / "bin" / "ansible-playbook"))
    parser.add_argument("--collection", default=str(REPO), help="the checkout whose collection is measured")
    args = parser.parse_args()
    reason = require_root()
    if reason:
        print(reason, file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="flodl-lb-"))
    try:
        env = ansible_env(work, _farm(work / "c", Path(args.collection).resolve()))
        rows = []
        for n in [int(x) for x in args.sizes.split(",") if x.strip()]:
            rows += one_size(n, args, env, work)
        print(f"{os.cpu_count()} CPUs; collection {args.collection}")
        print("| hosts | busy loops | seconds | checked | unreachable (no answer in time) | load average | rc |")
        print("| ---: | ---: | ---: | ---: | ---: | --- | ---: |")
        for r in rows:
            print(f"| {r['hosts']} | {r['load']} | {r['seconds']} | {r['checked']} | {r['unreachable']} "
                  f"({r['no_answer']}) | {r['loadavg']} | {r['rc']} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
