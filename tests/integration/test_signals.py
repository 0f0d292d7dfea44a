"""A killed run leaves nothing behind, and a worker that never answers ends every phase (issue 21).

One shared 2-worker namespace cluster for the module. Each trial runs ``ansible-playbook`` in a session
of its own, signals only its pid (SIGTERM, SIGHUP, SIGKILL) as soon as the phase is observably running,
and then requires that no process of the run is left within grace + 5 s: on the controller (every
process carrying the trial's environment marker: Ansible's workers, the launcher, the builds, the
watchers, ssh), on the build host and on every worker (the fake builds and ranks, found by path in
/proc, which shows every namespace host's processes). Ansible's own ssh ControlPersist masters are
Ansible's (``ssh_args``), not the run's, and are counted apart.

The build is a fake ``cargo`` (a shell script) so a trial costs seconds: it either sleeps (the slow
build) or writes a rank "binary" (a python script that sleeps) where cargo would. Trials per case:
``FLODL_SIGNAL_TRIALS`` (default 5, the issue's floor for catching a race).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from ci_policy import need
from streamed_play import kill_session, stream, wait_for

_HARNESS = Path(__file__).resolve().parent.parent / "harness"
sys.path.insert(0, str(_HARNESS))
from netns_cluster import SHARED_BASE, Cluster, HostSpec, require_root  # noqa: E402

PLAYBOOKS = "flodl.cluster"
TRIALS = int(os.environ.get("FLODL_SIGNAL_TRIALS", "5"))
GRACE = 2
SIGNALS = [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL]
SILENT_PORT = 2222

FAKE_CARGO = """#!/bin/sh
# A stand-in for cargo: a slow build (FLODL_TRIAL_SLOW) sleeps; otherwise a rank binary appears.
if [ -n "$FLODL_TRIAL_SLOW" ]; then
  echo "$$" > "$FLODL_TRIAL_SLOW"
  sleep 600 &
  wait
  exit 1
fi
# A real executable, so the rank's argv[0] is the binary's path as the orphan cleanup expects.
mkdir -p "$CARGO_TARGET_DIR/release"
cp /bin/sleep "$CARGO_TARGET_DIR/release/train"
"""

LAUNCHER = textwrap.dedent(
    """\
    # Starts the prebuilt binary on every worker over the topology's ssh, as flodl's launcher does.
    import binascii, json, os, subprocess, sys, time
    topo = json.loads(binascii.unhexlify(os.environ["FLODL_INTERNAL_FULL_CLUSTER_JSON"]))
    envelope = json.loads(os.environ["FLODL_INTERNAL_PREBUILD_PER_HOST"])
    procs = []
    for w in topo["workers"]:
        ssh = w["ssh"]
        argv = ["ssh", "-n"]
        for opt in ssh.get("options") or []:
            argv += ["-o", opt]
        argv += ["-p", str(ssh["port"])] if ssh.get("port") is not None else []
        argv += ["-l", ssh.get("user") or "root", "-i", ssh["identity_file"], "--", ssh["target"],
                 f"{w['path']}/{envelope[w['host']]['bin']} 600"]
        procs.append(subprocess.Popen(argv))
    print("launcher: every rank started", flush=True)
    while True:  # one worker failing ends the launch, as flodl's launcher aborts
        codes = [p.poll() for p in procs]
        failed = [c for c in codes if c not in (None, 0)]
        if failed or all(c == 0 for c in codes):
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            sys.exit(failed[0] if failed else 0)
        time.sleep(0.2)
    """
)


@pytest.fixture(scope="module")
def sig_env(installed_collection, tmp_path_factory):
    reason = require_root()
    need(reason is None, reason or "")  # under CI=true a missing root fails instead of skipping
    state = tmp_path_factory.mktemp("signals")
    cluster = Cluster([HostSpec("h1"), HostSpec("h2")], state / "cluster")
    cluster.up()
    SHARED_BASE.mkdir(parents=True, exist_ok=True)
    shared = SHARED_BASE / f"signals-{uuid.uuid4().hex[:10]}"
    shared.mkdir(mode=0o755)
    listener = _silent_listener(cluster["h1"].netns)
    try:
        project = shared / "proj"
        project.mkdir()
        (project / "Cargo.toml").write_text('[package]\nname = "demo"\nversion = "0.1.0"\n')
        for arch in ("precompiled/cu128",):
            (project / "libtorch" / arch / "lib").mkdir(parents=True)
        (project / "launcher.py").write_text(LAUNCHER)
        tools = shared / "bin"
        tools.mkdir()
        (tools / "cargo").write_text(FAKE_CARGO)
        (tools / "cargo").chmod(0o755)
        os.chmod(shared, 0o755)
        host_netns = {os.stat(f"/run/netns/{h.netns}").st_ino for h in cluster}
        yield {"host_netns": host_netns, "cluster": cluster, "project": project, "tools": tools, "state": state, "shared": shared}
    finally:
        listener.kill()
        listener.wait()
        subprocess.run(["sh", "-c", f"for s in {cluster.control_dir}/*; do ssh -o ControlPath=$s -O exit x; done"],
                       capture_output=True, check=False)
        cluster.down()
        subprocess.run(["rm", "-rf", str(shared)], check=False)


def _silent_listener(netns: str) -> subprocess.Popen:
    """A TCP listener in a host's namespace that accepts and never sends an ssh banner."""
    code = textwrap.dedent(
        f"""\
        import socket, time
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", {SILENT_PORT})); s.listen(64); print("listening", flush=True); held = []
        while True:
            held.append(s.accept()[0])
        """
    )
    proc = subprocess.Popen(["ip", "netns", "exec", netns, sys.executable, "-c", code], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "listening\n"
    return proc


def _inventory(env, path: Path, *, silent: bool = False, **extra) -> Path:
    cluster, project = env["cluster"], env["project"]
    group = {
        "flodl_controller_host": cluster.controller_ip, "flodl_controller_path": str(project), "flodl_cmd": "train",
        "flodl_launch_command": "python3 launcher.py", "flodl_launch_grace_seconds": GRACE,
        "flodl_prebuild_env": {"PATH": f"{env['tools']}:/usr/bin:/bin"},
    }
    group.update(extra)
    hosts = {h: {"flodl_path": str(project), "flodl_arch": "precompiled/cu128", "flodl_local_devices": [0],
                 "flodl_nccl_socket_ifname": "eth0"} for h in ("h1", "h2")}
    inv = cluster.inventory(group, hosts)
    if silent:
        quiet = dict(inv["all"]["children"]["flodl_workers"]["hosts"]["h2"])
        # Without the harness's own ConnectTimeout=10, so the collection's bounds are what applies.
        common = " ".join(o for o in quiet["ansible_ssh_common_args"].split("-o ") if not o.startswith("ConnectTimeout"))
        quiet.update(ansible_host=cluster["h1"].ip, ansible_port=SILENT_PORT,
                     ansible_ssh_common_args=" ".join(f"-o {o.strip()}" for o in common.split() if o.strip()))
        inv["all"]["children"]["flodl_workers"]["hosts"]["h3"] = quiet
    path.write_text(json.dumps(inv, indent=2))
    return path


def _run(collection, marker: str, argv: list[str]) -> tuple[subprocess.Popen, list[str]]:
    """ansible-playbook streamed, the trial's marker in its environment (what ``leftovers`` looks for)."""
    proc, lines, _reader = stream(collection, ["ansible-playbook", *argv], FLODL_SIGNAL_TRIAL=marker)
    return proc, lines


def _read(path: str) -> bytes:
    """A /proc file whole, by os.open/os.read: a scan of every process reads hundreds of them (pathlib costs 7x)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = [os.read(fd, 65536)]
        while len(chunks[-1]) == 65536:
            chunks.append(os.read(fd, 65536))
        return b"".join(chunks)
    finally:
        os.close(fd)


def _procs(environ: bool = True) -> dict[int, tuple[bytes, bytes]]:
    """pid: (cmdline, environ) of every other process (one whose files cannot be read is left out). Without
    ``environ``, cmdlines only (b"" for environ): half the reads, for the polls that look at argv alone."""
    out = {}
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            try:
                out[int(entry)] = (_read(f"/proc/{entry}/cmdline"),
                                   _read(f"/proc/{entry}/environ") if environ else b"")
            except OSError:
                continue
    return out


def _netns_inode(pid: int | str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def leftovers(env, marker: str) -> tuple[list[str], list[str]]:
    """(processes of the run still alive, Ansible's own ssh mux masters of the run)."""
    paths = [str(env["project"]).encode(), str(env["tools"]).encode()]
    tag = f"FLODL_SIGNAL_TRIAL={marker}".encode()
    left, masters = [], []
    for pid, (cmdline, environ) in _procs().items():
        text = cmdline.replace(b"\0", b" ").decode("utf-8", "replace").strip()
        if not text:
            continue  # a zombie, reaped by its parent soon
        # The remote build module carries no marker: one on this module's hosts (other runs share the machine).
        module = b"AnsiballZ_cargo_prebuild" in cmdline and _netns_inode(pid) in env["host_netns"]
        if tag in environ.split(b"\0") or module or any(p in cmdline for p in paths):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                text = f"[ppid {stat[1]} pgrp {stat[2]} sid {stat[3]}] {text}"
            except OSError:
                pass
            (masters if "[mux]" in text and "/.ansible/cp/" in text else left).append(f"{pid} {text[:400]}")
    return left, masters


def _ranks_running(env) -> int:
    needle = f"{env['project']}/target/cluster/".encode()
    return sum(needle in c for c, _e in _procs(environ=False).values())  # polled every 0.05 s: argv only


def _trial(collection, env, tmp_path: Path, phase: str, trial: int, send, label: str) -> None:
    """Start the phase, ``send`` (given ansible-playbook's pid) once it runs, require a clean machine."""
    marker = uuid.uuid4().hex
    slow = env["shared"] / f"slow-{marker}"
    inv_path = tmp_path / f"inv-{trial}.json"
    if phase == "preflight":
        # The silent worker keeps the probe round in flight for its connect bound.
        inv = _inventory(env, inv_path, silent=True, flodl_preflight_timeout=20)
        proc, lines = _run(collection, marker, ["-i", str(inv), f"{PLAYBOOKS}.preflight"])
        wait_for(lines, proc, lambda t: "Preflight | Probe every worker" in t, 120, "the probe", poll=0.05, while_running=True)
        time.sleep(0.5)
        if os.environ.get("FLODL_SIGNAL_DEBUG"):
            for pid, (c, e) in _procs().items():
                if b"2222" in c:
                    st = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    par = Path(f"/proc/{st[1]}/stat").read_text().rsplit(")", 1)[1].split()
                    print("DEBUG", pid, "ppid", st[1], "pgrp", st[2], "sid", st[3], "| parent ppid", par[1],
                          "pgrp", par[2], "sid", par[3], "playbook", proc.pid,
                          Path(f"/proc/{st[1]}/cmdline").read_bytes()[:80])
    elif phase == "prebuild":
        inv = _inventory(env, inv_path, flodl_build_host="h1",
                         flodl_prebuild_env={"PATH": f"{env['tools']}:/usr/bin:/bin", "FLODL_TRIAL_SLOW": str(slow)})
        proc, lines = _run(collection, marker, ["-i", str(inv), f"{PLAYBOOKS}.prebuild"])
        wait_for(lines, proc, lambda t: slow.exists(), 120, "the slow build", poll=0.05, while_running=True)
    else:
        inv = _inventory(env, inv_path)
        proc, lines = _run(collection, marker, ["-i", str(inv), f"{PLAYBOOKS}.cluster_train"])
        wait_for(lines, proc, lambda t: _ranks_running(env) >= 2, 180, "both ranks", poll=0.05, while_running=True)
    try:
        send(proc.pid)
        proc.wait(timeout=60)
    finally:
        kill_session(proc)
    t0 = time.monotonic()
    left, masters = leftovers(env, marker)
    while left and time.monotonic() - t0 < GRACE + 5:
        time.sleep(0.2)
        left, masters = leftovers(env, marker)
    seconds = time.monotonic() - t0
    late = left
    while late and time.monotonic() - t0 < 30:  # how late, for the report only
        time.sleep(0.5)
        late = leftovers(env, marker)[0]
    print(f"{phase} {label} trial {trial}: clean after {seconds:.1f}s"
          f"{f' (FAILED; gone after {time.monotonic() - t0:.1f}s)' if left else ''}; "
          f"Ansible's own ssh masters left: {len(masters)}")
    assert left == [], "\n".join(left) + "\n" + "".join(lines)[-3000:]


@pytest.mark.parametrize("phase", ["preflight", "prebuild", "launch"])
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_nothing_outlives_a_signal_to_ansible_playbook(installed_collection, sig_env, tmp_path, phase, sig):
    for trial in range(TRIALS):
        _trial(installed_collection, sig_env, tmp_path, phase, trial, lambda pid: os.kill(pid, sig), sig.name)


def test_nothing_outlives_a_sigkill_of_the_whole_process_group_in_the_launch(installed_collection, sig_env, tmp_path):
    """As ansible-runner or an execution environment may do: Ansible's workers die at the same instant."""
    _trial(installed_collection, sig_env, tmp_path, "launch", 0, lambda pid: os.killpg(pid, signal.SIGKILL),
           "SIGKILL to the process group")


# --------------------------------------------------------------------------- a worker that accepts TCP and never answers


def _bounded_run(collection, argv: list[str], limit: float) -> tuple[int, str, float]:
    proc, lines = _run(collection, uuid.uuid4().hex, argv)
    start = time.monotonic()
    try:
        rc = proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail(f"still running after {limit:g}s:\n" + "".join(lines))
    seconds = time.monotonic() - start
    time.sleep(0.2)  # the reader's last lines
    return rc, " ".join("".join(lines).split()), seconds


def test_a_silent_worker_ends_preflight_with_the_default_bounds(installed_collection, sig_env, tmp_path):
    inv = _inventory(sig_env, tmp_path / "inv.json", silent=True)
    rc, out, seconds = _bounded_run(installed_collection, ["-i", str(inv), f"{PLAYBOOKS}.preflight"], 60)
    print(f"preflight with a silent worker ended after {seconds:.1f}s (rc={rc})")
    # The probe's own connect bound (ConnectTimeout=5) covers the banner exchange; preflight only warns
    # about a host it could not reach (the launch decides), naming it.
    assert rc == 0 and "h3: unreachable" in out, out
    assert "[WARNING]: h3: preflight probe could not run (ssh failed: Connection timed out during banner exchange)" \
        in out, out
    assert "h1: warning" in out and "h2: warning" in out, out
    assert "ConnectTimeout=5" in out and "ConnectTimeout=10" not in out and seconds < 25, out


def test_a_silent_worker_ends_the_launch_within_the_connect_bound(installed_collection, sig_env, tmp_path):
    env = sig_env
    # The launch phase alone, after a prebuild that reaches no worker (it runs on the controller); the
    # bound lowered from its default (10 s, unit: test_connect_bound.py) to keep the test short.
    inv = _inventory(env, tmp_path / "inv.json", silent=True, flodl_launch_connect_timeout=2)
    rc, out, _seconds = _bounded_run(installed_collection, ["-i", str(inv), f"{PLAYBOOKS}.prebuild"], 120)
    assert rc == 0, out
    rc, out, seconds = _bounded_run(installed_collection, ["-i", str(inv), f"{PLAYBOOKS}.launch"], 90)
    print(f"launch with a silent worker ended after {seconds:.1f}s (rc={rc})")
    assert rc != 0, out
    # The launcher's ssh to h3 gives up at the connect bound and the launch fails; its orphan cleanup
    # names h3, which it could not reach either, and stops the ranks h1 and h2 had started.
    for host in ("h1", "h2"):
        assert f"{host}: changed — stopped 1 process(es) of {env['project']}/target/cluster/{host}/" in out, out
    assert "the launch command exited with code 255" in out and "Connection timed out during banner exchange" in out
    assert ("h3: unreachable — host h3: cleanup could not run (ssh exited 255: Connection timed out during banner "
            "exchange)") in out, out
    assert seconds < 40, out
    needle = f"{env['project']}/target/cluster/".encode()
    ranks = [(pid, c, _netns_inode(pid)) for pid, (c, _e) in _procs().items() if needle in c]
    assert ranks == [], (ranks, env["host_netns"])
