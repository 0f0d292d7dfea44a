"""Hardening (issue 10) on real namespace hosts, through the installed collection's playbooks.

Each test reproduces a bad case from the issue's "Why" and shows what the run now does: a second run
refused while the first finishes untouched, a full log disk that only warns, payloads in inputs that
never reach a shell or escape their root, planted symlinks left alone, a build host cut off the network
bounded by the task timeout, and no rank left behind by a launch that failed or was cancelled.

Hosts share this machine's filesystem except /tmp and /root, so canary files live in the test's
shared directory (one path, seen by the controller and every host) and each host's private /tmp is
checked over ssh as well.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
from play_output import failed_in_recap
from streamed_play import kill_session, stream, wait_for
from conftest import run_ansible
from test_launch import copy_project, project_vars, rank_processes, worker_vars

PLAYBOOKS = "flodl.cluster"
SAME_VARIANT = {"h1": "precompiled/cu128", "h2": "precompiled/cu128", "h3": "precompiled/cu128"}


def _flat(text: str) -> str:
    """Output with Ansible's line wrapping undone (warnings are wrapped at the terminal width)."""
    return " ".join(text.split())


def _host_tmp_canaries(cluster) -> dict[str, str]:
    out = {}
    for h in cluster:
        res = cluster.ssh(h.name, "ls -A /tmp | grep -i canary || true")
        assert res.returncode == 0, res.stderr
        out[h.name] = res.stdout.strip()
    return out


# --------------------------------------------------------------------------- 1. one run at a time


def test_second_run_is_refused_and_a_live_rank_blocks_preflight(installed_collection, cluster3, netns_shared_dir,
                                                                tmp_path):
    cluster = cluster3
    project = copy_project(netns_shared_dir / "proj")
    host_vars = worker_vars(project, SAME_VARIANT, {"h1": [0], "h2": [0], "h3": [0]})
    long_env = {"FLODL_DEMO_STEPS": "400", "FLODL_DEMO_STEP_MS": "100"}  # about 40 s of steps per rank
    inv = cluster.write_inventory(tmp_path / "inv.json", project_vars(project, cluster, flodl_cluster_env=long_env),
                                  host_vars)
    first, lines, reader = stream(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train"])
    try:
        wait_for(lines, first, lambda t: all(f"[{h}] step 2 loss" in t for h in ("h1", "h2", "h3")), 300,
                 "the first run's ranks to train")
        started = time.monotonic()
        second = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv),
                                                    f"{PLAYBOOKS}.cluster_train"])
        second_seconds = time.monotonic() - started
        print(f"second run refused after {second_seconds:.1f}s")
        assert first.poll() is None, "the first run ended while the second started:\n" + "".join(lines)
        rc = first.wait(timeout=300)
    finally:
        kill_session(first)
    reader.join(timeout=5)
    out1 = "".join(lines)
    # The second: refused by the controller's run lock, before preflight and before any build.
    assert second.returncode != 0
    out2 = _flat(second.stdout + second.stderr)
    assert f"flodl run lock: another run of project {project} is live on controller" in out2
    assert f"(run lock held by pid {first.pid} of " in out2
    assert "flodl.cluster.teardown" in out2 and "-e flodl_run_lock=false" in out2
    assert "Prebuild | Build on the build host" not in second.stdout
    assert "flodl preflight" not in second.stdout
    assert second_seconds < 60
    # The first: finished normally, every rank ran all its steps.
    assert rc == 0, out1
    for host in ("h1", "h2", "h3"):
        assert f"[{host}] step 400 loss" in out1
        assert f"[standin-launcher] {host}: exited with status 0" in out1

    # A rank binary left running by hand on h2 (as another run's would be): preflight refuses, naming h2.
    abs_bin = project / "target/cluster/h2/precompiled-cu128/release/train"
    assert abs_bin.exists()
    start = cluster.ssh("h2", f"FLODL_DEMO_SLEEP_S=600 nohup {abs_bin} >/dev/null 2>&1 </dev/null &")
    assert start.returncode == 0, start.stderr
    deadline = time.monotonic() + 10
    while not rank_processes(str(abs_bin)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(rank_processes(str(abs_bin))) == 1
    t0 = time.monotonic()
    blocked = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train"])
    print(f"live-rank refusal after {time.monotonic() - t0:.1f}s")
    assert blocked.returncode != 0
    text = _flat(blocked.stdout + blocked.stderr)
    assert f"flodl run lock: another run of project {project} is live on h2 (1 process of the rank binary)" in text
    assert "Prebuild | Build on the build host" not in blocked.stdout
    assert len(rank_processes(str(abs_bin))) == 1  # refused, not killed
    # The first run removed its own lock as it ended: nothing was left to take over.
    assert "lock is stale" not in text

    # On purpose: flodl_run_lock=false lets it through (its pre-spawn cleanup replaces the old rank).
    short = cluster.write_inventory(tmp_path / "inv-short.json", project_vars(project, cluster), host_vars)
    forced = run_ansible(installed_collection, ["ansible-playbook", "-i", str(short), f"{PLAYBOOKS}.cluster_train",
                                                "-e", "flodl_run_lock=false"])
    assert forced.returncode == 0, forced.stdout
    assert "[standin-launcher] h2: exited with status 0" in forced.stdout
    assert rank_processes(str(abs_bin)) == []


# --------------------------------------------------------------------------- 2. a full log disk


CHATTY = textwrap.dedent(
    """\
    import sys
    for i in range(2000):
        print(f"chatty line {i:04d} " + "x" * 80, flush=True)
    print("chatty done", flush=True)
    """
)


def test_a_full_log_disk_warns_once_and_the_run_completes(
        installed_collection, cluster3, netns_shared_dir, tmp_path):
    cluster = cluster3
    project = copy_project(netns_shared_dir / "proj")
    (project / "chatty.py").write_text(CHATTY)
    log_dir = tmp_path / "full-logs"
    log_dir.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k,mode=0750", "flodl-test-full", str(log_dir)], check=True)
    try:
        inv = cluster.write_inventory(
            tmp_path / "inv.json",
            project_vars(project, cluster, flodl_prebuild=False, flodl_launch_command="python3 chatty.py",
                         flodl_launch_log_dir=str(log_dir)),
            worker_vars(project, SAME_VARIANT, {"h1": [0], "h2": [0], "h3": [0]}),
        )
        t0 = time.monotonic()
        proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.launch"])
        print(f"launch with a full log disk: {time.monotonic() - t0:.1f}s")
        logs = list(log_dir.glob("launch-*.log"))
        size = logs[0].stat().st_size if logs else -1
    finally:
        subprocess.run(["umount", str(log_dir)], check=False)
    assert proc.returncode == 0, proc.stdout
    # Still streamed to the play, to the last line.
    assert "chatty line 0000 " in proc.stdout and "chatty line 1999 " in proc.stdout
    assert "chatty done" in proc.stdout
    assert re.search(r"^h1 +: ok=\d+ +changed=\d+ +unreachable=0 +failed=0", proc.stdout, re.M)
    # One warning, naming the log and ENOSPC.
    assert len(logs) == 1 and 0 < size <= 16 * 1024
    text = _flat(proc.stdout + proc.stderr)
    assert text.count("writing failed with ENOSPC") == 1, text
    assert f"launch log {logs[0]}: writing failed with ENOSPC (No space left on device)" in text


# --------------------------------------------------------------------------- 3. payloads in inputs

FAKE_DOCKER = """#!/bin/sh
# Stand-in for docker: records its argv, then runs the container's `bash -c <inner>` here.
printf '%s\\n' "$@" > "$FLODL_TEST_RECORD_DIR/docker.argv"
for last; do :; done
cd "$FLODL_TEST_RECORD_DIR/workspace" && exec bash -c "$last"
"""
FAKE_CARGO = """#!/bin/sh
printf '%s\\n' "$PWD" "$@" > "$FLODL_TEST_RECORD_DIR/cargo.argv"
echo "fake cargo ran"
"""


def _fake_tools(directory: Path) -> Path:
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in (("docker", FAKE_DOCKER), ("cargo", FAKE_CARGO)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (directory / "workspace").mkdir()
    return bin_dir


def test_payloads_in_inputs_never_reach_a_shell(installed_collection, cluster3, netns_shared_dir, tmp_path):
    cluster = cluster3
    project = copy_project(netns_shared_dir / "proj")
    canaries = netns_shared_dir / "canaries"
    canaries.mkdir()
    record = netns_shared_dir / "record"
    bin_dir = _fake_tools(record)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FLODL_TEST_RECORD_DIR": str(record)}

    def canary(n: int) -> str:
        return str(canaries / f"canary-{n}")

    base = worker_vars(project, SAME_VARIANT, {"h1": [0], "h2": [0], "h3": [0]})
    # End to end: the payloads an ssh client would run (-oProxyCommand), and a worker's own refusal in the
    # PLAY RECAP. Every other refusal of a payload before contact is a unit test
    # (tests/unit/plugins/action/test_refusals_before_contact.py).
    refused = [
        # (group vars, host vars for h2, what the refusal says)
        ({}, {"flodl_host": f"-oProxyCommand=touch {canary(2)}"}, "starts with '-'"),
        ({}, {"ansible_host": f"-oProxyCommand=touch {canary(3)}"}, "starts with '-'"),
        # A worker's own variable: refused as that worker's own result (PLAY RECAP: h2 failed, h1 and h3 skipped).
        ({}, {"flodl_gpu_ram_share": "half"}, "host h2 (worker 1): flodl_gpu_ram_share: must be a non-negative fraction"),
    ]
    times = []
    for n, (group, h2, expect) in enumerate(refused):
        host_vars = {h: dict(v) for h, v in base.items()}
        host_vars["h2"].update(h2)
        inv = cluster.write_inventory(tmp_path / f"inv-{n}.json", project_vars(project, cluster, **group), host_vars)
        before = [h.connections() for h in cluster]
        t0 = time.monotonic()
        proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train"],
                           env=env)
        times.append(round(time.monotonic() - t0, 1))
        text = _flat(proc.stdout + proc.stderr)
        assert proc.returncode != 0, (group, h2)
        assert expect in text, (group, h2, text)
        assert "no host was contacted" in text or "Validation of arguments failed" in text, (group, h2)
        assert [h.connections() for h in cluster] == before, (group, h2)
        if h2:  # a worker's own variable fails that worker alone
            assert failed_in_recap(proc.stdout) == ["h2"], (h2, proc.stdout[-2000:])
        assert not (project / "target").exists()
    print("refusal times (s):", times)

    # The docker launch quotes the command directory: `cd '<root>/x;touch ...;echo'` fails, nothing runs.
    launch_vars = {"flodl_prebuild": False, "flodl_launch_command": None, "flodl_controller_docker": "cuda"}
    inv = cluster.write_inventory(
        tmp_path / "inv-cmd-dir.json",
        {k: v for k, v in project_vars(project, cluster, flodl_cmd_dir=f"x;touch {canary(4)};echo",
                                       **launch_vars).items() if v is not None},
        base,
    )
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.launch"], env=env)
    text = _flat(proc.stdout + proc.stderr)
    print("cmd_dir payload: rc", proc.returncode)
    # It reached docker as one quoted `cd` argument inside bash -c, never as a command: cd fails, nothing runs.
    argv = (record / "docker.argv").read_text().splitlines()
    assert argv[-1].startswith(f"cd '/workspace/x;touch {canary(4)};echo' && cargo run"), argv
    assert proc.returncode != 0
    assert f"cd: /workspace/x;touch {canary(4)};echo: No such file or directory" in text
    assert not (record / "cargo.argv").exists()

    # flodl_launch_docker "false" (a survey's string) with a compose service set: a native launch.
    for leftover in ("docker.argv", "cargo.argv"):
        (record / leftover).unlink(missing_ok=True)
    inv = cluster.write_inventory(
        tmp_path / "inv-docker-false.json",
        {k: v for k, v in project_vars(project, cluster, flodl_launch_docker="false", **launch_vars).items()
         if v is not None},
        base,
    )
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.launch"], env=env)
    assert proc.returncode == 0, proc.stdout
    assert "fake cargo ran" in proc.stdout
    assert "running `cargo run --release --bin train`" in proc.stdout
    assert "docker compose run" not in proc.stdout
    assert not (record / "docker.argv").exists()
    assert (record / "cargo.argv").read_text().splitlines() == [str(project), "run", "--release", "--bin", "train"]

    # No canary anywhere: the shared filesystem (controller and every host) and each host's private /tmp.
    assert sorted(p.name for p in canaries.iterdir()) == []
    assert not list(Path("/tmp").glob("canary-*"))
    assert _host_tmp_canaries(cluster) == {"h1": "", "h2": "", "h3": ""}


# --------------------------------------------------------------------------- 4. planted symlinks


def test_planted_symlinks_leave_their_targets_unchanged(installed_collection, cluster3, netns_shared_dir, tmp_path):
    cluster = cluster3
    project = copy_project(netns_shared_dir / "proj")
    record = netns_shared_dir / "record"
    bin_dir = _fake_tools(record)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FLODL_TEST_RECORD_DIR": str(record)}
    victim = tmp_path / "root-only"
    victim.write_text("root only\n")
    victim.chmod(0o600)
    overlay = project / ".fdl-cluster-overlay.yml"
    overlay.symlink_to(victim)
    host_vars = worker_vars(project, SAME_VARIANT, {"h1": [0], "h2": [0], "h3": [0]})
    host_vars["h1"]["flodl_host"] = cluster["h1"].ip  # resolves (an address): the overlay gets an extra_hosts pair
    given = project_vars(project, cluster, flodl_prebuild=False, flodl_launch_command=None,
                         flodl_controller_docker="cuda", flodl_cmd_dir="")
    group = {k: v for k, v in given.items() if v is not None}
    inv = cluster.write_inventory(tmp_path / "inv.json", group, host_vars)
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.launch"], env=env)
    text = _flat(proc.stdout + proc.stderr)
    # Refused: the link's target never opened for writing; the launch goes on without the overlay.
    assert f"could not write the compose overlay {overlay}: " in text
    assert f"{overlay} is a symbolic link; refusing to write through it" in text
    assert victim.read_text() == "root only\n" and (victim.stat().st_mode & 0o777) == 0o600
    assert overlay.is_symlink()
    assert proc.returncode == 0, proc.stdout
    argv = (record / "docker.argv").read_text().splitlines()
    assert str(overlay) not in argv
    assert [p.name for p in project.iterdir() if p.name.startswith(".fdl-cluster-overlay.yml.")] == []
    # Without the link: written as a regular file, atomically (no temporary left behind), and used.
    overlay.unlink()
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.launch"], env=env)
    assert proc.returncode == 0, proc.stdout
    assert overlay.is_file() and not overlay.is_symlink()
    assert f'"{cluster["h1"].ip}:{cluster["h1"].ip}"' in overlay.read_text()
    assert (record / "docker.argv").read_text().splitlines()[:5] == ["compose", "-f", "docker-compose.yml", "-f",
                                                                     str(overlay)]
    assert [p.name for p in project.iterdir() if p.name.startswith(".fdl-cluster-overlay.yml.")] == []

    # The launch logs' directory in the project, replaced by a link to a root-only directory: refused before
    # the launch, nothing created there.
    vault = tmp_path / "root-only-dir"
    vault.mkdir(mode=0o700)
    (vault / "keep").write_text("kept\n")
    (project / "target" / "cluster" / "logs").rename(project / "target" / "cluster" / "logs.old")
    (project / "target" / "cluster" / "logs").symlink_to(vault)
    (record / "docker.argv").unlink()
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.launch"], env=env)
    text = _flat(proc.stdout + proc.stderr)
    assert proc.returncode != 0
    assert f"the launch log directory {project}/target/cluster/logs resolves to {vault}, outside the project" in text
    assert sorted(p.name for p in vault.iterdir()) == ["keep"]
    assert not (record / "docker.argv").exists()  # nothing was launched
    (project / "target" / "cluster" / "logs").unlink()

    # The build log has a fixed name: a link planted there is refused and its target kept (h1 builds the
    # variant for all three hosts).
    log_dir = project / "target" / "cluster" / "h1" / "precompiled-cu128"
    log_dir.mkdir(parents=True)
    (log_dir / "prebuild.log").symlink_to(victim)
    group["flodl_prebuild"] = True
    group.pop("flodl_controller_docker")
    del host_vars["h1"]["flodl_host"]
    inv = cluster.write_inventory(tmp_path / "inv-build.json", group, host_vars)
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.prebuild"],
                       env={**env, "PATH": os.environ["PATH"]})
    text = _flat(proc.stdout + proc.stderr)
    assert proc.returncode != 0
    assert f"{log_dir / 'prebuild.log'} is a symbolic link; refusing to write through it" in text
    assert victim.read_text() == "root only\n" and (victim.stat().st_mode & 0o777) == 0o600
    assert (log_dir / "prebuild.log").is_symlink()


# --------------------------------------------------------------------------- 5. a build host cut off the network

SLOW_CARGO = """#!/bin/sh
echo "$$" > {marker}
exec sleep 600
"""


def test_a_build_host_cut_off_the_network_fails_within_the_task_timeout(installed_collection, cluster3,
                                                                        netns_shared_dir, tmp_path):
    cluster = cluster3
    project = copy_project(netns_shared_dir / "proj")
    tools = netns_shared_dir / "slow-bin"
    tools.mkdir()
    marker = netns_shared_dir / "cargo-started"
    (tools / "cargo").write_text(SLOW_CARGO.format(marker=marker))
    (tools / "cargo").chmod(0o755)
    host_vars = worker_vars(project, SAME_VARIANT, {"h1": [0], "h2": [0], "h3": [0]})
    host_vars["h1"]["ansible_python_interpreter"] = "/usr/bin/python3"
    inv = cluster.write_inventory(
        tmp_path / "inv.json",
        project_vars(project, cluster, flodl_build_host="h1", flodl_build_timeout=5,
                     flodl_prebuild_env={"PATH": f"{tools}:/usr/bin:/bin"}),
        host_vars,
    )
    proc, lines, reader = stream(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.prebuild"])
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline:
            assert proc.poll() is None, "".join(lines)
            time.sleep(0.1)
        assert marker.exists(), "the build never started on h1:\n" + "".join(lines)
        cut = subprocess.run(["ip", "-n", cluster["h1"].netns, "link", "set", "eth0", "down"],
                             capture_output=True, text=True, check=False)
        assert cut.returncode == 0, cut.stderr
        t_cut = time.monotonic()
        try:
            rc = proc.wait(timeout=2 * 5 + 60 + 60)
        except subprocess.TimeoutExpired:
            pytest.fail("the play still ran 130 s after the cut:\n" + "".join(lines))
        seconds = time.monotonic() - t_cut
    finally:
        kill_session(proc)
        subprocess.run(["ip", "-n", cluster["h1"].netns, "link", "set", "eth0", "up"], check=False)
    reader.join(timeout=5)
    out = "".join(lines)
    print(f"play ended {seconds:.1f}s after the cut (rc={rc})")
    assert rc != 0, out
    assert seconds <= 2 * 5 + 60 + 15, out
    # The build step fails on the build host (h1, at its address) instead of hanging the play.
    fatal = [ln for ln in out.splitlines() if ln.startswith("fatal: [h1")]
    assert fatal and ("UNREACHABLE!" in fatal[0] or "FAILED!" in fatal[0]), out
    assert cluster["h1"].ip in fatal[0] or "timed out" in fatal[0].lower() or "Timed out" in fatal[0], out
    assert "Prebuild | Build on the build host" in out


# --------------------------------------------------------------------------- 6. no rank outlives a failed launch

LEAKY = textwrap.dedent(
    """\
    # A launcher that starts every rank detached and then fails or hangs, as a launcher killed
    # before its own post-exit cleanup (or a host whose ssh hung up) would leave them.
    import binascii, json, os, subprocess, sys, time
    topo = json.loads(binascii.unhexlify(os.environ["FLODL_INTERNAL_FULL_CLUSTER_JSON"]))
    envelope = json.loads(os.environ["FLODL_INTERNAL_PREBUILD_PER_HOST"])
    for w in topo["workers"]:
        ssh = w["ssh"]
        argv = ["ssh", "-n"]
        for opt in ssh.get("options") or []:
            argv += ["-o", opt]
        argv += ["-l", ssh.get("user") or "root", "-i", ssh["identity_file"], "--", ssh["target"],
                 f"FLODL_DEMO_SLEEP_S=600 nohup {w['path']}/{envelope[w['host']]['bin']} >/dev/null 2>&1 </dev/null &"]
        subprocess.run(argv, check=True, timeout=60)
    print("leaky: every rank started", flush=True)
    if sys.argv[1] == "fail":
        sys.exit(3)
    time.sleep(600)
    """
)


@pytest.mark.parametrize("how", ["fail", "sigterm"])
def test_no_rank_outlives_a_failed_or_cancelled_launch(installed_collection, cluster3, netns_shared_dir, tmp_path,
                                                       how):
    cluster = cluster3
    project = copy_project(netns_shared_dir / "proj")
    (project / "leaky.py").write_text(LEAKY)
    inv = cluster.write_inventory(
        tmp_path / "inv.json",
        project_vars(project, cluster, flodl_launch_command=f"python3 leaky.py {how}", flodl_launch_grace_seconds=3),
        worker_vars(project, SAME_VARIANT, {"h1": [0], "h2": [0], "h3": [0]}),
    )
    marker = f"{project}/target/cluster/"
    proc, lines, reader = stream(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train"])
    try:
        wait_for(lines, proc, lambda t: "leaky: every rank started" in t, 300, "the ranks to start")
        leaked = rank_processes(marker)
        print("ranks after the launcher started them:", leaked)
        if how == "sigterm":
            assert len(leaked) == 3, leaked
            time.sleep(0.5)
            os.kill(proc.pid, signal.SIGTERM)  # an AWX cancel
        t0 = time.monotonic()
        rc = proc.wait(timeout=120)
        seconds = time.monotonic() - t0
    finally:
        kill_session(proc)
    reader.join(timeout=5)
    out = "".join(lines)
    print(f"play ended {seconds:.1f}s after the {how}; rc={rc}")
    assert rc != 0, out
    if how == "fail":
        # The launch role's always: step ran the orphan cleanup on every worker before the play ended.
        assert "Launch | Stop leftover ranks on every worker" in out, out
        for host in ("h1", "h2", "h3"):
            assert f"{host}: changed — stopped 1 process(es) of {marker}{host}/" in out, out
        gone_after = 0.0
    else:
        # ansible-playbook dies of the SIGTERM at once (no later task can run); the launch step's worker
        # sees its parent go, stops the launcher's process group and runs the orphan cleanup itself.
        t1 = time.monotonic()
        while rank_processes(marker) and time.monotonic() - t1 < 45:
            time.sleep(0.2)
        gone_after = time.monotonic() - t1
        print(f"ranks gone {gone_after:.1f}s after ansible-playbook exited")
    # Nothing of the prebuilt binary is left on any host.
    assert rank_processes(marker) == [], out
    for h in cluster:
        res = cluster.ssh(h.name, f"pgrep -f '[{marker[0]}]{marker[1:]}' || true")
        assert res.returncode == 0 and res.stdout.strip() == "", (h.name, res.stdout)
    assert gone_after < 30
