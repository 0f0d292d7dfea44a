"""``raw_walk_in``: the minimum walk-in pipeline, beside ``raw`` (issue 37).

What a careful operator would script for a walk-in launch, as plain shell (``raw_walk_in_script``):

1. the preflight probe by plain parallel ssh and 2. the no-op ``cargo build`` per variant in parallel: ``raw``'s own
   lines (cluster_train_bench.raw_script);
3. the stand-in launcher started here in the background with the walk-in window's environment, then a wait until
   its window listens (the collection's ``listen_check_script``: /proc/net/tcp*, 50 ms steps);
4. every worker's agent by plain parallel ssh: one ``ssh <worker> sh -c <start_script>`` per worker, the agent's
   environment on stdin (``start_stdin``), ``&`` then ``wait``;
5. the launcher's end (its exit code kept);
6. every agent collected by plain parallel ssh (``collect_script`` with the pid the start printed).

The bytes are the collection's. A walk-in run of the playbook is recorded first (``record_walk_in``): a callback
(``flodl_bench_plan``), loaded before Ansible forks its workers, wraps ``module_utils._walk_in.walk_in.plan`` and
``module_utils._launch.launch_size.fit_launch_env`` and writes what the launch step made: the launcher's
environment as fitted (the window topology in ``FLODL_INTERNAL_FULL_CLUSTER_JSON``) and the walk-in plan (each
agent's cwd, binary and environment, the run id, the agents' kill bound). The registered result itself is
censored for callbacks (``no_log``: it holds the join token). This works at every size: in walk_in mode the
fan-out topology is rendered and turned into the window before the size check, so a size that fanout refuses
is recorded too. Every ``raw_walk_in`` run reuses that plan (its token and run id): the collection makes fresh
ones per run, which costs nothing measurable.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

RECORDER_NAME = "flodl_bench_plan"
RECORDER = '''\
from __future__ import annotations
import json, os
from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: flodl_bench_plan
type: aggregate
short_description: the walk-in plan flodl.cluster's launch step made, for the bench's raw_walk_in
description: [Writes the fitted launcher environment and the walk-in plan to $FLODL_BENCH_PLAN.]
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "flodl_bench_plan"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        from ansible_collections.flodl.cluster.plugins.module_utils._walk_in import walk_in as wi
        from ansible_collections.flodl.cluster.plugins.module_utils._launch import launch_size as ls
        plan, fit, made = wi.plan, ls.fit_launch_env, {}

        def recorded_plan(*args, **kwargs):
            out = plan(*args, **kwargs)
            made["plan"] = out
            return out

        def recorded_fit(env, **kwargs):
            fitted = fit(env, **kwargs)
            if "plan" in made and env is made["plan"][0]:  # the walk-in launcher's env, as the launch step fits it
                _env, window, walk_in, problems = made["plan"]
                fd = os.open(os.environ["FLODL_BENCH_PLAN"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w") as fh:
                    json.dump({"env": fitted.env, "window": window, "walk_in": walk_in, "problems": problems}, fh)
            return fitted

        # Workers are forked from this process: the launch step's calls go through these.
        wi.plan, ls.fit_launch_env = recorded_plan, recorded_fit
'''


def record_walk_in(argv: list[str], env: dict[str, str], work: Path,
                   n: int) -> tuple[subprocess.CompletedProcess, dict | None]:
    """One walk-in run of the playbook with the recorder: (the process, what its launch step made or None)."""
    root = Path(env["ANSIBLE_CALLBACK_PLUGINS"])
    (root / f"{RECORDER_NAME}.py").write_text(RECORDER)
    path = work / f"walk-in-plan-{n}.json"
    if path.exists():
        path.unlink()
    enabled = ",".join([env.get("ANSIBLE_CALLBACKS_ENABLED", ""), RECORDER_NAME]).strip(",")
    proc = subprocess.run(argv, env={**env, "ANSIBLE_CALLBACKS_ENABLED": enabled, "FLODL_BENCH_PLAN": str(path)},
                          capture_output=True, text=True, check=False)
    return proc, json.loads(path.read_text()) if path.exists() else None


def raw_walk_in_script(cluster, project: Path, record: dict, work: Path) -> Path:
    """The minimum walk-in pipeline as a shell script (module docstring); its outputs under ``<work>/rw/raw-out``."""
    from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import posix_quote as q
    from ansible_collections.flodl.cluster.plugins.module_utils._ssh.ssh import probe_argv
    from ansible_collections.flodl.cluster.plugins.module_utils._walk_in import walk_in as wi
    from cluster_train_bench import raw_script

    work = work / "rw"
    work.mkdir(exist_ok=True)
    head = raw_script(cluster, project, {}, work).read_text().splitlines()
    head = head[:next(i for i, ln in enumerate(head) if ln.startswith("# 3."))]  # steps 1 and 2, raw's own
    out = work / "raw-out"
    plan, window = record["walk_in"], record["window"]["controller"]
    env = " ".join(f"{k}={q(v)}" for k, v in sorted(record["env"].items()))
    step = wi.LISTEN_STEP_SECONDS
    wi.LISTEN_STEP_SECONDS = 0.05
    try:
        listen = wi.listen_check_script(int(plan["port"]), str(window["host"]), float(plan["open_timeout"]))
    finally:
        wi.LISTEN_STEP_SECONDS = step
    lines = head + [
        "# 3. the launcher with the walk-in window's environment, in the background; wait for its window",
        f"(cd {q(str(project))} && exec env {env} python3 standin_launcher.py) </dev/null >{out}/launcher 2>&1 &",
        "launcher=$!",
        f"( {listen} ) >/dev/null || {{ kill $launcher; wait $launcher; exit 1; }}",
        "# 4. every worker's agent: one ssh per worker, its environment on stdin, in parallel",
        "agents=",
    ]
    log = wi.agent_log(str(plan["run_id"]))
    by_host = {a["host"]: a for a in plan["agents"].values()}
    ssh_of = {}
    for h in cluster:
        a = by_host[h.name]
        launch = wi.AgentLaunch(h.name, str(a["cwd"]), str(a["binary"]), {k: str(v) for k, v in a["env"].items()})
        fd = os.open(out / f"env-{h.name}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(wi.start_stdin(launch))
        ssh_of[h.name] = {"host": h.name, "ssh": {"target": h.ip, "user": cluster.login_user,
                                                  "identity_file": str(cluster.key_path),
                                                  "options": list(cluster.ssh_options)}}
        argv = probe_argv(ssh_of[h.name], "sh -c " + q(wi.start_script(launch, log, int(plan["agent_timeout"]))))
        lines += [" ".join(q(x) for x in argv) + f" <{out}/env-{h.name} >{out}/start-{h.name} 2>&1 &",
                  'agents="$agents $!"']
    sentinel = 2147483646  # the pid the start printed, passed to the collection's collect script as $1
    collect = wi.collect_script(sentinel, log, 30).replace(str(sentinel), '"$1"')
    lines += ["wait $agents", "# 5. the launcher's end", f"wait $launcher; echo $? >{out}/launcher.rc",
              "# 6. every agent collected: one ssh per worker, in parallel"]
    for h in cluster:
        argv = probe_argv(ssh_of[h.name], "sh -c " + q(collect) + " sh")
        lines.append(f"(pid=$(sed -n 's/^{wi.AGENT_MARK}=//p' {out}/start-{h.name}); "
                     + " ".join(q(x) for x in argv[:-1]) + " " + q(argv[-1] + " ") + '"$pid"'
                     + f" </dev/null >{out}/collect-{h.name} 2>&1) &")
    lines.append("wait")
    # A time stamp at the start and after each step's wait (a `date` each: a few milliseconds in all), for STEPS.
    stamp = f"date +%s.%N >>{out}/stamps"
    lines = [lines[0], f"date +%s.%N >{out}/stamps"] + [x for ln in lines[1:] for x in (
        [ln, stamp] if ln == "wait" or ln.startswith(("wait ", "( __flodl_i=")) else [ln])]
    path = work / f"raw-walk-in-{len(list(cluster))}.sh"
    path.write_text("\n".join(lines) + "\n")
    return path


STEPS = ("probe", "builds", "window open", "agents started", "launcher's end", "collect")


def step_seconds(script: Path) -> dict[str, float]:
    """Each step's wall time in the last run of the script, from its time stamps."""
    stamps = [float(x) for x in (script.parent / "raw-out" / "stamps").read_text().split()]
    return {name: b - a for name, a, b in zip(STEPS, stamps, stamps[1:])}


def steps_table(rows: list[dict]) -> None:
    """Where raw_walk_in's time goes, per size (median per step)."""
    have = [r for r in rows if r["samples"].get("raw_walk_in") and "steps" in r["samples"]["raw_walk_in"][0]]
    if not have:
        return
    print("\nWhere raw_walk_in's time goes (medians, seconds)")
    print("| workers | " + " | ".join(STEPS) + " |")
    print("| ---: |" + " ---: |" * len(STEPS))
    for r in have:
        runs = r["samples"]["raw_walk_in"]
        print(f"| {r['hosts']} | " + " | ".join(
            f"{sorted(s['steps'][k] for s in runs)[len(runs) // 2]:.2f}" for k in STEPS) + " |")


def check_raw_walk_in(cluster, script: Path, steps: int) -> None:
    """Every probe answered, every build a no-op, every worker joined, the window reached its ranks, no rank lost
    or failed, the launcher exited 0, every agent's exit code 0."""
    out = script.parent / "raw-out"
    n = len(list(cluster))
    launcher = (out / "launcher").read_text()
    bad = [h.name for h in cluster if "__FLODL_END__" not in (out / f"probe-{h.name}").read_text()
           or f'host "{h.name}" joined with ranks [' not in launcher
           or "__FLODL_AGENT_EXIT__=0" not in (out / f"collect-{h.name}").read_text().splitlines()]
    builds = list(out.glob("build-*"))
    rc = (out / "launcher.rc").read_text().strip()
    if (bad or rc != "0" or f"target ranks reached: {n} rank(s)" not in launcher or "lost rank" in launcher
            or "reports rank" in launcher or len(builds) != steps or any("Finished" not in p.read_text() for p in builds)):
        seen = "".join(f"\n{h} {step}: {(out / f'{step}-{h}').read_text()[-300:]!r}" for h in bad[:3]
                       for step in ("start", "collect"))  # the workspace is removed after: say why here
        raise RuntimeError(f"raw_walk_in incomplete (launcher rc {rc}) on {bad[:10]} ({len(bad)}):{seen}\n"
                           f"{launcher[-2000:]}")
