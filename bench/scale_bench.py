"""Scale: preflight and ``cluster_train`` from 8 to 200 workers against the minimum pipeline (issue 19).

For each N it brings up N namespace ssh hosts (tests/harness/netns_cluster.py) sharing one copy of
examples/demo (two libtorch variants alternating over the hosts), installs the collection from its
tarball, builds the binaries once, then times, interleaved in the same run (the order rotates every
repetition, so every kind sees the same load):

* ``raw``: the minimum pipeline of ``cluster_train_bench.py``: a parallel ssh probe (the plugin's argv
  and probe, ``&`` + ``wait``), a no-op ``cargo build`` per variant in parallel, then the stand-in
  launcher with fdl-cli's environment: one ssh per rank, flodl's cleanup before and after;
* ``probe``: the parallel ssh probe alone (the yardstick of ``preflight``);
* ``cluster_train``: ``ansible-playbook flodl.cluster.cluster_train`` on the same hosts (reuse on);
* ``preflight``: ``ansible-playbook flodl.cluster.preflight``;
* ``floor``: Ansible's floor for the shape (``_timing.FLOOR_PLAY``: a run-once and a per-host ``debug``).

Each cluster_train is checked: every rank exited 0, exactly one accepted sshd login per worker (each
host's sshd log), and its lines without ``-v`` counted: all of stdout + stderr, and the collection's
own (everything but the lines the launch command streams, i.e. the training's output). The timing
callback splits each run into start-up, the sweep (the preflight probe step), the other run-once steps,
the per-host tasks (``worker_result``) and rendering (the launch environment step); the cost per added
worker is the slope between consecutive sizes.

A size whose launch environment cannot fit (exec's 128 KiB per string) must be refused before contact:
then the bench checks 0 sshd logins and no build target, records the refusal and times it instead.

    python bench/scale_bench.py [--sizes 8,32,128,200] [--reps 2]
        [--ansible-playbook /work/main/.venv/ansible-2.19/bin/ansible-playbook] [--json FILE]
"""
from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import FLOOR_PLAY, Workspace, bench_args, read_events, run_sizes, task_costs  # noqa: E402
from cluster_train_bench import (  # noqa: E402
    VARIANTS, bench_hosts, check_raw, inventory, raw_script, recorded_launch_env, run, timed_run,
)
from netns_cluster import SHARED_BASE, Cluster, require_root  # noqa: E402

KINDS = ["raw", "cluster_train", "probe", "preflight", "floor"]
LAUNCH_TASK = "Run the launch command"
# Where a cluster_train's time goes, by task name (the rest of the run-once steps is "other steps").
BUCKETS = {
    "sweep": ("Probe every worker",),
    "per-host tasks": ("Result of this worker",),
    "rendering": ("Prepare the launcher environment",),
    "builds": ("Build on the build host",),
    "launch command": (LAUNCH_TASK,),
}
_RESULT_LINE = re.compile(r"^(ok|changed|fatal|failed|skipping): \[")


def accepted(cluster: Cluster) -> dict[str, int]:
    return {h.name: h.log().count("Accepted publickey for ") for h in cluster}


def own_lines(text: str) -> tuple[int, int]:
    """(all lines, the collection's own): the launch command's streamed lines are the training's output."""
    lines = text.splitlines()
    streamed, inside = 0, False
    for line in lines:
        if line.startswith("flodl launch: running "):
            inside = True
            continue
        if inside and (_RESULT_LINE.match(line) or line.startswith(("TASK [", "PLAY RECAP"))):
            inside = False
        elif inside:
            streamed += 1
    return len(lines), len(lines) - streamed


def buckets(costs: list[tuple[str, float, float]]) -> dict[str, float]:
    out = {k: sum(d for n, _s, d in costs if any(p in n for p in pats)) for k, pats in BUCKETS.items()}
    out["other steps"] = sum(d for _n, _s, d in costs) - sum(out.values())
    return out


def timed_train(argv: list[str], env: dict[str, str], times: Path, cluster: Cluster) -> dict:
    before = accepted(cluster)
    t0, end, proc, costs, _work = timed_run(argv, env, times, cluster)
    after = accepted(cluster)
    logins = sorted({after[h] - before[h] for h in after})
    total_lines, own = own_lines(proc.stdout + proc.stderr)
    return {"total": end - t0, "startup": costs[0][1] - t0, "buckets": buckets(costs), "logins_per_worker": logins,
            "lines": total_lines, "own_lines": own, "tasks": [(n, round(d, 4)) for n, _s, d in costs]}


def refused(argv: list[str], env: dict[str, str], cluster: Cluster, project: Path) -> dict:
    """A size that cannot launch: refused before contact, with no login and no build."""
    before = accepted(cluster)
    t0, proc = run(argv, env)
    took = time.monotonic() - t0
    logins = sum(accepted(cluster).values()) - sum(before.values())
    builds = [p.name for p in (project / "target" / "cluster").glob("h*")]
    msg = next((ln for ln in proc.stdout.splitlines() if ln.startswith("fatal: ")), proc.stdout[-1500:])
    return {"rc": proc.returncode, "seconds": took, "logins": logins, "builds": builds, "message": msg[:2000],
            "lines": len((proc.stdout + proc.stderr).splitlines())}


def bench_size(n: int, reps: int, bins: dict[str, str], env: dict[str, str], work: Path,
               forks: list[str]) -> dict:
    # Short paths: every worker repeats them in the topology, and at 128 workers its compact form is within a
    # few percent of exec's limit (14 more characters per path were enough to have the run refused).
    shared = SHARED_BASE / f"s{os.getpid()}"
    with bench_hosts(n, shared, work, f"k{n}", up_timeout=120) as hosts:
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
        times = work / "times.json"
        # The first run builds the binaries, or is refused (nothing is launched at this size): then the refusal
        # is timed instead, beside the kinds that do not launch (their per-host tasks are still measured).
        before = accepted(cluster)
        _t, proc = run(play, env)
        if proc.returncode != 0:
            if sum(accepted(cluster).values()) != sum(before.values()):
                raise RuntimeError(f"first run failed after contact:\n{proc.stdout[-4000:]}\n{proc.stderr[-3000:]}")
            script = raw_script(cluster, project, {}, work)  # its probe part only
            lines = script.read_text().splitlines()
            probe = work / f"probe-{n}.sh"
            probe.write_text("\n".join(lines[:lines.index("wait") + 1]) + "\n")
            kinds = ["refused", "probe", *[f"{k}@{f}" for f in forks for k in ("preflight", "floor")]]
            samples = measure(kinds, reps, load, cluster=cluster, project=project, play=play, env=env, inv=inv,
                              floor=floor, probe=probe, script=script, times=times, bins=bins, steps=0)
            return {"hosts": n, "up": up, "reps": reps, "samples": samples, "load": load, "refused": samples["refused"]}
        _recorded, launch_env = recorded_launch_env(hosts, work, bins["ansible-playbook"], env, **dp)
        sizes = {k: len(v) for k, v in launch_env.items() if len(v) > 1000}
        script = raw_script(cluster, project, launch_env, work)
        lines = script.read_text().splitlines()
        probe = work / f"probe-{n}.sh"
        probe.write_text("\n".join(lines[:lines.index("wait") + 1]) + "\n")
        if os.environ.get("FLODL_BENCH_WARM", "1") != "0":
            subprocess.run(["sh", str(script)], check=True)  # one untimed round (page cache)
        # FLODL_BENCH_KINDS=raw,cluster_train: only those (a big size on a busy machine)
        chosen = os.environ.get("FLODL_BENCH_KINDS", ",".join(KINDS))
        kinds = [k for k in chosen.split(",") if k]
        kinds += [f"{k}@{f}" for f in forks if f != "default" for k in ("preflight", "floor")]
        samples = measure(kinds, reps, load, cluster=cluster, project=project, play=play, env=env, inv=inv,
                          floor=floor, probe=probe, script=script, times=times, bins=bins,
                          steps=min(n, len(VARIANTS)))
        return {"hosts": n, "up": up, "reps": reps, "samples": samples, "env_sizes": sizes, "load": load}


def measure(kinds: list[str], reps: int, load: list[float], *, cluster, project, play, env, inv, floor, probe,
            script, times, bins, steps) -> dict[str, list]:
    """Every kind once per repetition, the order rotating: each kind sees the same load."""
    samples: dict[str, list] = {k: [] for k in kinds}
    for rep in range(reps):
        for kind in kinds[rep % len(kinds):] + kinds[:rep % len(kinds)]:
            load.append(round(os.getloadavg()[0], 2))
            base, _sep, forks = kind.partition("@")
            if base in ("raw", "probe"):
                t0, _proc = run(["sh", str(script if base == "raw" else probe)])
                samples[kind].append({"total": time.monotonic() - t0})
                if base == "raw":
                    check_raw(cluster, work_of(script), steps)
            elif base == "cluster_train":
                samples[kind].append(timed_train(play, env, times, cluster))
            elif base == "refused":
                samples[kind].append(refused(play, env, cluster, project))
            else:
                argv = ([bins["ansible-playbook"], str(floor), "-i", str(inv)] if base == "floor"
                        else [bins["ansible-playbook"], "-i", str(inv), "flodl.cluster.preflight"])
                if times.exists():
                    times.unlink()
                extra = {"ANSIBLE_FORKS": forks} if forks and forks != "default" else {}
                t0, proc = run(argv, {**env, **extra, "FLODL_BENCH_TIMES": str(times)})
                end = time.monotonic()
                if proc.returncode != 0:
                    raise RuntimeError(f"{kind} exited {proc.returncode}:\n{proc.stdout[-3000:]}")
                costs = task_costs(read_events(times), end)
                per_host = sum(d for nm, _s, d in costs if "Result of this worker" in nm or "per-host" in nm)
                samples[kind].append({"total": end - t0, "per-host task": per_host,
                                      "lines": len((proc.stdout + proc.stderr).splitlines())})
    load.append(round(os.getloadavg()[0], 2))
    return samples


def work_of(script: Path) -> Path:
    return script.parent


def med(row: dict, kind: str, key: str = "total") -> float:
    return statistics.median(s[key] for s in row["samples"][kind])


def spread(row: dict, kind: str, key: str = "total") -> str:
    vals = [s[key] for s in row["samples"][kind]]
    return f"{statistics.median(vals):.2f} ({min(vals):.2f}-{max(vals):.2f})"


def bucket(row: dict, name: str) -> float:
    return statistics.median(s["buckets"][name] for s in row["samples"]["cluster_train"])


def report(rows: list[dict], version: str, reps: int) -> None:
    done = [r for r in rows if "refused" not in r]
    for r in [r for r in done if not all(k in r["samples"] for k in KINDS)]:  # FLODL_BENCH_KINDS=raw,cluster_train
        ct = r["samples"]["cluster_train"]
        print(f"{r['hosts']} workers (load {min(r['load'])}-{max(r['load'])}): minimum pipeline {spread(r, 'raw')}, "
              f"cluster_train {spread(r, 'cluster_train')}, ratio {med(r, 'cluster_train') / med(r, 'raw'):.2f}x, "
              f"sshd logins per worker {sorted({x for s in ct for x in s['logins_per_worker']})}, lines "
              f"{max(s['lines'] for s in ct)} / {max(s['own_lines'] for s in ct)}, buckets {ct[-1]['buckets']}")
    done = [r for r in done if all(k in r["samples"] for k in KINDS)]
    print(f"{version}; {os.cpu_count()} CPUs; {reps} repetitions; median (min-max) in seconds")
    print("\n| workers | minimum pipeline | cluster_train | ratio | probe | preflight | ratio | floor play "
          "| sshd logins per worker | lines (all / the collection's own) | per worker | load |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in done:
        ct = r["samples"]["cluster_train"]
        logins = sorted({x for s in ct for x in s["logins_per_worker"]})
        own = max(s["own_lines"] for s in ct)
        print(f"| {r['hosts']} | {spread(r, 'raw')} | {spread(r, 'cluster_train')} | "
              f"{med(r, 'cluster_train') / med(r, 'raw'):.2f}x | {spread(r, 'probe')} | {spread(r, 'preflight')} | "
              f"{med(r, 'preflight') / med(r, 'probe'):.2f}x | {spread(r, 'floor')} | {logins} | "
              f"{max(s['lines'] for s in ct)} / {own} | {own / r['hosts']:.2f} | "
              f"{min(r['load'])}-{max(r['load'])} |")
    for r in rows:
        for x in r.get("refused", []):
            print(f"\n{r['hosts']} workers (load {min(r['load'])}-{max(r['load'])}): refused before contact in "
                  f"{x['seconds']:.2f} s (rc {x['rc']}, "
                  f"{x['logins']} sshd logins, builds started: {x['builds'] or 'none'}, {x['lines']} lines):"
                  f"\n  {x['message']}")
    print("\nPer-host tasks by forks (ANSIBLE_FORKS; preflight's worker_result, the floor play's per-host debug)")
    print("| workers | kind | forks | whole play | its per-host task | per worker (ms) |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for r in rows:
        for kind in sorted(r["samples"]):
            base, _sep, forks = kind.partition("@")
            if base in ("preflight", "floor"):
                ph = statistics.median(x["per-host task"] for x in r["samples"][kind])
                print(f"| {r['hosts']} | {base} | {forks or 'default'} | {spread(r, kind)} | {ph:.2f} | "
                      f"{1000 * ph / r['hosts']:.1f} |")
    names = ["startup", *BUCKETS, "other steps"]
    print("\nWhere cluster_train's time goes (medians, seconds)")
    print("| workers | " + " | ".join(names) + " | floor: per-host task |")
    print("| ---: |" + " ---: |" * (len(names) + 1))
    for r in done:
        start = statistics.median(s["startup"] for s in r["samples"]["cluster_train"])
        print(f"| {r['hosts']} | {start:.2f} | " + " | ".join(f"{bucket(r, b):.2f}" for b in names[1:])
              + f" | {med(r, 'floor', 'per-host task'):.2f} |")
    print("\nCost per added worker between consecutive sizes (milliseconds)")
    print("| workers | minimum pipeline | cluster_train | probe | preflight | sweep | per-host tasks | rendering "
          "| floor play |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for a, b in zip(done, done[1:]):
        dn = (b["hosts"] - a["hosts"]) / 1000

        def slope(kind, key="total"):
            return f"{(med(b, kind, key) - med(a, kind, key)) / dn:.1f}"

        def bslope(name):
            return f"{(bucket(b, name) - bucket(a, name)) / dn:.1f}"

        print(f"| {a['hosts']}-{b['hosts']} | {slope('raw')} | {slope('cluster_train')} | {slope('probe')} | "
              f"{slope('preflight')} | {bslope('sweep')} | {bslope('per-host tasks')} | {bslope('rendering')} | "
              f"{slope('floor')} |")
    for r in done:
        print(f"\n{r['hosts']} workers: launch variables over 1000 bytes: {r['env_sizes']}; "
              f"hosts up in {r['up']:.1f} s")
        print("  tasks of the last cluster_train (seconds):")
        for name, sec in r["samples"]["cluster_train"][-1]["tasks"]:
            print(f"    {sec:7.3f}  {name}")


def main() -> int:
    args = bench_args(__doc__, "8,32,128,200")
    # preflight and the floor play again with these ANSIBLE_FORKS values ("default": Ansible's own, 5)
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
