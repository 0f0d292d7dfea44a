"""Two more walk_in behaviours on namespace hosts: a cancel through ansible-runner, and a worker behind a jump host.

- AWX cancels a job with ansible-runner's cancel: SIGKILL of the job's process group once the cancel callback says
  so. In walk_in the launcher runs detached on this machine (its held watcher stops it when ansible-playbook is
  gone) and each worker's agent was started over that worker's own connection: after the cancel nothing of the run
  may be left, neither on a worker (listed inside its own namespace) nor here (/proc).
- A worker that only a jump host reaches (``-J`` in its ``ansible_ssh_common_args``): its agent is started over
  Ansible's own connection, through the jump, joins the window, and the run passes.
"""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import ansible_bin
from test_launch import PLAYBOOKS, copy_project, project_vars, rank_processes, worker_vars
from play_output import runner_hosts
from test_runner import WORKERS, _once_true, _private_data_dir, _project, _run, _runner, _survey
from test_walk_in import _launchers

START_TASK = "Launch | Start this worker's walk-in agent"
FOLLOW_TASK = "Launch | Follow the launcher to its end"
COLLECT_TASK = "Launch | Collect this worker's walk-in agent"
# After the cancel: the runner returns at once (SIGKILL of the job's group, then at most its 5 s EOF wait), and
# the held watcher stops the launcher after its grace (5 s), whose window's close stops every agent and rank.
RETURN_BOUND = 30.0
CLEAN_BOUND = 60.0  # generous: 2 CPUs shared with a benchmark and other test runs


def _cmdlines() -> dict[int, str]:
    """Every process on this machine (namespace hosts included): pid -> its command line, space-joined."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                raw = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            out[int(entry)] = raw.replace(b"\0", b" ").decode("utf-8", "replace")
    return out


def _ppid(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("PPid:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _started(pid: int) -> str | None:
    """A process's start time (field 22 of its stat): a pid seen again is the same process only when it matches."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _job_processes(pdd: Path) -> dict[int, str | None]:
    """This job's processes: its ansible-playbook (whose command line names the private data dir) and all their
    descendants, and the watchers they started (a watcher outlives the task that started it: its parent is gone,
    its last argument is the ansible-playbook it watches). pid -> start time."""
    procs = _cmdlines()
    roots = {pid for pid, line in procs.items() if str(pdd) in line and "ansible-playbook" in line}
    found = set(roots)
    grew = True
    while grew:
        grew = False
        for pid in procs:
            if pid not in found and _ppid(pid) in found:
                found.add(pid)
                grew = True
    found |= {pid for pid in procs if _watched(pid) in roots}
    return {pid: _started(pid) for pid in found}


def _watched(pid: int) -> int | None:
    """The pid a flodl group watcher watches (module_utils/_core/group_watch.py: ``NAME grace watch_pid ...``)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if b"flodl-group-watch" not in argv:
        return None
    watched = argv[argv.index(b"flodl-group-watch") + 2: argv.index(b"flodl-group-watch") + 3]
    return int(watched[0]) if watched and watched[0].isdigit() else None


def _alive(processes: dict[int, str | None]) -> list[int]:
    return sorted(pid for pid, start in processes.items() if start is not None and _started(pid) == start)


def _in_sessions(sids: set[int]) -> list[int]:
    found = []
    for pid in _cmdlines():
        try:
            if os.getsid(pid) in sids:
                found.append(pid)
        except OSError:
            pass
    return found


def _on_workers(cluster, marker: str) -> dict[str, list[str]]:
    """Each worker's processes whose command line holds ``marker``, listed inside its own namespace."""
    out = {}
    for host in WORKERS:
        listed = cluster.ssh(host, "ps -eo pid,args")
        assert listed.returncode == 0, (host, listed.stderr)
        out[host] = [line for line in listed.stdout.splitlines() if marker in line]
    return out


@pytest.fixture
def runner_ctx(installed_collection, netns_cluster_factory, netns_shared_dir, tmp_path):
    _runner()
    return installed_collection, _project(netns_shared_dir), netns_shared_dir, tmp_path, netns_cluster_factory


def test_a_runner_cancel_mid_walk_in_leaves_nothing_on_the_workers_or_here(runner_ctx):
    """ansible-runner's cancel (AWX's) once every agent and rank runs: the job ends canceled within RETURN_BOUND, and
    within CLEAN_BOUND nothing of the run is left: no agent or rank on any worker, no launcher, watcher or other
    process of the job here. Before the cancel each worker's agent start was its own host result."""
    collection, project, shared, tmp_path, make = runner_ctx
    cluster = make(list(WORKERS), shared_root=shared)
    pdd = _private_data_dir(tmp_path, collection, cluster, project, _survey(flodl_launch_mode="walk_in"),
                            cluster_env={"FLODL_DEMO_SLEEP_S": "300", "FLODL_DEMO_STEP_MS": "10"},
                            host_vars={"h3": {"flodl_arch": "precompiled/cu128"}})  # one build for the three
    marker = f"{project}/target/cluster/"
    canceled_at: list[float] = []
    at_cancel: dict[str, object] = {}
    lock = threading.Lock()

    def cancel() -> bool:
        # Three agents, each with its rank: the window filled and every rank runs.
        trains = [p for p in rank_processes(marker) if "train" in p[1]]
        if len(trains) < 2 * len(WORKERS):
            return False
        with lock:
            if not canceled_at:
                at_cancel["trains"] = trains
                at_cancel["launchers"] = _launchers(project)
                at_cancel["sessions"] = {os.getsid(p) for p in at_cancel["launchers"]}
                at_cancel["job"] = _job_processes(pdd)
                at_cancel["watchers"] = sorted(p for p in at_cancel["job"] if _watched(p) is not None)
                # Each worker's own listing shows its agent and rank; none shows an agent's environment.
                at_cancel["on_workers"] = _on_workers(cluster, marker)
                at_cancel["env_shown"] = {h: "FLODL_INTERNAL_AGENT_JSON" in cluster.ssh(h, "ps -eo args").stdout
                                          for h in WORKERS}
                canceled_at.append(time.monotonic())
        return True

    started = time.monotonic()
    try:
        r = _run(pdd, cancel_callback=_once_true(cancel))
        returned = time.monotonic()
        assert canceled_at, "the run ended before every agent and rank was up"
        print(f"cancel {canceled_at[0] - started:.1f}s after the start; runner returned "
              f"{returned - canceled_at[0]:.1f}s after the cancel; at the cancel: {at_cancel}")
        assert r.status == "canceled", r.status
        assert returned - canceled_at[0] <= RETURN_BOUND
        # The cancel came mid-walk_in: the launcher was being followed, no agent had been collected.
        begun = {e["event_data"].get("task") for e in r.events if e.get("event") == "playbook_on_task_start"}
        assert FOLLOW_TASK in begun and COLLECT_TASK not in begun, sorted(t for t in begun if t)
        # Each worker's own host result: its preflight, and its agent started over its own connection.
        for task in ("Preflight | Result of this worker", START_TASK):
            assert runner_hosts(r, "runner_on_ok", task) == set(WORKERS), task
        assert not [e for e in r.events if e.get("event") in ("runner_on_failed", "runner_on_unreachable")]
        assert at_cancel["launchers"] and at_cancel["watchers"], at_cancel  # what must go was there
        assert all(len(found) >= 2 for found in at_cancel["on_workers"].values()), at_cancel["on_workers"]
        assert at_cancel["env_shown"] == {h: False for h in WORKERS}  # the token is on no command line

        t0 = canceled_at[0]
        while time.monotonic() - t0 < CLEAN_BOUND:
            here = [line for line in _cmdlines().values() if str(project) in line or str(pdd) in line]
            gone = not (here or _alive(at_cancel["job"]) or _in_sessions(at_cancel["sessions"]) or _launchers(project))
            if gone and not any(_on_workers(cluster, marker).values()):
                break
            time.sleep(0.5)
        print(f"nothing of the run {time.monotonic() - t0:.1f}s after the cancel")
        workers = _on_workers(cluster, marker)
        assert workers == {h: [] for h in WORKERS}, workers
        assert rank_processes(marker) == [] and _launchers(project) == []
        assert [line for line in _cmdlines().values() if str(project) in line or str(pdd) in line] == []
        assert _alive(at_cancel["job"]) == []  # the watchers too
        assert _in_sessions(at_cancel["sessions"]) == []  # the launcher's whole session
    finally:
        for pid in _launchers(project):
            os.kill(pid, 9)


# --------------------------------------------------------------------------- a worker behind a jump host


def test_a_worker_behind_a_jump_host_walks_in_through_it(
        installed_collection, netns_cluster_factory, netns_shared_dir, tmp_path):
    """h2's sshd refuses this machine (a REJECT in h2's own namespace): only ``-J root@<h1>`` reaches it. In walk_in,
    its agent is started over Ansible's connection through h1, joins the window, and the run passes with every
    worker ok; h2's sshd saw connections from h1 only, never from this machine."""
    from play_output import failed_in_recap, recap, task_results

    cluster = netns_cluster_factory(["h1", "h2"])
    project = copy_project(netns_shared_dir / "proj")
    h1, h2 = cluster["h1"], cluster["h2"]
    block = subprocess.run(["nsenter", "-t", str(h2.init_pid), "-n", "iptables", "-A", "INPUT", "-s",
                            cluster.controller_ip, "-p", "tcp", "--dport", "22", "-j", "REJECT", "--reject-with",
                            "tcp-reset"], capture_output=True, text=True, check=False)
    assert block.returncode == 0, block.stderr
    direct = cluster.ssh("h2", "true", timeout=30)
    assert direct.returncode == 255 and "Connection refused" in direct.stderr, direct  # not reachable from here
    host_vars = worker_vars(project, {"h1": "precompiled/cu128", "h2": "precompiled/cu128"}, {"h1": [0], "h2": [0]})
    host_vars["h2"]["ansible_ssh_common_args"] = (cluster.hostvars("h2")["ansible_ssh_common_args"]
                                                  + f" -J root@{h1.ip}")
    inv = cluster.write_inventory(tmp_path / "inv.json", project_vars(project, cluster), host_vars)

    # ssh runs the jump leg as its own `ssh -W`, which reads ssh_config only: the jump's key and host-key settings
    # come from a private ~/.ssh/config, mounted for this ansible-playbook only (as test_play_shape's jump test).
    config = tmp_path / "ssh_config"
    config.write_text(f"Host {h1.ip}\n  IdentityFile {cluster.key_path}\n  IdentitiesOnly yes\n  BatchMode yes\n"
                      "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n")
    scratch = tmp_path / "root-overlay"
    scratch.mkdir()
    script = (
        'set -e; mount -t tmpfs tmpfs "$0"; mkdir -p "$0/upper/.ssh" "$0/work"; chmod 700 "$0/upper/.ssh"; '
        'cp "$1" "$0/upper/.ssh/config"; chmod 600 "$0/upper/.ssh/config"; '
        'mount -t overlay overlay -o "lowerdir=/root,upperdir=$0/upper,workdir=$0/work" /root; '
        'shift; exec "$@"'
    )
    argv = [ansible_bin("ansible-playbook"), "-i", str(inv), f"{PLAYBOOKS}.cluster_train",
            "-e", "flodl_launch_mode=walk_in"]
    wrapped = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(scratch), str(config), *argv]
    t0 = time.monotonic()
    proc = subprocess.run(wrapped, env=installed_collection.env(), capture_output=True, text=True, timeout=900,
                          check=False)
    print(f"$ {' '.join(wrapped)}\n--- rc={proc.returncode} in {time.monotonic() - t0:.1f}s\n{proc.stdout}\n"
          f"--- stderr\n{proc.stderr}")
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    counts = recap(out)
    assert {"h1", "h2"} <= set(counts) and all(counts[h]["ok"] > 0 for h in ("h1", "h2")), counts
    assert failed_in_recap(out) == [] and all(c["unreachable"] == 0 for c in counts.values()), counts
    assert task_results(out, START_TASK) == {"h1": "changed", "h2": "changed"}, out
    assert task_results(out, "Launch | Result of this worker") == {"h1": "changed", "h2": "changed"}, out
    assert 'host "h2" joined with ranks [' in out and 'host "h1" joined with ranks [' in out
    assert "target ranks reached: 2 rank(s)" in out
    spec = json.loads(bytes.fromhex((project / "target/cluster/standin/agents" / "h2.hex").read_text()))
    assert spec["host"] == "h2" and spec["controller_host"] == cluster.controller_ip  # h2's agent, in the window

    h1_log, h2_log = h1.log(), h2.log()
    # h2: reached only from h1's address (the jump), never from this machine (refused at its door).
    assert h2_log.count(f"Connection from {h1.ip} ") >= 1, h2_log
    assert f"Connection from {cluster.controller_ip} " not in h2_log, h2_log
    assert h2_log.count("Accepted publickey for root") >= 1, h2_log
    # h1: its own logins plus the jump legs, every one from this machine; the legs run no command there.
    assert h1_log.count(f"Accepted publickey for root from {cluster.controller_ip} ") > \
        h1_log.count("Starting session: command for root"), h1_log
    # Nothing of the run is left on either worker.
    marker = f"{project}/target/cluster/"
    assert marker not in cluster.ssh("h1", "ps -eo pid,args").stdout
    on_h2 = subprocess.run(["nsenter", "-t", str(h2.init_pid), "-p", "-m", "ps", "-eo", "pid,args"],
                           capture_output=True, text=True, check=False)
    assert on_h2.returncode == 0 and marker not in on_h2.stdout, on_h2
