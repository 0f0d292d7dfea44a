#!/usr/bin/env python3
"""STAND-IN for flodl's launcher -- a demo/test reference, NOT flodl.

flodl's real launcher lives inside the training binary (the Rust library's
``launcher::dispatch``) and needs libtorch and GPUs. This small stdlib script
plays its part for the flodl.cluster demo and tests, following the launcher
contract (docs/launcher-contract.md §3f-§3h) closely enough to prove that the
environment flodl.cluster prepares is complete and correct:

* reads ``FLODL_INTERNAL_FULL_CLUSTER_JSON`` (hex JSON topology),
  ``FLODL_INTERNAL_PREBUILD_PER_HOST`` (compact JSON envelope),
  ``FLODL_INTERNAL_HOST_USER``, ``FDL_ENV``, ``FLODL_NET_TIMEOUT_SCALE``,
  ``FLODL_VERBOSITY`` and ``FLODL_INTERNAL_FDL_CMD``;
* runs the pre-spawn orphan cleanup (``pkill`` of the prebuilt binary) on
  every remote worker that has an envelope entry;
* starts one ``ssh`` per remote worker with flodl's argv and remote command
  shape (envelope read from stdin, ``cd``, ``FLODL_INTERNAL_AGENT_JSON``,
  ``FLODL_HOST_NAME``, prefix assignments, the absolute prebuilt binary, a
  TERM/KILL trap, ``wait``, ``exit``) and writes the hex AgentSpec on stdin;
* forwards every output line prefixed with ``[<host>] `` (the real launcher
  prefixes rank lines with ``[<host>:<device>:r<rank>] ``);
* waits for every host (it does not stop the others when one fails: the
  demo wants every host's result) and exits with the worst (highest) exit
  code, after running the cleanup again;
* names a host whose program exits non-zero as flodl's launcher names a
  failing rank, on stderr: ``cluster launcher: host "h2" reports rank 2
  exited with code 3`` (the host's first rank: the stand-in runs one
  program per host). Exit 255 is ssh's own failure, not a rank's: that
  host is not named so.

With ``controller.join.discovery: true`` (flodl.cluster's ``walk_in`` mode) it
starts no host: it opens a join window for the walk-in agents Ansible starts
(``standin_walkin.py``).

What it does NOT do: no HMAC, no rendezvous, no rank children. The remote program it starts is the prebuilt binary itself, which
in the demo *is* the "rank" (it prints its variant, host and cwd). A worker
on the controller's own box is started directly (``target/release/<cmd>``
when built, else ``cargo run --release --bin <cmd>``).

Usage: ``python3 standin_launcher.py [args passed to every host's binary]``.
"""
from __future__ import annotations

import binascii
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time

ENV_FULL = "FLODL_INTERNAL_FULL_CLUSTER_JSON"
ENV_PREBUILD = "FLODL_INTERNAL_PREBUILD_PER_HOST"
ENV_HOST_USER = "FLODL_INTERNAL_HOST_USER"
ENV_FDL_CMD = "FLODL_INTERNAL_FDL_CMD"
SSH_DEFAULTS = [
    "-T", "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3",
    "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new",
]

_out_lock = threading.Lock()
_children: list[subprocess.Popen] = []
_stopping = threading.Event()


def say(text: str, stream=None) -> None:
    stream = stream or sys.stdout
    with _out_lock:
        stream.write(text + "\n")
        stream.flush()


def q(value: str) -> str:
    """The launcher's quoting: always single quotes, ``'`` written as ``'\\''``."""
    return "'" + value.replace("'", "'\\''") + "'"


def my_hostname() -> str:
    override = os.environ.get("FLODL_HOST_NAME", "").strip()
    return override or socket.gethostname()


def load_topology() -> dict:
    raw = os.environ.get(ENV_FULL)
    if raw is None:
        sys.exit(f"standin-launcher: {ENV_FULL} is not set: start me through flodl.cluster's launch phase")
    text = raw.strip()
    if len(text) % 2:
        sys.exit(f"standin-launcher: {ENV_FULL} has odd length")
    return json.loads(binascii.unhexlify(text).decode("utf-8"))


def load_envelope() -> dict:
    raw = os.environ.get(ENV_PREBUILD, "")
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except ValueError as exc:
        sys.exit(f"standin-launcher: {ENV_PREBUILD} is not valid JSON: {exc}")


def ssh_argv(worker: dict, port: int, remote_command: str) -> list[str]:
    """§3f order: tunnel, user -o options, defaults, -p, -l, -i, target, command."""
    ssh = worker.get("ssh") or {}
    argv = ["ssh"]
    if worker.get("tunnel"):
        argv += ["-R", f"127.0.0.1:{port}:127.0.0.1:{port}", "-o", "ExitOnForwardFailure=yes"]
    for option in ssh.get("options") or []:
        argv += ["-o", option]
    argv += SSH_DEFAULTS
    if ssh.get("port") is not None:
        argv += ["-p", str(ssh["port"])]
    user = ssh.get("user") or os.environ.get(ENV_HOST_USER, "").strip()
    if user:
        argv += ["-l", user]
    if ssh.get("identity_file"):
        argv += ["-i", ssh["identity_file"]]
    argv += [ssh.get("target") or worker["host"], remote_command]
    return argv


def remote_command(worker: dict, topo: dict, entry: dict | None, args: list[str]) -> str:
    path = worker["path"].rstrip("/")
    cwd = path
    if entry and entry.get("cwd_subpath"):
        cwd = f"{path}/{entry['cwd_subpath']}"
    prefix = ""
    for name in ("FLODL_VERBOSITY", "FLODL_NET_TIMEOUT_SCALE"):
        if name in os.environ:
            prefix += f" {name}={q(os.environ[name])}"
    user_env = {**(topo.get("env") or {})}
    if entry and "LD_LIBRARY_PATH" not in user_env and "LD_LIBRARY_PATH" not in (worker.get("env") or {}):
        prefix += f" LD_LIBRARY_PATH={q(entry['ld_library_path'])}"
    for key in sorted(topo.get("env") or {}):
        prefix += f" {key}={q(topo['env'][key])}"
    for key in sorted(worker.get("env") or {}):
        prefix += f" {key}={q(worker['env'][key])}"
    if os.environ.get("FDL_ENV", "").strip():
        prefix += f" FDL_ENV={q(os.environ['FDL_ENV'])}"
    if entry:
        program = q(f"{path}/{entry['bin']}")
    else:
        program = f" fdl {q(os.environ.get(ENV_FDL_CMD, ''))}"
    argline = "".join(f" {q(a)}" for a in args)
    return (
        "IFS= read -r __FLODL_ENVELOPE\n"
        f'cd {q(cwd)} && FLODL_INTERNAL_AGENT_JSON="$__FLODL_ENVELOPE" FLODL_HOST_NAME={q(worker["host"])} '
        f"{prefix} {program}{argline} &\n"
        "__flodl_pid=$!\n"
        "trap 'kill -TERM \"$__flodl_pid\" 2>/dev/null; ( sleep 10; kill -KILL \"$__flodl_pid\" 2>/dev/null ) &' "
        "HUP TERM INT\n"
        'wait "$__flodl_pid"\n'
        "exit $?"
    )


def agent_spec(worker: dict, topo: dict, salt_hex: str | None, controller_host: str) -> str:
    spec = {
        "host": worker["host"],
        "controller_host": controller_host,
        "controller_port": topo["controller"]["port"],
        "salt_hex": salt_hex,
        "local_devices": worker["local_devices"] if isinstance(worker["local_devices"], list) else None,
        "libtorch": worker.get("arch") or "",
        "dataset_sig_hex": None,
        "run_id": None,
        "data_path": None,
        "gpu_ram_share": None,
        "model_sig_hex": None,
    }
    return binascii.hexlify(json.dumps(spec, separators=(",", ":")).encode()).decode()


def cleanup(workers: list[dict], envelope: dict, when: str) -> None:
    """§3g: best effort, parallel, output discarded."""
    procs = []
    for worker in workers:
        entry = envelope.get(worker["host"])
        if not entry:
            continue
        abs_bin = f"{worker['path'].rstrip('/')}/{entry['bin']}"
        script = f"pkill -TERM -f {q(abs_bin)} >/dev/null 2>&1; sleep 1; pkill -KILL -f {q(abs_bin)} >/dev/null 2>&1; true"
        argv = ssh_argv({**worker, "tunnel": False}, 0, script)
        try:
            procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        except OSError:
            pass
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    if procs:
        say(f"[standin-launcher] {when} orphan cleanup ran on {len(procs)} host(s)")


def forward(stream, host: str, out) -> None:
    for raw in iter(stream.readline, b""):
        try:
            line = raw.decode("utf-8").rstrip("\n")
        except UnicodeDecodeError:
            continue  # like flodl: non-UTF-8 lines are skipped
        say(f"[{host}] {line}", out)


def start(host: str, argv: list[str], stdin_text: str | None, cwd: str | None = None,
          env: dict | None = None) -> tuple[subprocess.Popen, list[threading.Thread]]:
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env)
    _children.append(proc)
    if stdin_text is not None:
        assert proc.stdin is not None
        proc.stdin.write(stdin_text.encode())
        proc.stdin.close()
    threads = [threading.Thread(target=forward, args=(proc.stdout, host, sys.stdout), daemon=True),
               threading.Thread(target=forward, args=(proc.stderr, host, sys.stderr), daemon=True)]
    for t in threads:
        t.start()
    return proc, threads


def local_argv(cmd: str, args: list[str]) -> list[str]:
    built = os.path.join("target", "release", cmd)
    if os.access(built, os.X_OK):
        return [built, *args]
    return ["cargo", "run", "-q", "--release", "--bin", cmd, "--", *args]


def main(args: list[str]) -> int:
    topo = load_topology()
    if ((topo.get("controller") or {}).get("join") or {}).get("discovery"):
        return walk_in(topo)
    envelope = load_envelope()
    me = my_hostname()
    port = int(topo["controller"]["port"])
    join = topo["controller"].get("join") or {}
    salt = join.get("token") or secrets.token_hex(16)
    salt_hex = None if join.get("open_admission") else salt
    workers = [w for w in topo["workers"] if w.get("ranks")]
    remotes = [w for w in workers if w["host"] != me]
    say(f"[standin-launcher] STAND-IN for flodl's launcher: {len(workers)} host(s), "
        f"{sum(len(w['ranks']) for w in workers)} rank(s), controller {topo['controller']['host']}:{port}")

    def on_signal(signum, _frame):
        if _stopping.is_set():
            return
        _stopping.set()
        say(f"[standin-launcher] {signal.Signals(signum).name}: stopping every host")
        for proc in _children:
            if proc.poll() is None:
                proc.terminate()

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, on_signal)

    cleanup(remotes, envelope, "pre-spawn")
    running: list[tuple[str, subprocess.Popen, list[threading.Thread]]] = []
    for worker in workers:
        host = worker["host"]
        if host == me:
            env = dict(os.environ)
            for name in (ENV_FULL, "FLODL_INTERNAL_AGENT_JSON"):
                env.pop(name, None)
            env["FLODL_HOST_NAME"] = host
            env.update(topo.get("env") or {})
            env.update(worker.get("env") or {})
            proc, threads = start(host, local_argv(os.environ.get(ENV_FDL_CMD, "train"), args), None, env=env)
        else:
            controller_host = "127.0.0.1" if worker.get("tunnel") else topo["controller"]["host"]
            entry = envelope.get(host)
            argv = ssh_argv(worker, port, remote_command(worker, topo, entry, args))
            proc, threads = start(host, argv, agent_spec(worker, topo, salt_hex, controller_host) + "\n")
        running.append((host, proc, threads))

    worst = 0
    ranks = {w["host"]: list(w.get("ranks") or []) for w in workers}
    pending = {entry[0]: entry[1] for entry in running}
    while pending:
        for host, proc in list(pending.items()):
            code = proc.poll()
            if code is None:
                continue
            del pending[host]
            label = f"status {code}" if code >= 0 else f"signal {-code}"
            say(f"[standin-launcher] {host}: exited with {label}")
            if code != 0 and code != 255 and ranks.get(host):
                # The line flodl's launcher prints when a host's agent reports a rank's non-zero exit.
                say(f"cluster launcher: host {json.dumps(host)} reports rank {ranks[host][0]} exited with code "
                    f"{code}", sys.stderr)
            norm = code if code >= 0 else 128 - code
            if norm > worst:
                worst = norm
        time.sleep(0.05)
    for entry in running:
        for t in entry[2]:
            t.join(timeout=5)
    cleanup(remotes, envelope, "post-exit")
    if _stopping.is_set() and worst == 0:
        worst = 143
    say(f"[standin-launcher] done: worst exit code {worst}")
    return worst


def walk_in(topo: dict) -> int:
    """A roster-free window: Ansible starts the agents, they dial in (standin_walkin.py)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from standin_walkin import WalkInError, Window  # noqa: E402  (the walk-in half, apart)

    try:
        window = Window(topo, say, float(os.environ.get("FLODL_NET_TIMEOUT_SCALE") or 1))
    except WalkInError as exc:
        say(f"cluster launcher: {exc}", sys.stderr)
        return 2

    def on_signal(signum, _frame):
        say(f"[standin-launcher] {signal.Signals(signum).name}: closing the window, every agent stops")
        window._close_all()
        os._exit(128 + signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, on_signal)
    code = window.run()
    say(f"[standin-launcher] done: worst exit code {code}")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
