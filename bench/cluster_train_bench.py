"""End to end: ``cluster_train`` against the raw pipeline fdl-cli runs (issue 12).

For each N it brings up N namespace ssh hosts (tests/harness/netns_cluster.py) sharing one copy of
the demo crate (examples/demo, two libtorch variants alternating over the hosts), builds the binaries
once, then times, in the same run and interleaved, for several repetitions:

* ``raw``: what a careful operator would script, doing what fdl-cli does: the preflight probe by plain
  parallel ssh (one ``ssh ... &`` per host with the plugin's own argv and probe, ``wait``), a no-op
  ``cargo build`` per distinct variant (in parallel, the plugin's own commands and environments), then
  the launcher: the demo's stand-in (examples/demo/standin_launcher.py) with the environment fdl-cli
  prepares (recorded from the playbook with reuse off), which runs flodl's orphan cleanup, one ssh
  per host with flodl's argv running the prebuilt binary (which exits at once), the cleanup again;
* ``playbook``: ``ansible-playbook flodl.cluster.cluster_train`` (collection installed from its
  tarball) on the same hosts, same variants, same launcher and rank, connection reuse on (default);
* ``no-reuse``: the same with ``-e flodl_ssh_reuse=false`` (every ssh pays its own handshake);
* ``empty``: ``ansible-playbook`` of a play with no task (Ansible's own start-up, for reading).

A tiny callback plugin (bench/_timing.py) records every task's start, which gives the playbook's
phases: start-up (spawn to the first task), validate, preflight, prebuild, launch (until the launch
command, i.e. the last rank, exited) and tail (artifacts, per-host results, recap, exit), and the
cost of the per-host tasks (argument-spec validation, worker_result). Each run's output is checked.
Needs root (network namespaces) and cargo.

The worker names resolve on the controller, as in a real cluster: the bench runs in a private mount
namespace of its own (``unshare --mount``) with an ``/etc/hosts`` that adds ``<ip> h<i>`` for its hosts,
so nothing on the machine changes. (Unresolvable names cost a DNS timeout each, to fdl-cli as to the
collection: both resolve every worker's ``host`` for the launcher's extra hosts.)

    python bench/cluster_train_bench.py [--sizes 8,32] [--reps 5]
        [--ansible-playbook /work/main/.venv/ansible-2.19/bin/ansible-playbook] [--json FILE]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "examples" / "demo"
sys.path.insert(0, str(REPO / "tests" / "harness"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import (  # noqa: E402
    Workspace, bench_args, failure_text, is_per_host, per_host_seconds, read_events, run_sizes, task_costs,
    work_seconds,
    write_floor_play,
)
from netns_cluster import SHARED_BASE, Cluster, HostSpec, require_root  # noqa: E402

VARIANTS = ["precompiled/cu128", "precompiled/rocm63"]
RECORDER = "import json, os, sys\njson.dump(dict(os.environ), open(sys.argv[1], 'w'))\n"
KINDS = ["raw", "playbook", "no-reuse", "empty", "cargo", "floor"]
PHASES = ["startup", "validate", "preflight", "prebuild", "launch", "tail"]
EXTRA = ["prebuild step"]
CRITERION_B = 0.15  # issue 17: the prebuild and launch phases, each at most this over Ansible's floor for their tasks
LAUNCH_COMMAND = "Run the launch command"
# Role ends (Ansible's implicit role_complete task, run for every host) inside each phase's window: the prebuild
# role's comes before the launch role's first task; the launch window closes with the launch command.
ROLE_ENDS = {"prebuild": 1, "launch": 0}


def inventory(cluster: Cluster, project: Path, path: Path, **extra) -> Path:
    # No harness ControlPath (a user setting the collection never overrides): cold connections unless reused.
    common = " ".join(f"-o {o}" for o in cluster.ssh_options)
    host_vars = {
        h.name: {"flodl_path": str(project), "flodl_arch": VARIANTS[i % len(VARIANTS)], "flodl_local_devices": [0],
                 "flodl_nccl_socket_ifname": "eth0", "ansible_ssh_common_args": common}
        for i, h in enumerate(cluster)
    }
    group = {
        "flodl_controller_host": cluster.controller_ip, "flodl_controller_path": str(project),
        "flodl_cmd": "train", "flodl_launch_command": "python3 standin_launcher.py",
        "flodl_cluster_env": {"FLODL_DEMO_STEPS": "0", "FLODL_DEMO_STEP_MS": "0"},
    }
    group.update(extra)
    return cluster.write_inventory(path, group, host_vars)


def raw_script(cluster: Cluster, project: Path, launch_env: dict[str, str], work: Path) -> Path:
    """probe sweep; no-op cargo build per variant, in parallel; the launcher (fdl-cli's pipeline)."""
    from ansible_collections.flodl.cluster.plugins.module_utils._probe import preflight_probe as pf
    from ansible_collections.flodl.cluster.plugins.module_utils._run.prebuild import plan_prebuild
    from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import posix_quote as q
    from ansible_collections.flodl.cluster.plugins.module_utils._ssh.ssh import probe_argv
    from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import effective_data_path

    out = work / "raw-out"
    out.mkdir(exist_ok=True)
    workers = []
    for i, h in enumerate(cluster):
        ssh = {"target": h.ip, "user": cluster.login_user, "identity_file": str(cluster.key_path),
               "options": list(cluster.ssh_options)}
        workers.append({"host": h.name, "ssh": ssh, "path": str(project), "arch": VARIANTS[i % len(VARIANTS)],
                        "local_devices": [0]})
    lines = ["#!/bin/sh", "# 1. preflight probe: one ssh per host, in parallel"]
    for w in workers:
        probe = pf.remote_command(pf.probe_script(effective_data_path(w.get("data_path"))[0], abi=True, gpus=False))
        argv = probe_argv(w, probe)
        lines.append(" ".join(q(a) for a in argv) + f" </dev/null >{out}/probe-{w['host']} 2>&1 &")
    lines += ["wait", "# 2. no-op cargo build per distinct variant, in parallel"]
    plan = plan_prebuild(str(project), "train", workers)
    for step in plan.steps:
        env = " ".join(f"{k}={q(v)}" for k, v in sorted(step.env.items()))
        lines.append(f"(cd {q(step.cwd)} && env {env} sh -c {q(step.command)}) </dev/null "
                     f">{out}/build-{step.host} 2>&1 &")
    lines += ["wait", "# 3. the launcher: cleanup, one ssh per host running the prebuilt binary, wait, cleanup"]
    env = " ".join(f"{k}={q(v)}" for k, v in sorted(launch_env.items()))
    lines.append(f"cd {q(str(project))} && env {env} python3 standin_launcher.py </dev/null >{out}/launcher 2>&1")
    path = work / f"raw-{len(workers)}.sh"
    path.write_text("\n".join(lines) + "\n")
    start = lines.index("# 2. no-op cargo build per distinct variant, in parallel")
    stop = lines.index("# 3. the launcher: cleanup, one ssh per host running the prebuilt binary, wait, cleanup")
    (work / f"cargo-{len(workers)}.sh").write_text("\n".join(["#!/bin/sh", *lines[start:stop]]) + "\n")
    return path


def check_raw(cluster: Cluster, work: Path, steps: int) -> None:
    out = work / "raw-out"
    bad = [h.name for h in cluster if "__FLODL_END__" not in (out / f"probe-{h.name}").read_text()]
    launcher = (out / "launcher").read_text()
    bad += [h.name for h in cluster if f"[standin-launcher] {h.name}: exited with status 0" not in launcher]
    builds = list(out.glob("build-*"))
    if len(builds) != steps or any("Finished" not in p.read_text() for p in builds) or bad:
        raise RuntimeError(f"raw pipeline incomplete on {bad}:\n{launcher[-2000:]}")


def run(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.monotonic()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    return t0, proc


def fanout_missing(cluster: Cluster, out: str) -> list[str]:
    """The workers whose rank the stand-in launcher (fan-out) did not see exit 0."""
    return [h.name for h in cluster if f"[standin-launcher] {h.name}: exited with status 0" not in out]


def timed_run(argv: list[str], env: dict[str, str], times: Path, cluster: Cluster,
              missing=fanout_missing) -> tuple[float, float, subprocess.CompletedProcess,
                                               list[tuple[str, float, float]], dict[str, float]]:
    """A timed playbook that must pass with every rank run (``missing(cluster, stdout)`` names the workers
    whose ranks did not): (start, end, the process, its task costs, the wall time of the commands its tasks ran)."""
    if times.exists():
        times.unlink()
    t0, proc = run(argv, {**env, "FLODL_BENCH_TIMES": str(times)})
    end = time.monotonic()
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:3]} exited {proc.returncode}:\n{failure_text(proc.stdout, proc.stderr)}")
    bad = missing(cluster, proc.stdout)
    if bad:
        raise RuntimeError(f"ranks did not run on {bad}:\n{proc.stdout[-3000:]}")
    events = read_events(times)
    return t0, end, proc, task_costs(events, next(t for k, _name, t in events if k == "stats")), work_seconds(events)


def timed_playbook(argv: list[str], env: dict[str, str], times: Path, cluster: Cluster) -> dict:
    t0, end, _proc, costs, work = timed_run(argv, env, times, cluster)
    starts = {}
    for name, start, _sec in costs:
        key = ("preflight" if "preflight :" in name else "prebuild" if "prebuild :" in name
               else "launch" if "launch :" in name else "validate")
        starts.setdefault(key, start)
    launch_end = next(s + d for n, s, d in costs if LAUNCH_COMMAND in n)
    first = costs[0][1]
    phases = {
        "startup": first - t0,
        "validate": starts["preflight"] - first,
        "preflight": starts["prebuild"] - starts["preflight"],
        "prebuild": starts["launch"] - starts["prebuild"],
        "launch": launch_end - starts["launch"],
        "tail": end - launch_end,
    }
    phases["prebuild step"] = next(d for n, _s, d in costs if "Build on the build host" in n)
    # Which tasks each phase ran (run once / per host), for its floor; the launch phase ends with its command.
    shape = {phase: [n for n, st, _d in costs if lo <= st < hi] for phase, lo, hi in (
        ("prebuild", starts["prebuild"], starts["launch"]), ("launch", starts["launch"], launch_end))}
    launcher = next(sec for name, sec in work.items() if LAUNCH_COMMAND in name)
    return {"total": end - t0, "phases": phases, "per_host": per_host_seconds(costs), "shape": shape,
            "launcher": launcher, "tasks": [(n, round(d, 4)) for n, _s, d in costs]}


@dataclass
class BenchHosts:
    cluster: Cluster
    project: Path
    up_seconds: float


@contextlib.contextmanager
def bench_hosts(n: int, shared: Path, work: Path, state: str, up_timeout: float = 30.0) -> Iterator[BenchHosts]:
    """N namespace hosts sharing a copy of the demo crate (plus the env recorder) under ``shared``, their names in
    this mount namespace's /etc/hosts; all of it undone after."""
    shared.mkdir(parents=True, exist_ok=True)
    os.chmod(shared, 0o755)
    project = shared / "proj"
    shutil.copytree(DEMO, project, ignore=shutil.ignore_patterns("target"))
    os.chmod(project, 0o755)
    (project / "record_env.py").write_text(RECORDER)
    t_up = time.monotonic()
    cluster = Cluster([HostSpec(f"h{i + 1}") for i in range(n)], work / state, shared_root=shared)
    cluster.up(timeout=up_timeout)
    up_seconds = time.monotonic() - t_up
    hosts_file = work / f"hosts-{n}"
    hosts_file.write_text(Path("/etc/hosts").read_text() + "".join(f"{h.ip} {h.name}\n" for h in cluster))
    subprocess.run(["mount", "--bind", str(hosts_file), "/etc/hosts"], check=True)  # this namespace only
    try:
        yield BenchHosts(cluster, project, up_seconds)
    finally:
        subprocess.run(["umount", "/etc/hosts"], check=False)
        cluster.down()
        shutil.rmtree(shared, ignore_errors=True)


def recorded_launch_env(hosts: BenchHosts, work: Path, playbook: str, env: dict[str, str],
                        **inv_vars: str) -> tuple[dict[str, str], dict[str, str]]:
    """cluster_train with the env recorder as the launch command (reuse off: fdl-cli's bytes): (every variable the
    command saw, the ones the launch phase added: fdl-cli's own, not what Ansible's process carries)."""
    n = len(list(hosts.cluster))
    record = work / f"launch-env-{n}.json"
    rec_inv = inventory(hosts.cluster, hosts.project, work / f"inv-rec-{n}.json", **inv_vars,
                        flodl_launch_command=f"python3 record_env.py {record}", flodl_ssh_reuse=False)
    _t, proc = run([playbook, "-i", str(rec_inv), "flodl.cluster.cluster_train"], env)
    if proc.returncode != 0:
        raise RuntimeError(f"recording run failed:\n{failure_text(proc.stdout, proc.stderr)}")
    recorded = json.loads(record.read_text())
    added = {k: v for k, v in recorded.items() if os.environ.get(k) != v and (
        k.startswith(("FLODL_", "FDL_", "LIBTORCH_", "CUDA_")) or k in ("HOSTNAME", "LD_LIBRARY_PATH"))}
    return recorded, added


def bench_size(n: int, reps: int, bins: dict[str, str], env: dict[str, str], work: Path) -> dict:
    with bench_hosts(n, SHARED_BASE / f"ctbench-{os.getpid()}-{n}", work, f"state-{n}") as hosts:
        cluster, project = hosts.cluster, hosts.project
        inv = inventory(cluster, project, work / f"inv-{n}.json")
        play = [bins["ansible-playbook"], "-i", str(inv), "flodl.cluster.cluster_train"]
        # Build the binaries once; then record fdl-cli's launch environment (reuse off: fdl-cli's bytes).
        _t, proc = run(play, env)
        if proc.returncode != 0:
            raise RuntimeError(f"first build failed:\n{failure_text(proc.stdout, proc.stderr)}")
        recorded, launch_env = recorded_launch_env(hosts, work, bins["ansible-playbook"], env)
        print(f"  N={n}: launch environment {sorted(k for k in recorded if os.environ.get(k) != recorded[k])}",
              file=sys.stderr)
        steps = len(VARIANTS) if n >= len(VARIANTS) else n
        script = raw_script(cluster, project, launch_env, work)
        empty = work / "empty.yml"
        empty.write_text("- name: Nothing\n  hosts: localhost\n  gather_facts: false\n  tasks: []\n")
        times = work / "times.json"
        samples: dict[str, list] = {k: [] for k in KINDS}
        # one untimed round of the raw side (page cache)
        subprocess.run(["sh", str(script)], check=True)
        for rep in range(reps):
            order = KINDS[rep % len(KINDS):] + KINDS[:rep % len(KINDS)]  # rotate: each kind leads once
            for kind in order:
                if kind == "raw":
                    t0, proc = run(["sh", str(script)])
                    samples[kind].append({"total": time.monotonic() - t0})
                    check_raw(cluster, work, steps)
                elif kind == "cargo":  # cargo's own no-op per variant, in parallel (item 4's yardstick)
                    t0, proc = run(["sh", str(work / f"cargo-{n}.sh")])
                    samples[kind].append({"total": time.monotonic() - t0})
                elif kind == "floor":
                    floor = write_floor_play(work, with_role=True)
                    t0, proc = run([bins["ansible-playbook"], str(floor), "-i", str(inv)],
                                   {**env, "FLODL_BENCH_TIMES": str(times)})
                    costs = task_costs(read_events(times), time.monotonic())
                    short = [(n.rsplit(" : ", 1)[-1], d) for n, _s, d in costs]  # the role's task is "<role> : ..."
                    floors = {n.split("floor ")[1]: d for n, d in short if n.startswith("floor ") and "end" not in n}
                    floors["role end"] = floors.pop("role task") - floors["run-once task"]
                    samples[kind].append({"total": time.monotonic() - t0, **floors})
                elif kind == "empty":
                    t0, proc = run([bins["ansible-playbook"], str(empty), "-i", str(inv)], env)
                    samples[kind].append({"total": time.monotonic() - t0})
                else:
                    argv = play + (["-e", "flodl_ssh_reuse=false"] if kind == "no-reuse" else [])
                    samples[kind].append(timed_playbook(argv, env, times, cluster))
        return summarize(n, reps, samples, steps)


def stat(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(n: int, reps: int, samples: dict[str, list], steps: int) -> dict:
    totals = {k: stat([s["total"] for s in v]) for k, v in samples.items()}
    phases = {k: {p: stat([s["phases"][p] for s in samples[k]]) for p in PHASES + EXTRA} for k in ("playbook", "no-reuse")}
    per_host = {k: {p: stat([s["per_host"][p] for s in samples[k]]) for p in ("argspec", "worker_result")}
                for k in ("playbook", "no-reuse")}
    floor = {k: stat([s[k] for s in samples["floor"]]) for k in ("run-once task", "per-host task", "role end")}
    return {"hosts": n, "reps": reps, "variants": steps, "totals": totals, "phases": phases, "per_host": per_host,
            "floor": floor, "criterion_b": criterion_b(samples, floor),
            "ratio": totals["playbook"]["median"] / totals["raw"]["median"],
            "ratio_no_reuse": totals["no-reuse"]["median"] / totals["raw"]["median"],
            "tasks": samples["playbook"][-1]["tasks"], "samples": samples}


def criterion_b(samples: dict[str, list], floor: dict[str, dict[str, float]]) -> dict[str, dict]:
    """Issue 17's criterion (b), reuse on: what the prebuild and the launch phase cost over Ansible's floor for the
    tasks they ran. The floor is the work inside (cargo's no-op; the launch command's own wall time, which the
    action reports) plus, per task, the floor play's run-once or per-host `debug` of the same repetition, plus
    the floor role's end for a role that ends in the phase (Ansible's implicit per-host role_complete, which the
    collection's roles pay as any role does). ``over_without_role_end`` leaves that out, for reading."""
    out = {}
    for phase in ("prebuild", "launch"):
        runs = samples["playbook"]
        names = runs[-1]["shape"][phase]
        per_host = sum(1 for name in names if is_per_host(name))
        ends = ROLE_ENDS[phase]

        def tasks_floor(f: dict[str, float]) -> float:
            return (len(names) - per_host) * f["run-once task"] + per_host * f["per-host task"] + ends * f["role end"]

        work = ([samples["cargo"][i]["total"] for i in range(len(runs))] if phase == "prebuild"
                else [r["launcher"] for r in runs])
        # Each repetition against its own floor run (the same minute): the machine's speed drifts between
        # repetitions by more than the margin measured.
        floors = [tasks_floor(f) for f in samples["floor"]]
        over = [r["phases"][phase] - w - fl for r, w, fl in zip(runs, work, floors)]
        ends_seconds = [ends * f["role end"] for f in samples["floor"]]
        out[phase] = {"tasks": f"{len(names) - per_host} run-once + {per_host} per-host + {ends} role end",
                      "work": stat(work),
                      "tasks_floor": tasks_floor({k: v["median"] for k, v in floor.items()}),
                      "phase": stat([r["phases"][phase] for r in runs]), "over": stat(over),
                      "over_without_role_end": stat([o + e for o, e in zip(over, ends_seconds)])}
    return out


def fmt(s: dict[str, float]) -> str:
    return f"{s['median']:.2f} ({s['min']:.2f}-{s['max']:.2f})"


def report(ws: Workspace, rows: list[dict], args: argparse.Namespace) -> None:
    print(f"{ws.version}; {os.cpu_count()} CPUs; {args.reps} repetitions; median (min-max) in seconds")
    print("| hosts | raw pipeline | cluster_train | ratio | no reuse | ratio | empty play | load |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        t = r["totals"]
        print(f"| {r['hosts']} | {fmt(t['raw'])} | {fmt(t['playbook'])} | {r['ratio']:.2f}x | "
              f"{fmt(t['no-reuse'])} | {r['ratio_no_reuse']:.2f}x | {fmt(t['empty'])} | "
              f"{r['load'][0]}-{r['load'][1]} |")
    print("\ncluster_train by phase (reuse on / off), median (min-max) in seconds")
    print("| hosts | " + " | ".join(PHASES) + " | per-host tasks (argspec + worker_result) |")
    print("| ---: |" + " ---: |" * (len(PHASES) + 1))
    for r in rows:
        for kind in ("playbook", "no-reuse"):
            ph, pht = r["phases"][kind], r["per_host"][kind]
            label = f"{r['hosts']}{'' if kind == 'playbook' else ' off'}"
            print(f"| {label} | " + " | ".join(fmt(ph[p]) for p in PHASES)
                  + f" | {pht['argspec']['median']:.2f} + {pht['worker_result']['median']:.2f} |")
    print("\nno-op prebuild vs cargo's own no-op per variant in parallel, median (min-max) in seconds")
    print("| hosts | variants | cargo no-op | prebuild step | ratio | prebuild phase | ratio |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        c, ph = r["totals"]["cargo"], r["phases"]["playbook"]
        print(f"| {r['hosts']} | {r['variants']} | {fmt(c)} | {fmt(ph['prebuild step'])} | "
              f"{ph['prebuild step']['median'] / c['median']:.2f}x | {fmt(ph['prebuild'])} | "
              f"{ph['prebuild']['median'] / c['median']:.2f}x |")
    print("\nAnsible's floor on the same hosts (a run-once `debug` delegated to localhost, a per-host `debug`, the end of "
          "a role of one such run-once `debug`) and "
          "the cheapest prebuild phase it allows: cargo no-op + run-once task + per-host task")
    print("| hosts | run-once task | per-host task | role end | cargo + floor | ratio to cargo |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        c, f = r["totals"]["cargo"]["median"], r["floor"]
        best = c + f["run-once task"]["median"] + f["per-host task"]["median"]
        print(f"| {r['hosts']} | {fmt(f['run-once task'])} | {fmt(f['per-host task'])} | {fmt(f['role end'])} "
              f"| {best:.2f} | {best / c:.2f}x |")
    print(f"\ncriterion (b), reuse on: each phase at most {CRITERION_B:.2f} s over Ansible's floor for its tasks "
          "(the work inside, cargo's no-op or the launch command's own time, plus a floor `debug` per task and the "
          "floor role's end per role that ends in the phase)")
    print("| hosts | phase | its tasks | work inside | tasks' floor | phase | over the floor | verdict "
          "| over, no role end in the floor |")
    print("| ---: | --- | --- | ---: | ---: | ---: | ---: | --- | ---: |")
    for r in rows:
        for phase, c in r["criterion_b"].items():
            verdict = "PASS" if c["over"]["median"] <= CRITERION_B else "over"
            print(f"| {r['hosts']} | {phase} | {c['tasks']} | {fmt(c['work'])} | {c['tasks_floor']:.2f} | "
                  f"{fmt(c['phase'])} | {fmt(c['over'])} | {verdict} | {fmt(c['over_without_role_end'])} |")
    for r in rows:
        print(f"\ntasks of the last cluster_train at {r['hosts']} hosts (seconds each):")
        for name, sec in r["tasks"]:
            print(f"  {sec:6.3f}  {name}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"ansible": ws.version, "cpus": os.cpu_count(), "rows": rows}, indent=2))


def main() -> int:
    args = bench_args(__doc__, "8,32")

    def one_size(ws: Workspace, n: int, rows: list[dict]) -> None:
        load0 = os.getloadavg()[0]
        rows.append(bench_size(n, args.reps, ws.bins, ws.env, ws.work))
        rows[-1]["load"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
        print(f"  N={n}: done (ratio {rows[-1]['ratio']:.2f}x)", file=sys.stderr)

    return run_sizes(args, "flodl-ct-bench-", require_root(), one_size, lambda ws, rows: report(ws, rows, args))


if __name__ == "__main__":
    sys.exit(main())
