"""Preflight speed: the playbook against plain parallel ssh of the same probe.

Brings up N namespace ssh hosts (tests/harness/netns_cluster.py) for each N,
then times, in the same run and interleaved, for several repetitions:

* ``ssh``: a shell script that starts one ``ssh <argv> '<probe>' &`` per host
  and ``wait``s: the fastest way a human would do it, with exactly the argv
  and probe the plugin uses (so the same key exchange, options and work);
* ``playbook``: ``ansible-playbook flodl.cluster.preflight -i INV`` from a
  fresh process (collection loaded from this checkout);
* ``empty``: ``ansible-playbook`` of a play with no task, the fixed cost of
  starting Ansible at all (for reading the figures, not part of the ratio);
* ``floor``: the same hosts, ``_timing.FLOOR_PLAY`` (one run-once ``debug``, one per-host ``debug``):
  Ansible's own cost for this play shape (a step for all, a result per worker),
  so ``(ssh + floor) / ssh`` is the best ratio any such playbook can reach.

Criterion (a)'s verdict is the median of each repetition's own ``playbook / (ssh + floor)``: the four runs of a
repetition follow each other, so a drift of the machine's speed between repetitions cancels out.

A tiny callback plugin (bench/_timing.py) times every task of the playbook runs; the
"per-host tasks" column is what the role's argument-spec validation and the
``worker_result`` report cost (their start to the next task's start), i.e. the
playbook without them would take that much less.

Connections are cold for both: nothing keeps a master connection open.
Needs root (network namespaces); run on a quiet machine.

    python bench/preflight_bench.py [--sizes 8,16,32] [--reps 5]
                                    [--ansible-playbook /opt/venv219/bin/ansible-playbook]
                                    [--json bench/results/preflight.json]
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "harness"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import ansible_env, bench_args, per_host_seconds, read_events, task_costs, write_floor_play  # noqa: E402
from netns_cluster import SHARED_BASE, Cluster, HostSpec, require_root  # noqa: E402


def _farm(root: Path) -> Path:
    """``ansible_collections/flodl/cluster`` -> this checkout, so the bench needs no install."""
    link = root / "ansible_collections" / "flodl" / "cluster"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(REPO, target_is_directory=True)
    sys.path.insert(0, str(root))
    return root


def _inventory(cluster: Cluster, shared: Path, path: Path) -> Path:
    (shared / "data").mkdir(exist_ok=True)
    (shared / "proj").mkdir(exist_ok=True)
    worker = {
        "flodl_path": str(shared / "proj"),
        "flodl_local_devices": [0],
        "flodl_nccl_socket_ifname": "eth0",
        "flodl_arch": "precompiled/cu128",
        "flodl_data_path": str(shared / "data"),
    }
    return cluster.write_inventory(
        path,
        group_vars={
            "flodl_controller_host": cluster.controller_ip,
            "flodl_controller_path": str(shared / "proj"),
            "flodl_controller_data_path": str(shared / "data"),
            "flodl_cmd": "train",
        },
        host_vars={h.name: dict(worker) for h in cluster},
    )


def _baseline_script(cluster: Cluster, shared: Path, path: Path) -> Path:
    """One ``ssh ... &`` line per host with the plugin's own argv and probe, then ``wait``."""
    from ansible_collections.flodl.cluster.plugins.module_utils._probe import preflight_probe as pf
    from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import posix_quote
    from ansible_collections.flodl.cluster.plugins.module_utils._ssh.ssh import probe_argv
    from ansible_collections.flodl.cluster.plugins.module_utils._ssh.sshargs import connection_from_vars, derive_worker_ssh

    def derive_ssh(name, hostvars):
        return derive_worker_ssh(name, connection_from_vars(hostvars)).ssh

    probe = pf.remote_command(pf.probe_script(str(shared / "data"), abi=True, gpus=False))
    out = path.parent / "ssh-out"
    out.mkdir(exist_ok=True)
    lines = ["#!/bin/sh"]
    for h in cluster:
        argv = probe_argv({"host": h.name, "ssh": derive_ssh(h.name, cluster.hostvars(h))}, probe)
        lines.append(" ".join(posix_quote(a) for a in argv) + f" </dev/null >{out}/{h.name} 2>&1 &")
    lines.append("wait")
    path.write_text("\n".join(lines) + "\n")
    return path


def _time(argv: list[str], env: dict[str, str] | None = None, expect_rc: int = 0) -> float:
    t0 = time.monotonic()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - t0
    if proc.returncode != expect_rc:
        raise RuntimeError(f"{argv[:2]} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return elapsed


def bench_size(n: int, reps: int, playbook_bin: str, env: dict[str, str], work: Path) -> dict[str, object]:
    shared = SHARED_BASE / f"bench-{os.getpid()}-{n}"
    shared.mkdir(parents=True, exist_ok=True)
    os.chmod(shared, 0o755)
    cluster = Cluster([HostSpec(f"h{i + 1}") for i in range(n)], work / f"state-{n}", shared_root=shared)
    cluster.up()
    try:
        inv = _inventory(cluster, shared, work / f"inv-{n}.json")
        script = _baseline_script(cluster, shared, work / f"ssh-{n}.sh")
        empty = work / "empty.yml"
        empty.write_text("- name: Nothing\n  hosts: localhost\n  gather_facts: false\n  tasks: []\n")
        # Ansible's floor for this play shape: start-up, one run-once task, one per-host task (a `debug` each).
        floor = write_floor_play(work)
        play = [playbook_bin, "flodl.cluster.preflight", "-i", str(inv)]
        # one untimed round each: page cache, Python bytecode
        _time(["sh", str(script)])
        _time(play, env)
        samples: dict[str, list[float]] = {"ssh": [], "playbook": [], "empty": [], "per_host": [], "floor": []}
        times = work / "times.json"
        for rep in range(reps):
            order = ["ssh", "playbook", "empty", "floor"] if rep % 2 == 0 else ["playbook", "ssh", "floor", "empty"]
            for kind in order:
                if kind == "ssh":
                    samples[kind].append(_time(["sh", str(script)]))
                elif kind == "playbook":
                    samples[kind].append(_time(play, {**env, "FLODL_BENCH_TIMES": str(times)}))
                    events = read_events(times)
                    costs = task_costs(events, next(t for k, _name, t in events if k == "stats"))
                    samples["per_host"].append(sum(per_host_seconds(costs).values()))
                elif kind == "floor":
                    samples[kind].append(_time([playbook_bin, str(floor), "-i", str(inv)], env))
                else:
                    samples[kind].append(_time([playbook_bin, str(empty), "-i", str(inv)], env))
        bad = [h.name for h in cluster if "__FLODL_END__" not in (work / "ssh-out" / h.name).read_text()]
        if bad:
            raise RuntimeError(f"baseline probe did not complete on {bad}")
        med = {k: statistics.median(v) for k, v in samples.items()}
        # Each repetition's own ratio, from runs minutes apart at most: the machine's speed drifts between
        # windows by more than the collection's cost, and a ratio of medians mixes those windows.
        paired = [p / (s + f) for p, s, f in zip(samples["playbook"], samples["ssh"], samples["floor"])]
        return {
            "hosts": n,
            "reps": reps,
            "samples": samples,
            "median": med,
            "paired": {"median": statistics.median(paired), "min": min(paired), "max": max(paired)},
            "ratio": med["playbook"] / med["ssh"],
            "connections_per_host": max(h.connections() for h in cluster) / (2 * reps + 2),
        }
    finally:
        cluster.down()
        shutil.rmtree(shared, ignore_errors=True)


CRITERION_A = 1.1


def main() -> int:
    args = bench_args(__doc__, "8,16,32")
    reason = require_root()
    if reason:
        print(reason, file=sys.stderr)
        return 2
    if not Path(args.ansible_playbook).exists():
        print(f"no ansible-playbook at {args.ansible_playbook}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="flodl-preflight-bench-"))
    try:
        farm = _farm(work / "collections")
        env = ansible_env(work, farm)
        version = subprocess.run([args.ansible_playbook, "--version"], capture_output=True, text=True,
                                 check=False).stdout.splitlines()[0]
        rows = []
        for n in [int(x) for x in args.sizes.split(",") if x.strip()]:
            rows.append(bench_size(n, args.reps, args.ansible_playbook, env, work))
            r = rows[-1]
            print(f"  N={n}: done ({r['median']['playbook']:.2f}s vs {r['median']['ssh']:.2f}s)", file=sys.stderr)
        print(f"{version}; {os.cpu_count()} CPUs; {args.reps} repetitions; medians in seconds")
        print("| hosts | ssh & wait | playbook | ratio | empty play | per-host tasks | ratio without them "
              "| floor play | best possible ratio (ssh + floor) | playbook / (ssh + floor) |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in rows:
            m, s = r["median"], r["samples"]
            spread = {k: f"{min(v):.2f}-{max(v):.2f}" for k, v in s.items()}
            print(f"| {r['hosts']} | {m['ssh']:.2f} ({spread['ssh']}) | {m['playbook']:.2f} ({spread['playbook']}) "
                  f"| {r['ratio']:.2f}x | {m['empty']:.2f} | {m['per_host']:.2f} ({spread['per_host']}) "
                  f"| {(m['playbook'] - m['per_host']) / m['ssh']:.2f}x | {m['floor']:.2f} ({spread['floor']}) "
                  f"| {(m['ssh'] + m['floor']) / m['ssh']:.2f}x | {m['playbook'] / (m['ssh'] + m['floor']):.2f}x |")
        for r in rows:  # issue 17's criterion (a): within 1.1x of plain parallel ssh plus Ansible's floor play
            m, pr = r["median"], r["paired"]
            verdict = pr["median"]
            print(f"criterion (a), preflight at {r['hosts']} hosts: {verdict:.2f}x of ssh + floor (median of each "
                  f"repetition's own ratio, {pr['min']:.2f}-{pr['max']:.2f}; of the medians "
                  f"{m['playbook'] / (m['ssh'] + m['floor']):.2f}x), limit {CRITERION_A:.2f}x (set at 32 hosts): "
                  f"{'PASS' if verdict <= CRITERION_A else 'over'}")
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({"ansible": version, "cpus": os.cpu_count(), "rows": rows}, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
