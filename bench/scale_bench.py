"""Scale: preflight and ``cluster_train`` in both launch modes from 8 to 500 workers against the minimum pipeline
(issues 19 and 37).

For each N it brings up N namespace ssh hosts (tests/harness/netns_cluster.py) sharing one copy of
examples/demo (two libtorch variants alternating over the hosts), installs the collection from its
tarball, builds the binaries once, then times, interleaved in the same run (the order rotates every
repetition, so every kind sees the same load):

* ``raw``: the minimum pipeline of ``cluster_train_bench.py``: a parallel ssh probe (the plugin's argv
  and probe, ``&`` + ``wait``), a no-op ``cargo build`` per variant in parallel, then the stand-in
  launcher with fdl-cli's environment: one ssh per rank, flodl's cleanup before and after;
* ``probe``: the parallel ssh probe alone (the yardstick of ``preflight``);
* ``cluster_train``: ``ansible-playbook flodl.cluster.cluster_train`` on the same hosts (reuse on), in the
  default launch mode (``fanout``: the launcher gets the whole topology in its environment);
* ``walk_in``: the same with ``-e flodl_launch_mode=walk_in`` (the launcher opens a join window, an agent is
  started on each worker over its own Ansible connection and collected after);
* ``raw_walk_in``: walk_in's minimum pipeline (bench/_raw_walk_in.py): the same probe and no-op builds, the stand-in
  launcher started here with the walk-in window's environment, a wait until its window listens, every agent
  started by plain parallel ssh (the collection's start script, its environment on stdin), the launcher's end, every
  agent collected by plain parallel ssh; the bytes are those of a recorded walk_in run's launch step (an untimed
  walk_in run of the playbook at each size; where fanout is refused, the one that builds). Checked: every probe
  answered, every build a no-op, every worker joined, the window reached its N ranks, no rank lost or failed, the
  launcher and every agent exited 0;
* ``preflight``: ``ansible-playbook flodl.cluster.preflight``;
* ``floor``: Ansible's floor for the shape (``_timing.FLOOR_PLAY``: a run-once and a per-host ``debug``).

Each cluster_train is checked: every rank exited 0 (fanout: the stand-in saw each worker's rank exit 0; walk_in:
every worker joined the window, the window reached its N ranks, each agent's last line says it finished, not
DEGRADED, i.e. its rank exited 0), the accepted sshd logins per worker (each host's sshd log; fanout: exactly
one), and its lines without ``-v`` counted: all of stdout + stderr, and the collection's own (all but the
training's output: the lines the launch command streams, the agents' last lines). The timing callback splits each
run into start-up, the sweep (the preflight probe step), the other run-once steps, the per-host tasks
(``worker_result``), rendering (the launch environment step), the launch command (walk_in: opening the window and
following it), the agents' start and collect; the cost per added worker is the slope between consecutive sizes.

A size whose launch environment cannot fit (exec's 128 KiB per string) must be refused before contact in fanout:
then the bench checks 0 sshd logins and no build target, records the refusal and times it instead, and walk_in
(which carries no roster in the environment) still runs there (its first run builds), and so does ``raw_walk_in``.
The fan-out minimum pipeline (``raw``) cannot launch at such a size (fdl-cli's environment is the same), so there
walk_in is compared with ``raw_walk_in``, the probe and the floor play. The report prints walk_in / raw_walk_in at
every size, raw_walk_in's sshd logins per worker (3: probe, start, collect) and its cost per added worker.

    .venv/ansible-2.19/bin/python bench/scale_bench.py [--sizes 8,32,128,200,500] [--reps 2]
        [--ansible-playbook /work/main/.venv/ansible-2.19/bin/ansible-playbook] [--json FILE]

``FLODL_BENCH_KINDS=raw,walk_in,raw_walk_in``: only those kinds where fanout launches; ``FLODL_BENCH_FORKS=default,50``:
preflight, the floor play and walk_in again per ``ANSIBLE_FORKS`` value; ``FLODL_BENCH_WARM=0``: no untimed round
of the minimum pipeline first.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import (  # noqa: E402
    FLOOR_PLAY, Workspace, bench_args, failure_text, med, own_lines, ratio, read_events, run_sizes, spread,
    task_costs,
)
from cluster_train_bench import (  # noqa: E402
    VARIANTS, bench_hosts, check_raw, fanout_missing, inventory, raw_script, recorded_launch_env, run, timed_run,
)
from netns_cluster import SHARED_BASE, Cluster, require_root  # noqa: E402
from _raw_walk_in import check_raw_walk_in, raw_walk_in_script, record_walk_in, step_seconds, steps_table  # noqa: E402

KINDS = ["raw", "cluster_train", "walk_in", "raw_walk_in", "probe", "preflight", "floor"]
TRAINS = ("cluster_train", "walk_in")
WALK_IN = ["-e", "flodl_launch_mode=walk_in"]
# Where a cluster_train's time goes, by task name (the rest of the run-once steps is "other steps").
BUCKETS = {
    "sweep": ("Probe every worker",),
    "per-host tasks": ("Result of this worker",),
    "rendering": ("Prepare the launcher environment",),
    "builds": ("Build on the build host",),
    "launch command": ("Run the launch command", "Open the launcher's join window", "Follow the launcher to its end"),
    "agent start": ("Start this worker's walk-in agent",),
    "agent collect": ("Collect this worker's walk-in agent",),
}


def accepted(cluster: Cluster) -> dict[str, int]:
    return {h.name: h.log().count("Accepted publickey for ") for h in cluster}


def walk_in_missing(cluster: Cluster, out: str) -> list[str]:
    """The workers that did not join, or whose agent did not finish clean (a rank that exits non-zero makes it say
    DEGRADED); all of them if the window never reached its ranks (one per worker here)."""
    if f"target ranks reached: {len(list(cluster))} rank(s)" not in out:
        return [h.name for h in cluster]
    lines = set(out.splitlines())
    return [h.name for h in cluster if f'host "{h.name}" joined with ranks [' not in out
            or f"[{h.name}] agent: {h.name} finished" not in lines]


def buckets(costs: list[tuple[str, float, float]]) -> dict[str, float]:
    out = {k: sum(d for n, _s, d in costs if any(p in n for p in pats)) for k, pats in BUCKETS.items()}
    out["other steps"] = sum(d for _n, _s, d in costs) - sum(out.values())
    return out


def timed_train(argv: list[str], env: dict[str, str], times: Path, cluster: Cluster, missing) -> dict:
    before = accepted(cluster)
    t0, end, proc, costs, _work = timed_run(argv, env, times, cluster, missing)
    after = accepted(cluster)
    logins = sorted({after[h] - before[h] for h in after})
    total_lines, own = own_lines(proc.stdout + proc.stderr)
    return {"total": end - t0, "startup": costs[0][1] - t0, "buckets": buckets(costs), "logins_per_worker": logins,
            "lines": total_lines, "own_lines": own, "tasks": [(n, round(d, 4)) for n, _s, d in costs]}


def builds_of(project: Path) -> set[str]:
    return {p.name for p in (project / "target" / "cluster").glob("h*")}


def refused(argv: list[str], env: dict[str, str], cluster: Cluster, project: Path) -> dict:
    """A size that cannot launch: refused before contact, with no login and no build (none new: walk_in built)."""
    before, built = accepted(cluster), builds_of(project)
    t0, proc = run(argv, env)
    took = time.monotonic() - t0
    logins = sum(accepted(cluster).values()) - sum(before.values())
    msg = next((ln for ln in proc.stdout.splitlines() if ln.startswith("fatal: ")), proc.stdout[-1500:])
    return {"rc": proc.returncode, "seconds": took, "logins": logins, "builds": sorted(builds_of(project) - built),
            "message": msg[:2000], "lines": len((proc.stdout + proc.stderr).splitlines())}


def probe_part(script: Path, n: int) -> Path:
    lines = script.read_text().splitlines()
    probe = script.parent / f"probe-{n}.sh"
    probe.write_text("\n".join(lines[:lines.index("wait") + 1]) + "\n")
    return probe


def bench_size(n: int, reps: int, bins: dict[str, str], env: dict[str, str], work: Path,
               forks: list[str]) -> dict:
    # Short paths: every worker repeats them in the topology, and at 128 workers its compact form is within a
    # few percent of exec's limit (14 more characters per path were enough to have the run refused).
    shared = SHARED_BASE / f"s{os.getpid()}"
    with bench_hosts(n, shared, work, f"k{n}", up_timeout=max(120, n)) as hosts:
        cluster, project, up = hosts.cluster, hosts.project, hosts.up_seconds
        data = shared / "data"
        data.mkdir()
        os.chmod(data, 0o755)
        load = [round(os.getloadavg()[0], 2)]
        dp = {"flodl_data_path": str(data), "flodl_controller_data_path": str(data)}
        inv = inventory(cluster, project, work / f"inv-{n}.json", **dp)
        play = [bins["ansible-playbook"], "-i", str(inv), "flodl.cluster.cluster_train"]
        floor = work / "floor.yml"
        floor.write_text(FLOOR_PLAY)
        common = {"cluster": cluster, "project": project, "play": play, "env": env, "inv": inv, "floor": floor,
                  "times": work / "times.json", "bins": bins}
        per_forks = [f"{k}@{f}" for f in forks if f != "default" for k in ("preflight", "floor", "walk_in")]
        # The first run builds the binaries, or is refused (nothing is launched at this size): then the refusal
        # is timed instead, beside walk_in (whose first run builds) and the kinds that do not launch.
        before = accepted(cluster)
        _t, proc = run(play, env)
        if proc.returncode != 0:
            if sum(accepted(cluster).values()) != sum(before.values()) or builds_of(project):
                raise RuntimeError(f"first run failed after contact:\n{failure_text(proc.stdout, proc.stderr)}")
            record = recorded_walk_in(play, env, work, n)
            script = raw_script(cluster, project, {}, work)  # its probe part only
            kinds = ["refused", "walk_in", "raw_walk_in", "probe", "preflight", "floor", *per_forks]
            samples = measure(kinds, reps, load, probe=probe_part(script, n), script=script,
                              walk_script=raw_walk_in_script(cluster, project, record, work),
                              steps=min(n, len(VARIANTS)), **common)
            return {"hosts": n, "up": up, "reps": reps, "samples": samples, "load": load, "refused": samples["refused"]}
        _recorded, launch_env = recorded_launch_env(hosts, work, bins["ansible-playbook"], env, **dp)
        sizes = {k: len(v) for k, v in launch_env.items() if len(v) > 1000}
        script = raw_script(cluster, project, launch_env, work)
        if os.environ.get("FLODL_BENCH_WARM", "1") != "0":
            subprocess.run(["sh", str(script)], check=True)  # one untimed round (page cache)
        chosen = os.environ.get("FLODL_BENCH_KINDS", ",".join(KINDS))
        kinds = [k for k in chosen.split(",") if k] + per_forks
        walk_script = raw_walk_in_script(cluster, project, recorded_walk_in(play, env, work, n), work)  # untimed
        samples = measure(kinds, reps, load, probe=probe_part(script, n), script=script, walk_script=walk_script,
                          steps=min(n, len(VARIANTS)), **common)
        return {"hosts": n, "up": up, "reps": reps, "samples": samples, "env_sizes": sizes, "load": load}


def recorded_walk_in(play: list[str], env: dict[str, str], work: Path, n: int) -> dict:
    """A walk_in run of the playbook (at a size fanout refuses: the one that builds) with the launch step's walk-in
    plan recorded: the bytes raw_walk_in sends (bench/_raw_walk_in.py)."""
    proc, record = record_walk_in(play + WALK_IN, env, work, n)
    if proc.returncode != 0 or not record or record["problems"]:
        raise RuntimeError(f"the recorded walk_in run failed:\n{failure_text(proc.stdout, proc.stderr)}")
    return record


def measure(kinds: list[str], reps: int, load: list[float], *, cluster, project, play, env, inv, floor, probe,
            script, walk_script, times, bins, steps) -> dict[str, list]:
    """Every kind once per repetition, the order rotating: each kind sees the same load."""
    samples: dict[str, list] = {k: [] for k in kinds}
    for rep in range(reps):
        for kind in kinds[rep % len(kinds):] + kinds[:rep % len(kinds)]:
            load.append(round(os.getloadavg()[0], 2))
            base, _sep, forks = kind.partition("@")
            extra = {"ANSIBLE_FORKS": forks} if forks and forks != "default" else {}
            if base in ("raw", "probe"):
                t0, _proc = run(["sh", str(script if base == "raw" else probe)])
                samples[kind].append({"total": time.monotonic() - t0})
                if base == "raw":
                    check_raw(cluster, script.parent, steps)
            elif base == "raw_walk_in":
                before = accepted(cluster)
                t0, _proc = run(["sh", str(walk_script)])
                took = time.monotonic() - t0
                check_raw_walk_in(cluster, walk_script, steps)
                after = accepted(cluster)
                samples[kind].append({"total": took, "steps": step_seconds(walk_script),
                                      "logins_per_worker": sorted({after[h] - before[h] for h in after})})
            elif base == "cluster_train":
                samples[kind].append(timed_train(play, env, times, cluster, fanout_missing))
            elif base == "walk_in":
                samples[kind].append(timed_train(play + WALK_IN, {**env, **extra}, times, cluster, walk_in_missing))
            elif base == "refused":
                samples[kind].append(refused(play, env, cluster, project))
            else:
                argv = ([bins["ansible-playbook"], str(floor), "-i", str(inv)] if base == "floor"
                        else [bins["ansible-playbook"], "-i", str(inv), "flodl.cluster.preflight"])
                if times.exists():
                    times.unlink()
                t0, proc = run(argv, {**env, **extra, "FLODL_BENCH_TIMES": str(times)})
                end = time.monotonic()
                if proc.returncode != 0:
                    raise RuntimeError(f"{kind} exited {proc.returncode}:\n{failure_text(proc.stdout, proc.stderr)}")
                costs = task_costs(read_events(times), end)
                per_host = sum(d for nm, _s, d in costs if "Result of this worker" in nm or "per-host" in nm)
                samples[kind].append({"total": end - t0, "per-host task": per_host,
                                      "lines": len((proc.stdout + proc.stderr).splitlines())})
    load.append(round(os.getloadavg()[0], 2))
    return samples


def bucket(row: dict, kind: str, name: str) -> float:
    return statistics.median(s["buckets"][name] for s in row["samples"][kind])


def train_cell(row: dict, kind: str) -> str:
    """sshd logins per worker and lines (all / the collection's own) of a kind's runs."""
    runs = row["samples"].get(kind)
    if not runs:
        return "- | -"
    logins = sorted({x for s in runs for x in s["logins_per_worker"]})
    return f"{logins} | {max(s['lines'] for s in runs)} / {max(s['own_lines'] for s in runs)}"


def report(rows: list[dict], version: str, reps: int) -> None:
    print(f"{version}; {os.cpu_count()} CPUs; {reps} repetitions; median (min-max) in seconds")
    print("\n| workers | minimum pipeline | cluster_train (fanout) | ratio | walk_in | ratio | raw_walk_in "
          "| walk_in / raw_walk_in | probe | preflight | ratio | floor play | fanout / floor | walk_in / floor "
          "| fanout: logins per worker | lines all / own | walk_in: logins per worker | lines all / own "
          "| raw_walk_in: logins per worker | load |")
    print("| ---: " * 20 + "|")
    for r in rows:
        fanout = "refused" if "refused" in r else spread(r, "cluster_train")
        print(f"| {r['hosts']} | {spread(r, 'raw')} | {fanout} | {ratio(r, 'cluster_train', 'raw')} | "
              f"{spread(r, 'walk_in')} | {ratio(r, 'walk_in', 'raw')} | {spread(r, 'raw_walk_in')} | "
              f"{ratio(r, 'walk_in', 'raw_walk_in')} | {spread(r, 'probe')} | "
              f"{spread(r, 'preflight')} | {ratio(r, 'preflight', 'probe')} | {spread(r, 'floor')} | "
              f"{ratio(r, 'cluster_train', 'floor')} | {ratio(r, 'walk_in', 'floor')} | "
              f"{train_cell(r, 'cluster_train')} | {train_cell(r, 'walk_in')} | "
              f"{sorted({x for s in r['samples'].get('raw_walk_in', []) for x in s['logins_per_worker']})} | "
              f"{min(r['load'])}-{max(r['load'])} |")
    for r in rows:
        for x in r.get("refused", []):
            print(f"\n{r['hosts']} workers: fanout refused before contact in {x['seconds']:.2f} s (rc {x['rc']}, "
                  f"{x['logins']} sshd logins, new builds: {x['builds'] or 'none'}, {x['lines']} lines); walk_in "
                  f"ran: {ratio(r, 'walk_in', 'probe')} the probe.\n  {x['message']}")
    print("\nPer-host tasks by forks (ANSIBLE_FORKS; preflight's worker_result, the floor play's per-host debug, "
          "walk_in's agent start and collect)")
    print("| workers | kind | forks | whole play | its per-host task | per worker (ms) |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for r in rows:
        for kind in sorted(r["samples"]):
            base, _sep, forks = kind.partition("@")
            if base in ("preflight", "floor"):
                ph = med(r, kind, "per-host task")
                print(f"| {r['hosts']} | {base} | {forks or 'default'} | {spread(r, kind)} | {ph:.2f} | "
                      f"{1000 * ph / r['hosts']:.1f} |")
            elif base == "walk_in":  # its per-host tasks that connect: the agents' start and collect
                go, back = bucket(r, kind, "agent start"), bucket(r, kind, "agent collect")
                print(f"| {r['hosts']} | walk_in | {forks or 'default'} | {spread(r, kind)} | start {go:.2f} + "
                      f"collect {back:.2f} | {1000 * (go + back) / r['hosts']:.1f} |")
    names = ["startup", *BUCKETS, "other steps"]
    print("\nWhere each cluster_train's time goes (medians, seconds)")
    print("| workers | mode | " + " | ".join(names) + " | floor: per-host task |")
    print("| ---: | --- |" + " ---: |" * (len(names) + 1))
    for r in rows:
        for kind in [k for k in TRAINS if r["samples"].get(k)]:
            start = med(r, kind, "startup")
            floor = f"{med(r, 'floor', 'per-host task'):.2f}" if r["samples"].get("floor") else "-"
            print(f"| {r['hosts']} | {kind} | {start:.2f} | "
                  + " | ".join(f"{bucket(r, kind, b):.2f}" for b in names[1:]) + f" | {floor} |")
    steps_table(rows)
    print("\nCost per added worker between consecutive sizes (milliseconds)")
    cols = ["raw", "cluster_train", "walk_in", "raw_walk_in", "probe", "preflight", "floor"]
    parts = [("walk_in", "agent start"), ("walk_in", "agent collect"), ("walk_in", "per-host tasks"),
             ("cluster_train", "sweep")]
    print("| workers | " + " | ".join(cols) + " | " + " | ".join(f"{k}: {b}" for k, b in parts) + " |")
    print("| ---: |" + " ---: |" * (len(cols) + len(parts)))
    for a, b in zip(rows, rows[1:]):
        dn = (b["hosts"] - a["hosts"]) / 1000

        def slope(kind, name=None):
            if not (a["samples"].get(kind) and b["samples"].get(kind)):
                return "-"
            va, vb = (med(a, kind), med(b, kind)) if name is None else (bucket(a, kind, name), bucket(b, kind, name))
            return f"{(vb - va) / dn:.1f}"

        print(f"| {a['hosts']}-{b['hosts']} | " + " | ".join(slope(k) for k in cols) + " | "
              + " | ".join(slope(k, n) for k, n in parts) + " |")
    for r in rows:
        print(f"\n{r['hosts']} workers: launch variables over 1000 bytes: {r.get('env_sizes', 'refused')}; "
              f"hosts up in {r['up']:.1f} s")
        for kind in [k for k in TRAINS if r["samples"].get(k)]:
            print(f"  tasks of the last {kind} (seconds):")
            for name, sec in r["samples"][kind][-1]["tasks"]:
                print(f"    {sec:7.3f}  {name}")


def main() -> int:
    args = bench_args(__doc__, "8,32,128,200,500")
    # preflight, the floor play and walk_in again with these ANSIBLE_FORKS values ("default": Ansible's own, 5)
    forks = [f.strip() for f in os.environ.get("FLODL_BENCH_FORKS", "default").split(",") if f.strip()]

    def one_size(ws: Workspace, n: int, rows: list[dict]) -> None:
        rows.append(bench_size(n, args.reps, ws.bins, ws.env, ws.work, forks))
        print(f"  N={n}: done", file=sys.stderr)
        if args.json:  # after every size: a long run keeps what it measured
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps({"ansible": ws.version, "cpus": os.cpu_count(), "rows": rows}))

    return run_sizes(args, "fsb-", require_root(), one_size, lambda ws, rows: report(rows, ws.version, args.reps))


if __name__ == "__main__":
    sys.exit(main())
