"""Walk-in agents on namespace hosts, as step 1 of the walk_in launch mode (issue 37).

The stand-in launcher (examples/demo) gets the window topology flodl.cluster renders; each host's agent
is started by the rendered start script over a real ssh session, its spec and environment on stdin, as
Ansible's connection will carry them. The stand-in records the spec each admitted agent presented: the
bytes are the ones rendered. A rank that fails is named by host, rank and code in the launcher's output,
and its agent says DEGRADED and exits 0 (upstream's verdicts, E13).
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / ".collections"))

from ansible_collections.flodl.cluster.plugins.module_utils._walk_in import walk_in as wi  # noqa: E402
from ansible_collections.flodl.cluster.plugins.module_utils._core.hexcodec import hex_encode  # noqa: E402
from ansible_collections.flodl.cluster.plugins.module_utils._core.serde_json_text import serde_pretty  # noqa: E402
from test_launch import copy_project  # noqa: E402

RUN_ID = "0123456789abcdef"


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def test_agents_started_by_the_rendered_script_join_the_window_with_the_rendered_bytes(
        netns_cluster_factory, netns_shared_dir):
    from netns_cluster import HostSpec

    cluster = netns_cluster_factory([HostSpec("h1"), HostSpec("h2")])
    project = copy_project(netns_shared_dir / "proj")
    target = project / "target" / "cluster" / "all" / "precompiled-cu128"
    build = subprocess.run(["cargo", "build", "--release", "--bin", "train"], cwd=project, capture_output=True,
                           text=True, check=False, env={**os.environ, "CARGO_TARGET_DIR": str(target)})
    assert build.returncode == 0, build.stderr
    port = _free_port(cluster.controller_ip)
    token = wi.new_token()
    shipped = {"controller": {"host": cluster.controller_ip, "port": port, "path": str(project)},
               "workers": [{"host": "h1", "ranks": [0, 1], "local_devices": [0, 1], "nccl_socket_ifname": "eth0",
                            "path": str(project)},
                           {"host": "h2", "ranks": [2], "local_devices": [0], "nccl_socket_ifname": "eth0",
                            "path": str(project), "env": {"FLODL_DEMO_FAIL_HOST": "h2:7"}}],
               "env": {"FLODL_DEMO_STEP_MS": "20"}}
    topology = wi.window_topology(shipped, token)
    launcher = subprocess.Popen([sys.executable, "standin_launcher.py"], cwd=project, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env={**os.environ, "FLODL_INTERNAL_FULL_CLUSTER_JSON": hex_encode(serde_pretty(topology))})
    try:
        first = launcher.stdout.readline()
        assert "join window open" in first, first
        entry = {"bin": str(target / "release" / "train"), "ld_library_path": ""}
        pids, specs = {}, {}
        for worker in shipped["workers"]:
            spec = wi.agent_spec(worker, topology["controller"], token)
            launch = wi.agent_launch(worker, entry, spec, shipped["env"], {})
            specs[worker["host"]] = launch.env["FLODL_INTERNAL_AGENT_JSON"]
            argv = [a for a in cluster.ssh_argv(worker["host"], wi.start_script(launch, wi.agent_log(RUN_ID), 60))
                    if a != "-n"]  # the environment travels on stdin
            started = subprocess.run(argv, input=wi.start_stdin(launch), capture_output=True, timeout=30, check=False)
            pid = wi.parse_start(started.stdout.decode())
            assert isinstance(pid, int), started
            pids[worker["host"]] = pid
        out = launcher.communicate(timeout=60)[0]
        assert launcher.returncode == 7, out
        assert 'host "h2" reports rank ' in out and "exited with code 7" in out
        assert "target ranks reached: 3 rank(s)" in out
        for host, hexed in specs.items():
            recorded = (project / "target/cluster/standin/agents" / f"{host}.hex").read_text()
            assert recorded == hexed  # the bytes the agent was given, whole
        collected = {}
        for host, pid in pids.items():
            res = subprocess.run(cluster.ssh_argv(host, wi.collect_script(pid, wi.agent_log(RUN_ID), 50)),
                                 capture_output=True, text=True, timeout=30, check=False)
            collected[host] = wi.parse_collect(res.stdout)
        # Upstream's verdicts: both agents exit 0; h2's says DEGRADED, and its rank's lines are on its stdout.
        assert collected["h1"][0] == 0 and "agent: h1 finished" in collected["h1"][1]
        assert collected["h2"][0] == 0 and "agent: h2 finished DEGRADED" in collected["h2"][1]
        assert any(line.startswith("[h2:0:r") and "failing on purpose" in line for line in collected["h2"][1])
        # Collected: nothing of the agents is left on the hosts.
        for host, pid in pids.items():
            assert cluster.ssh(host, f"pgrep -s {pid}").returncode != 0
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()


# --------------------------------------------------------------------------- cluster_train in walk_in


def test_cluster_train_walk_in_runs_every_rank_and_charges_the_failing_worker(
        installed_collection, cluster3, netns_shared_dir, tmp_path):
    """flodl_launch_mode=walk_in end to end: every agent started over its worker's own Ansible connection,
    every rank run, at most two sshd logins per worker (the probe's and Ansible's own); then a failing rank
    on h2 fails h2, and only h2, in PLAY RECAP with its exit code."""
    from conftest import run_ansible
    from play_output import failed_in_recap, recap, task_results
    from test_launch import PLAYBOOKS, TWO_VARIANTS, project_vars, worker_vars

    cluster = cluster3
    project = copy_project(netns_shared_dir / "proj")
    host_vars = worker_vars(project, TWO_VARIANTS, {"h1": [0], "h2": [0, 1], "h3": [0]})
    inv = cluster.write_inventory(tmp_path / "inv.json", project_vars(project, cluster), host_vars)
    before = {h.name: h.log().count("Accepted publickey") for h in cluster}
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train",
                                              "-e", "flodl_launch_mode=walk_in"])
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "join window open" in out and "target ranks reached: 4 rank(s)" in out
    for host in ("h1", "h2", "h3"):
        assert f'host "{host}" joined with ranks [' in out
    reported = task_results(out, "Launch | Result of this worker")
    assert reported == {"h1": "changed", "h2": "changed", "h3": "changed"}, reported
    assert failed_in_recap(out) == [] and sorted(recap(out)) == ["h1", "h2", "h3"]
    logins = {h.name: h.log().count("Accepted publickey") - before[h.name] for h in cluster}
    assert all(n <= 2 for n in logins.values()), logins
    # The spec each agent presented is the one the collection rendered for it (its host, this run's window).
    for host in ("h1", "h2", "h3"):
        spec = json.loads(bytes.fromhex((project / "target/cluster/standin/agents" / f"{host}.hex").read_text()))
        assert spec["host"] == host and spec["controller_host"] == cluster.controller_ip
        assert len(spec["salt_hex"]) == 32 and spec["local_devices"] == ([0, 1] if host == "h2" else [0])
    assert spec["salt_hex"] not in out + proc.stderr  # the token never shows

    inv = cluster.write_inventory(
        tmp_path / "inv-fail.json",
        project_vars(project, cluster, flodl_cluster_env={"FLODL_DEMO_FAIL_HOST": "h2:3", "FLODL_DEMO_STEP_MS": "50"}),
        host_vars)
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train",
                                              "-e", "flodl_launch_mode=walk_in"])
    assert proc.returncode != 0
    assert failed_in_recap(proc.stdout) == ["h2"], proc.stdout
    assert 'host "h2" reports rank' in proc.stdout
    assert "exited with code 3 (the launcher's report)" in proc.stdout
    assert "failing on purpose: host=h2 code=3" in proc.stdout  # its agent's last lines, in h2's own result


def test_a_killed_walk_in_job_leaves_nothing_on_the_workers_or_here(
        installed_collection, cluster3, netns_shared_dir, tmp_path):
    """SIGKILL of the job's whole process tree once every rank is up (an AWX pod deleted): the held watcher
    stops the launcher, every agent's window closes and its ranks stop: nothing of the run within 35 s."""
    import signal
    import time

    from streamed_play import kill_session, stream, wait_for
    from test_launch import PLAYBOOKS, rank_processes, worker_vars, project_vars

    cluster = cluster3
    project = copy_project(netns_shared_dir / "proj")
    inv = cluster.write_inventory(
        tmp_path / "inv.json",
        project_vars(project, cluster, flodl_cluster_env={"FLODL_DEMO_SLEEP_S": "300", "FLODL_DEMO_STEP_MS": "10"}),
        worker_vars(project, {h: "precompiled/cu128" for h in ("h1", "h2", "h3")}, {"h1": [0], "h2": [0], "h3": [0]}))
    marker = f"{project}/target/cluster/"
    proc, lines, reader = stream(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train",
                                                        "-e", "flodl_launch_mode=walk_in"])
    try:
        wait_for(lines, proc, lambda t: "target ranks reached" in t, 300, "the window to fill")
        deadline = time.monotonic() + 30
        while len([p for p in rank_processes(marker) if "train" in p[1]]) < 6 and time.monotonic() < deadline:
            time.sleep(0.2)  # three agents, each with its rank
        up = rank_processes(marker)
        assert len(up) >= 6, up
        os.killpg(proc.pid, signal.SIGKILL)  # the job's whole process tree
        proc.wait()
        t0 = time.monotonic()
        while (rank_processes(marker) or _launchers(project)) and time.monotonic() - t0 < 35:
            time.sleep(0.2)
        print(f"nothing of the run {time.monotonic() - t0:.1f}s after the kill")
        assert rank_processes(marker) == [] and _launchers(project) == []
    finally:
        kill_session(proc)
        reader.join(timeout=5)


def test_a_worker_whose_agent_never_joins_fails_alone_and_nothing_is_left_running(
        installed_collection, cluster3, netns_shared_dir, tmp_path):
    """h2's agent starts but can never reach the window (its own namespace refuses the window's port): h2 fails in
    PLAY RECAP with the join bound and what its agent printed; h1 and h3, which joined, are not charged (the window
    closed short of its quorum); nothing of the run is left on any worker or here."""
    from conftest import run_ansible
    from play_output import failed_in_recap, results, task_results
    from test_launch import PLAYBOOKS, project_vars, rank_processes, worker_vars

    cluster = cluster3
    project = copy_project(netns_shared_dir / "proj")
    inv = cluster.write_inventory(
        tmp_path / "inv.json", project_vars(project, cluster, flodl_controller_join={"join_timeout": 10}),
        worker_vars(project, {h: "precompiled/cu128" for h in ("h1", "h2", "h3")}, {"h1": [0], "h2": [0], "h3": [0]}))
    # Only h2's own outgoing connections to the window's port (flodl's default 1337) are refused: its ssh is not.
    block = cluster.ssh("h2", "ip rule add ipproto tcp dport 1337 prohibit")
    assert block.returncode == 0, block.stderr
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train",
                                              "-e", "flodl_launch_mode=walk_in"])
    out = proc.stdout
    assert proc.returncode != 0 and failed_in_recap(out) == ["h2"], out + proc.stderr
    assert 'host "h1" joined with ranks [' in out and 'host "h3" joined with ranks [' in out
    assert 'host "h2" joined' not in out and "quorum not met" in out
    msg = results(out)["h2"]["msg"]
    assert "launch: h2: did not join within 10 s (the window's quorum was not met); its agent exited with code 1" \
        in msg, msg
    assert "  | agent: could not dial the controller at " in msg, msg  # its agent's own output
    # h1 and h3 joined, were sent home when the window closed, and report their build (changed), no failure.
    reported = task_results(out, "Launch | Result of this worker")
    assert reported == {"h1": "changed", "h2": "fatal", "h3": "changed"}, reported
    assert set(results(out)) == {"h2"}
    # Nothing of the run is left: no agent or rank on any worker (listed inside each namespace), no launcher here.
    marker = f"{project}/target/cluster/"
    for host in ("h1", "h2", "h3"):
        listed = cluster.ssh(host, "ps -eo pid,args")
        assert listed.returncode == 0 and marker not in listed.stdout, (host, listed.stdout)
    assert rank_processes(marker) == [] and _launchers(project) == []


def _launchers(project) -> list[int]:
    """The stand-in launcher processes of this project, on this machine."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
                cwd = os.readlink(f"/proc/{entry}/cwd")
            except OSError:
                continue
            if any(a.endswith(b"standin_launcher.py") for a in argv) and cwd == str(project):
                found.append(int(entry))
    return found


def test_walk_in_honours_become_and_a_local_worker(
        installed_collection, netns_cluster_factory, netns_shared_dir, tmp_path):
    """What only Ansible's connection gives: h2's agent runs as `nobody` through become (su), and the
    controller's own worker `ctl` is started over the `local` connection. In fanout the same h2 is refused
    before contact, naming walk_in as the way."""
    import time

    from conftest import run_ansible
    from play_output import failed_in_recap, task_results
    from streamed_play import kill_session, stream, wait_for
    from test_launch import PLAYBOOKS, project_vars, worker_vars

    cluster = netns_cluster_factory(["h1", "h2"])
    project = copy_project(netns_shared_dir / "proj")
    os.chmod(netns_shared_dir, 0o755)  # nobody walks to the binary
    arch = {"h1": "precompiled/cu128", "h2": "precompiled/cu128"}
    host_vars = worker_vars(project, arch, {"h1": [0], "h2": [0]})
    host_vars["h2"].update(ansible_become=True, ansible_become_user="nobody", ansible_become_method="su",
                           ansible_become_flags="-s /bin/sh", flodl_env={"FLODL_DEMO_SLEEP_S": "20"})
    inventory = cluster.inventory(project_vars(project, cluster), host_vars)
    inventory["all"]["children"]["flodl_workers"]["hosts"]["ctl"] = {
        "flodl_path": str(project), "flodl_arch": "precompiled/cu128", "flodl_local_devices": [0],
        "flodl_nccl_socket_ifname": "lo", "ansible_connection": "local"}
    inv = tmp_path / "inv.json"
    inv.write_text(json.dumps(inventory))
    fanout = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train"],
                         env={"FLODL_HOST_NAME": "ctl"})
    assert fanout.returncode != 0 and failed_in_recap(fanout.stdout) == ["h2"], fanout.stdout
    assert "become is on for h2" in fanout.stdout and "flodl_launch_mode: walk_in" in fanout.stdout

    proc, lines, reader = stream(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train",
                                                        "-e", "flodl_launch_mode=walk_in"], FLODL_HOST_NAME="ctl")
    try:
        wait_for(lines, proc, lambda t: "target ranks reached" in t, 300, "the window to fill")
        seen = ""
        deadline = time.monotonic() + 20  # h2's ranks stay up 20 s
        while "nobody" not in seen and time.monotonic() < deadline:
            seen = cluster.ssh("h2", "ps -eo user:20,args | grep '[r]elease/train'").stdout
            time.sleep(0.2)
        rc = proc.wait(timeout=120)
    finally:
        kill_session(proc)
        reader.join(timeout=5)
    out = "".join(lines)
    assert rc == 0, out
    assert seen.strip() and all(line.split()[0] == "nobody" for line in seen.strip().splitlines()), seen
    assert task_results(out, "Launch | Result of this worker") == {"ctl": "changed", "h1": "changed",
                                                                   "h2": "changed"}, out
    assert 'host "ctl" joined with ranks' in out


# --------------------------------------------------------------------------- the launcher on flodl_launch_host


# On the launch host: the pid and working directory of every stand-in launcher there (listed inside its namespace).
_LAUNCHERS_THERE = ("for p in $(pgrep -f standin_launcher.py); do printf '%s %s\\n' \"$p\" "
                    "\"$(readlink /proc/$p/cwd 2>/dev/null)\"; done; true")


def _launch_host_setup(cluster, netns_shared_dir, tmp_path, **group):
    """h1 is the launch host (and a worker): the window binds h1's address, which only h1's namespace has."""
    from test_launch import project_vars, worker_vars

    project = copy_project(netns_shared_dir / "proj")
    inv = cluster.write_inventory(
        tmp_path / "inv.json",
        project_vars(project, cluster, flodl_controller_host=cluster["h1"].ip,
                     flodl_launch_command="echo launcher-on-$(hostname); exec python3 standin_launcher.py", **group),
        worker_vars(project, {h: "precompiled/cu128" for h in ("h1", "h2", "h3")}, {"h1": [0], "h2": [0], "h3": [0]}))
    return project, inv


def _left_of_the_run(cluster, project) -> dict[str, str]:
    """What of this run still runs: per namespace host (listed there, by pid), and here (the launcher's ssh)."""
    from test_launch import rank_processes

    marker = f"{project}/target/cluster/"
    left = {}
    for host in ("h1", "h2", "h3"):
        listed = cluster.ssh(host, "ps -eo pid,args")
        there = cluster.ssh(host, _LAUNCHERS_THERE)
        assert listed.returncode == 0 and there.returncode == 0, (host, listed.stderr, there.stderr)
        found = [ln for ln in listed.stdout.splitlines() if marker in ln]
        found += [f"launcher {ln}" for ln in there.stdout.splitlines() if ln.split(" ", 1)[-1] == str(project)]
        if found:
            left[host] = "\n".join(found)
    here = [f"{pid} {cmd[:200]}" for pid, cmd in rank_processes("")
            if "stdin_holder.py" in cmd and str(project) in cmd]
    here += [str(pid) for pid in _launchers(project)]
    if here:
        left["here"] = "\n".join(here)
    return left


def test_walk_in_with_the_launcher_on_the_launch_host(installed_collection, cluster3, netns_shared_dir, tmp_path):
    """flodl_launch_host=h1 in walk_in (an AWX job's pod is not the controller): the launcher runs on h1 under the
    remote wrapper, its window is awaited there, every agent dials h1's address and every rank runs; the launcher's
    output comes back into the play; after the play nothing of the run is left on h1, the workers or here."""
    import time

    from conftest import run_ansible
    from play_output import failed_in_recap, recap, task_results
    from test_launch import PLAYBOOKS

    cluster = cluster3
    project, inv = _launch_host_setup(cluster, netns_shared_dir, tmp_path)
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train",
                                              "-e", "flodl_launch_mode=walk_in", "-e", "flodl_launch_host=h1"])
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    h1 = cluster["h1"].ip
    # On h1: its UTS name, and a window bound to an address no other namespace has.
    assert "launcher-on-h1" in out and f"join window open on {h1}:" in out, out
    assert "the launcher's join window is open on h1 on port" in out
    assert "target ranks reached: 3 rank(s)" in out
    for host in ("h1", "h2", "h3"):
        assert f'host "{host}" joined with ranks [' in out
        spec = json.loads(bytes.fromhex((project / "target/cluster/standin/agents" / f"{host}.hex").read_text()))
        assert spec["controller_host"] == h1
    assert task_results(out, "Launch | Result of this worker") == {"h1": "changed", "h2": "changed", "h3": "changed"}
    assert failed_in_recap(out) == [] and sorted(recap(out)) == ["h1", "h2", "h3"]
    deadline = time.monotonic() + 15
    left = _left_of_the_run(cluster, project)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _left_of_the_run(cluster, project)
    assert left == {}, left


def test_a_killed_walk_in_job_leaves_nothing_on_the_launch_host(
        installed_collection, cluster3, netns_shared_dir, tmp_path):
    """SIGKILL of the job's whole process tree once every rank is up, the launcher on h1: the held watcher stops the
    launcher's ssh here, the wrapper on h1 sees its stdin close and stops the launcher, every agent's window closes:
    nothing of the run on h1, the workers or here within 35 s."""
    import signal
    import time

    from streamed_play import kill_session, stream, wait_for
    from test_launch import PLAYBOOKS, rank_processes

    cluster = cluster3
    project, inv = _launch_host_setup(
        cluster, netns_shared_dir, tmp_path, flodl_launch_grace_seconds=3,
        flodl_cluster_env={"FLODL_DEMO_SLEEP_S": "300", "FLODL_DEMO_STEP_MS": "10"})
    marker = f"{project}/target/cluster/"
    proc, lines, reader = stream(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train",
                                                        "-e", "flodl_launch_mode=walk_in", "-e", "flodl_launch_host=h1"])
    try:
        wait_for(lines, proc, lambda t: "target ranks reached" in t, 300, "the window to fill")
        deadline = time.monotonic() + 30
        while len([p for p in rank_processes(marker) if "train" in p[1]]) < 6 and time.monotonic() < deadline:
            time.sleep(0.2)  # three agents, each with its rank
        assert len(rank_processes(marker)) >= 6, rank_processes(marker)
        running = _left_of_the_run(cluster, project)
        assert "launcher " in running.get("h1", ""), running  # the launcher, there
        os.killpg(proc.pid, signal.SIGKILL)  # the job's whole process tree
        proc.wait()
        t0 = time.monotonic()
        left = _left_of_the_run(cluster, project)
        while left and time.monotonic() - t0 < 35:
            time.sleep(0.5)
            left = _left_of_the_run(cluster, project)
        print(f"nothing of the run {time.monotonic() - t0:.1f}s after the kill")
        assert left == {}, "".join(lines[-40:]) + repr(left)
    finally:
        kill_session(proc)
        reader.join(timeout=5)
