"""cluster_train the way AWX runs it: ``ansible_runner.run()`` on a private data dir (issue 11, item 4).

The private data dir is laid out as AWX lays out a job's: ``project/train.yml``
(one ``import_playbook`` of the installed collection's playbook, as
examples/awx/project/train.yml), ``inventory/`` (the namespace hosts),
``env/extravars`` (survey answers, every one a string as AWX sends text and
choice answers) and ``env/envvars`` (the collection path and the ssh settings
the harness hosts need). Assertions read what AWX reads: runner events per
host, the run's status, the ``playbook_on_stats`` event's ``artifact_data``
(``set_stats``), and, for a cancel, the process lists of every host and of
the controller.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from awx_job_dir import job_dir
from conftest import REPO_ROOT, Collection, need
from netns_cluster import Cluster, HostSpec
from play_output import runner_hosts

DEMO = REPO_ROOT / "examples" / "demo"
WORKERS = ("h1", "h2", "h3")
ARCH = {"h1": "precompiled/cu128", "h2": "precompiled/cu128", "h3": "precompiled/rocm63"}
GRACE = 5.0
RANK_LINE = re.compile(r"^\[(h\d)\] ", re.MULTILINE)


def _runner():
    try:
        import ansible_runner  # noqa: PLC0415  (the tool under test; its absence is the CI policy's call)
    except ImportError:
        ansible_runner = None
    need(ansible_runner is not None,
         f"ansible-runner is not installed in {sys.prefix}: run scripts/bootstrap.sh (it installs it in every venv)")
    return ansible_runner


def _project(shared: Path) -> Path:
    need(shutil.which("cargo") is not None, "cargo is needed to build the demo project")
    dest = shared / "proj"
    shutil.copytree(DEMO, dest, ignore=shutil.ignore_patterns("target"))
    os.chmod(dest, 0o755)
    return dest


def _survey(**answers: str) -> dict[str, str]:
    """Survey answers as AWX puts them into the extra variables: strings."""
    out = {
        "flodl_cmd": "train",
        "flodl_prebuild": "true",
        "flodl_net_timeout_scale": "",
        "flodl_fdl_env": "",
        "flodl_launch_command": "python3 standin_launcher.py --epochs 3",
        "flodl_launch_grace_seconds": str(int(GRACE)),
    }
    out.update(answers)
    assert all(isinstance(v, str) for v in out.values())
    return out


def _private_data_dir(tmp_path: Path, collection: Collection, cluster: Cluster, project: Path,
                      survey: dict[str, str], *, cluster_env: dict[str, str] | None = None,
                      host_vars: dict[str, dict[str, Any]] | None = None) -> Path:
    pdd = job_dir(tmp_path / "pdd", collection, tmp_path / "ansible-local")
    hv = {
        h: {"flodl_path": str(project), "flodl_arch": ARCH[h], "flodl_local_devices": [0],
            "flodl_nccl_socket_ifname": "eth0"}
        for h in WORKERS
    }
    for host, extra in (host_vars or {}).items():
        hv[host].update(extra)
    group = {
        "flodl_controller_host": cluster.controller_ip,
        "flodl_controller_path": str(project),
        "flodl_cluster_env": {"FLODL_DEMO_STEPS": "3", "FLODL_DEMO_STEP_MS": "50", **(cluster_env or {})},
    }
    cluster.write_inventory(pdd / "inventory" / "hosts.json", group, hv)
    (pdd / "env" / "extravars").write_text(json.dumps(survey, indent=1))
    return pdd


def _once_true(check: Callable[[], bool]) -> Callable[[], bool]:
    """A cancel callback that stays True once it said True, as AWX's cancel flag does.

    ansible-runner calls the callback on every loop turn and keeps only the last answer: a callback
    that looks at the processes would turn False once the cancel killed them, and the job would end
    'failed' instead of 'canceled'.
    """
    said: list[bool] = []

    def sticky() -> bool:
        if not said and check():
            said.append(True)
        return bool(said)
    return sticky


def _run(pdd: Path, **kwargs):
    ansible_runner = _runner()
    r = ansible_runner.run(private_data_dir=str(pdd), playbook="train.yml", quiet=True, **kwargs)
    print(f"status={r.status} rc={r.rc}\n--- stdout\n{r.stdout.read()}")  # shown when the test fails
    return r


def _artifacts(r) -> dict[str, Any]:
    stats = [e for e in r.events if e.get("event") == "playbook_on_stats"]
    assert len(stats) == 1, "no playbook_on_stats event"
    return stats[0]["event_data"].get("artifact_data") or {}


def _probe_script(project: Path) -> str:
    """One shell snippet listing this project's processes by kind (``KIND PID ARGS``).

    Patterns are anchored with ^, so they never match the command line of the shell (or ssh) carrying them.
    """
    kinds = {
        "rank": f"^{project}/target/cluster/",
        "wrapper": f"^bash -c IFS= read -r __FLODL_ENVELOPE cd .{project}.",
        "launcher": f"^ssh .*{project}/target/cluster/",
    }
    lines = [f"pgrep -af '{pat}' | sed 's/^/{kind} /'" for kind, pat in kinds.items()]
    lines.append("for p in $(pgrep -f '^python3 standin_launcher.py'); do "
                 f"[ \"$(readlink /proc/$p/cwd)\" = '{project}' ] && echo \"launcher $p standin_launcher.py\"; done")
    return "; ".join(lines) + "; true"


def _leftovers(cluster: Cluster, project: Path) -> dict[str, list[str]]:
    """What the run left, by kind and place: ``<kind>@<place>`` -> process lines.

    - ``rank``: a process whose command line starts with a prebuilt binary of this project;
    - ``launcher``: the stand-in launcher (its cwd is the project) and the ssh clients it started;
    - ``wrapper``: the remote command's shell on a host (flodl's remote wrapper, docs/launcher-contract.md §7:
      its TERM trap leaves a ``( sleep 10; kill -KILL )`` timer subshell for 10 s by design).

    The controller's view (this machine's /proc) covers every namespace host too; each host is also asked
    over ssh (its own pid namespace), all at once.
    """
    script = _probe_script(project)
    argvs = {"controller": ["sh", "-c", script], **{h: cluster.ssh_argv(h, script) for h in WORKERS}}
    procs = {place: subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for place, argv in argvs.items()}
    found: dict[str, list[str]] = {}
    for place, proc in procs.items():
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, (place, err)
        for line in out.splitlines():
            kind, dummy, rest = line.partition(" ")
            found.setdefault(f"{kind}@{place}", []).append(rest)
    return found


def _ranks_here(project: Path) -> list[str]:
    proc = subprocess.run(["pgrep", "-f", f"^{project}/target/cluster/"], capture_output=True, text=True, check=False)
    return proc.stdout.split()


def _launcher_pids_here(project: Path) -> list[int]:
    out = []
    for pid in subprocess.run(["pgrep", "-f", "^python3 standin_launcher.py"], capture_output=True, text=True,
                              check=False).stdout.split():
        try:
            if os.readlink(f"/proc/{pid}/cwd") == str(project):
                out.append(int(pid))
        except OSError:
            pass
    return out


# --------------------------------------------------------------------------- the cluster


@pytest.fixture
def ctx(installed_collection, netns_cluster_factory, netns_shared_dir, tmp_path):
    _runner()
    project = _project(netns_shared_dir)
    return installed_collection, project, netns_shared_dir, tmp_path, netns_cluster_factory


# --------------------------------------------------------------------------- success


def test_success_events_and_launch_artifact(ctx):
    collection, project, shared, tmp_path, make = ctx
    cluster = make(list(WORKERS), shared_root=shared)
    pdd = _private_data_dir(tmp_path, collection, cluster, project, _survey())
    r = _run(pdd)
    assert r.status == "successful", r.status
    assert r.rc == 0
    # Each worker's preflight, then its build and launch in one report (cluster_train has no prebuild report).
    for task in ("Preflight | Result of this worker", "Launch | Result of this worker"):
        assert runner_hosts(r, "runner_on_ok", task) == set(WORKERS), task
        assert runner_hosts(r, "runner_on_failed", task) == set()
    assert not [e for e in r.events if "Prebuild | Result of this worker" in str(e.get("event_data", {}).get("task"))]
    assert not [e for e in r.events if e.get("event") in ("runner_on_failed", "runner_on_unreachable")]
    stats = r.stats
    assert set(stats["ok"]) >= set(WORKERS) and not stats["failures"] and not stats["dark"]

    art = _artifacts(r)
    assert set(art) >= {"flodl_preflight", "flodl_prebuild_result", "flodl_launch"}, sorted(art)
    launch = art["flodl_launch"]
    assert str(launch["rc"]) == "0", launch
    assert launch["command"] == "python3 standin_launcher.py --epochs 3"
    assert str(launch["failed"]).lower() == "false"
    log = Path(launch["log_file"])
    text = log.read_text()
    for host in WORKERS:
        assert f"[{host}] step 3 loss" in text
        assert f"[standin-launcher] {host}: exited with status 0" in text
    assert art["flodl_prebuild_result"]["failed_hosts"] == []
    assert set(art["flodl_prebuild_result"]["envelope"]) == set(WORKERS)
    # The blank survey answer for the timeout scale means "unset": the ranks saw no variable.
    assert "FLODL_NET_TIMEOUT_SCALE" not in text


def test_walk_in_through_runner_charges_the_failing_worker_alone(ctx):
    """``flodl_launch_mode: walk_in`` as a survey answer: each agent is started over its worker's own connection,
    and a rank failing on h2 fails h2 alone in the runner's events and in its stats (AWX's host summaries),
    with its exit code and its agent's last lines."""
    collection, project, shared, tmp_path, make = ctx
    cluster = make(list(WORKERS), shared_root=shared)
    pdd = _private_data_dir(tmp_path, collection, cluster, project, _survey(flodl_launch_mode="walk_in"),
                            cluster_env={"FLODL_DEMO_FAIL_HOST": "h2:3"})
    r = _run(pdd)
    assert r.status == "failed" and r.rc != 0, (r.status, r.rc)
    assert runner_hosts(r, "runner_on_ok", "Launch | Start this worker's walk-in agent") == set(WORKERS)
    task = "Launch | Result of this worker"
    assert runner_hosts(r, "runner_on_failed", task) == {"h2"}
    assert runner_hosts(r, "runner_on_ok", task) == {"h1", "h3"}
    assert set(r.stats["failures"]) == {"h2"}, r.stats
    assert not r.stats["dark"], r.stats
    failed = [e for e in r.events if e.get("event") == "runner_on_failed" and e["event_data"]["task"] == task]
    msg = json.dumps(failed[0]["event_data"]["res"])
    assert "exited with code 3" in msg and "failing on purpose: host=h2 code=3" in msg, msg


# --------------------------------------------------------------------------- one worker fails preflight


def test_one_worker_fails_preflight(ctx):
    collection, project, shared, tmp_path, make = ctx
    gone = shared / "h2data"
    gone.mkdir(mode=0o755)
    cluster = make([HostSpec("h1"), HostSpec("h2", missing_paths=[str(gone)]), HostSpec("h3")], shared_root=shared)
    pdd = _private_data_dir(tmp_path, collection, cluster, project, _survey(),
                            host_vars={"h2": {"flodl_data_path": str(gone)}})
    r = _run(pdd)
    assert r.status == "failed", r.status
    assert r.rc != 0
    task = "Preflight | Result of this worker"
    assert runner_hosts(r, "runner_on_failed", task) == {"h2"}
    assert runner_hosts(r, "runner_on_ok", task) == {"h1", "h3"}
    failed = [e for e in r.events if e.get("event") == "runner_on_failed" and e["event_data"]["task"] == task]
    msg = json.dumps(failed[0]["event_data"]["res"])
    assert "declared data path" in msg and str(gone) in msg, msg
    # No build started: no prebuild task ran anywhere, nothing was built, no launch.
    started = {e["event_data"].get("task") for e in r.events if e.get("event") == "playbook_on_task_start"}
    assert not any(t and (t.startswith("Prebuild") or t.startswith("Launch")) for t in started), started
    assert not list(project.glob("target/cluster/h*"))

    art = _artifacts(r)
    assert "flodl_preflight" in art, sorted(art)
    assert "flodl_prebuild_result" not in art and "flodl_launch" not in art
    pre = art["flodl_preflight"]
    print(json.dumps(pre["per_host"], indent=1))
    assert pre["ok"] is False, pre
    assert pre["per_host"]["h2"]["status"] == "failed", pre["per_host"]
    assert {h: pre["per_host"][h]["status"] for h in ("h1", "h3")} == {"h1": "ok", "h3": "ok"}


# --------------------------------------------------------------------------- cancel mid-launch


def test_cancel_mid_launch_leaves_nothing_running(ctx):
    collection, project, shared, tmp_path, make = ctx
    cluster = make(list(WORKERS), shared_root=shared)
    pdd = _private_data_dir(tmp_path, collection, cluster, project, _survey(),
                            cluster_env={"FLODL_DEMO_SLEEP_S": "300"})
    seen: set[str] = set()
    canceled_at: list[float] = []
    lock = threading.Lock()

    def on_event(event: dict) -> bool:
        with lock:
            seen.update(RANK_LINE.findall(event.get("stdout", "") or ""))
        return True

    def cancel() -> bool:
        with lock:
            if not seen:
                return False
        # Cancel once the launcher printed its first rank line and every rank is up.
        if len(_ranks_here(project)) < len(WORKERS):
            return False
        if not canceled_at:
            canceled_at.append(time.monotonic())
        return True

    started = time.monotonic()
    r = _run(pdd, event_handler=on_event, cancel_callback=_once_true(cancel))
    assert canceled_at, "the run ended before the launcher printed a rank line"
    assert r.status == "canceled", r.status
    print(f"cancel after {canceled_at[0] - started:.1f}s; runner returned "
          f"{time.monotonic() - canceled_at[0]:.1f}s after the cancel")
    # +3 s: the polling and the ssh round trips of the check itself, and the orphan cleanup's ssh, on a 2-CPU
    # machine running the rest of the suite beside it (6.2 s seen there against 2.0 s alone).
    deadline = canceled_at[0] + GRACE + 3.0
    left = _leftovers(cluster, project)
    gone_at: dict[str, float] = {}
    try:
        while time.monotonic() < deadline + 10:  # the remote wrapper's own 10 s timer, reported apart
            now = time.monotonic() - canceled_at[0]
            for kind in ("rank", "launcher", "wrapper"):
                if kind not in gone_at and not any(k.startswith(kind + "@") for k in left):
                    gone_at[kind] = now
            if len(gone_at) == 3:
                break
            time.sleep(0.2)
            left = _leftovers(cluster, project)
        print("gone after the cancel: " + ", ".join(f"{k} {v:.1f}s" for k, v in gone_at.items()) +
              ("; left: " + "; ".join(f"{k}: " + " | ".join(ln[:100] for ln in v) for k, v in left.items())
               if left else ""))
        for log in project.glob("target/cluster/logs/launch-*.log"):
            print(f"--- {log}\n{log.read_text()[-3000:]}")
        for kind in ("rank", "launcher"):
            assert gone_at.get(kind, 1e9) <= GRACE + 3.0, (kind, gone_at, left)
        assert "wrapper" in gone_at, left
    finally:
        # Whatever the verdict, stop what this run left (the teardown playbook, as docs/awx.md §9 says).
        if left:
            from conftest import run_ansible  # noqa: PLC0415

            run_ansible(collection, ["ansible-playbook", "-i", str(pdd / "inventory" / "hosts.json"),
                                     "flodl.cluster.teardown"])
            for pid in _launcher_pids_here(project):
                os.kill(pid, 9)


# --------------------------------------------------------------------------- the launcher on a named host


def test_launcher_on_flodl_launch_host_through_runner(ctx):
    """AWX's shape: the job's localhost is not the controller box; flodl_launch_host (h1) is.

    The launcher must run on h1 (its UTS namespace is not this machine's), stream back, and a cancel
    must leave no launcher there. The key lives on the shared filesystem: /tmp is private per host.
    """
    collection, project, shared, tmp_path, make = ctx
    cluster = make(list(WORKERS), shared_root=shared)
    key = shared / "keys" / "id"
    key.parent.mkdir(mode=0o700)
    shutil.copy(cluster.key_path, key)
    os.chmod(key, 0o600)
    record = shared / "where.json"
    survey = _survey(
        flodl_launch_host="h1",
        flodl_launch_command=(f"python3 -c \"import json, socket; json.dump(socket.gethostname(), open('{record}', 'w'))\""
                              " && FLODL_HOST_NAME=launchbox python3 standin_launcher.py --epochs 3"),
    )
    pdd = _private_data_dir(tmp_path, collection, cluster, project, survey,
                            cluster_env={"FLODL_DEMO_SLEEP_S": "300"},
                            host_vars={h: {"ansible_ssh_private_key_file": str(key)} for h in WORKERS})
    seen: dict[str, Any] = {}
    me = os.readlink("/proc/self/ns/uts")

    def on_event(event: dict) -> bool:
        if "sleeping 300s" in (event.get("stdout") or ""):
            seen["sleeping"] = seen.get("sleeping", 0) + event["stdout"].count("sleeping 300s")
        return True

    def cancel() -> bool:
        if seen.get("sleeping", 0) < len(WORKERS):
            return False
        pids = _launcher_pids_here(project)
        seen["launchers"] = pids
        seen["elsewhere"] = all(os.readlink(f"/proc/{pid}/ns/uts") != me for pid in pids)
        return bool(pids)

    r = _run(pdd, event_handler=on_event, cancel_callback=_once_true(cancel))
    assert r.status == "canceled", r.status
    assert json.loads(record.read_text()) == "h1"
    assert seen.get("launchers") and seen["elsewhere"], seen
    deadline = time.monotonic() + GRACE + 6
    while _launcher_pids_here(project) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _launcher_pids_here(project) == []
