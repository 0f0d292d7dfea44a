# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The launch host's session (module_utils._probe.launch_host): started before the sweep, read after it.

One ssh to the launch host, reached as Ansible reaches it, with strict host-key checking unless that
host's own ssh options say otherwise. When it takes the run lock it stays open (plugin_utils._proc.lock_holder)
until ansible-playbook ends.
"""
from __future__ import annotations

import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._probe import launch_host as lh
from ansible_collections.flodl.cluster.plugins.module_utils._run import runlock
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.ssh import host_key_failure
from ansible_collections.flodl.cluster.plugins.module_utils._probe.preflight_probe import last_line
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import Armed
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_launch import parse_reach, reach_script
from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import always_quote
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.ssh import launcher_argv, probe_argv, target_of
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import effective_data_path
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.variants import GpuCounts
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc import lock_holder
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import RunContext
from ansible_collections.flodl.cluster.plugins.plugin_utils._host.launch_target import launch_host_of, launch_ssh

STRICT = "StrictHostKeyChecking=yes"
RESULT_KEY = "launch_host"  # in the preflight result: what the launch step takes from the launch host


@dataclass
class Session:
    host: str
    proc: subprocess.Popen[bytes]
    stderr: Any
    locking: bool
    forwarding: bool
    target: str
    run_id: str | None = None
    origin: str | None = None
    started: float = field(default_factory=time.monotonic)


@dataclass
class SessionResult:
    host: str
    facts: lh.SessionFacts
    reach: Mapping[str, tuple[int, str]]
    errors: list[str]
    warnings: list[str]
    forwarding: bool


def strict_ssh(ssh: Mapping[str, Any]) -> dict[str, Any]:
    """The launch host's ssh block with strict host-key checking after its own options (ssh keeps the first)."""
    out = dict(ssh)
    out["options"] = [*(ssh.get("options") or []), STRICT]
    return out


def this_run_id() -> str:
    """The run id of this ansible-playbook process (the action's parent): one for every step of the run.

    Its pid namespace is part of it: two pods may give their ansible-playbook the same pid at the same tick.
    """
    ppid = os.getppid()
    try:
        space = str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        space = "?"
    start = lock_holder.process_start(ppid) or "?"
    return runlock.playbook_run_id(f"{socket.gethostname()}/{space}", ppid, start)


def start(action: Any, task_vars: Mapping[str, Any], ctx: RunContext, *, lock: bool, reach: bool = True,
          gpus: bool = False, checks: Sequence[Armed] = ()) -> Session | None:
    """Open the launch host's session, or None without a launch host. Raises RemoteLaunchError (not in inventory).

    ``checks``: the armed probe checks the session runs on the controller's data path there.
    """
    host = launch_host_of(ctx, task_vars, action._templar)
    if host is None:
        return None
    ssh = launch_ssh(action, task_vars, host, ctx.settings.launch_forward_agent)
    argvs = {
        w.host: launcher_argv(w.document, "true", project_root=ctx.project_dir, connect_timeout=ctx.connect_timeout)
        for w in ctx.remotes
        if reach and ctx.inventory_names.get(w.host) != host and w.host != host
    }
    path, _declared = effective_data_path(ctx.cluster.controller.data_path)
    run_id = this_run_id() if lock else None
    origin = runlock.lock_name(ctx.controller_identity)
    script = lh.session_script(ctx.project_dir, data_path=path, reach=reach_script(argvs) if argvs else None,
                               gpus=gpus, checks=checks, run_id=run_id, ttl=ctx.settings.run_lock_ttl, origin=origin)
    argv = probe_argv({"host": host, "ssh": strict_ssh(ssh)}, "sh -c " + always_quote(script))
    errors = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", lock_holder.__file__, str(os.getppid()), lh.MARK_END, *argv],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors, start_new_session=True, close_fds=True)
    return Session(host, proc, errors, lock, "ForwardAgent=yes" in (ssh.get("options") or []),
                   target_of({"host": host, "ssh": ssh}).rsplit("@", 1)[-1], run_id, origin)


def _read_until_eof(proc: subprocess.Popen[bytes], deadline: float) -> tuple[bytes, bool]:
    """The holder's stdout up to its end (it closes it after the end sentinel); (data, timed out)."""
    chunks: list[bytes] = []
    if proc.stdout is None:
        return b"", False
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return b"".join(chunks), True
            if not sel.select(timeout=left):
                continue
            data = os.read(proc.stdout.fileno(), 65536)
            if not data:
                return b"".join(chunks), False
            chunks.append(data)


def finish(session: Session, project_dir: str, timeout: float, inventory_hint: str = "<inventory>") -> SessionResult:
    """What the session said, as problems: the lock's refusal or takeover, a host key, no connection."""
    data, timed_out = _read_until_eof(session.proc, session.started + timeout)
    stdout = data.decode("utf-8", "replace")
    facts = lh.parse_session(stdout)
    errors: list[str] = []
    warnings: list[str] = []
    if timed_out or not facts.complete:
        if timed_out:
            os.killpg(session.proc.pid, signal.SIGKILL)
        try:
            rc = session.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            rc = None
        session.stderr.seek(0)
        err = session.stderr.read().decode("utf-8", "replace")
        why = f"no answer within {timeout:g}s" if timed_out else (last_line(err) or f"exit {rc}")
        errors.append(lh.reachable_problem(session.host, session.target, host_key_failure(err), why))
    elif session.locking:
        this_run = runlock.this_run_text(facts.identity or session.host, session.run_id or "?", session.origin)
        error, warning = lh.lock_outcome(session.host, project_dir, facts, inventory_hint, this_run)
        errors += [error] if error else []
        warnings += [warning] if warning else []
    session.stderr.close()
    if session.proc.stdout is not None:
        session.proc.stdout.close()
    return SessionResult(session.host, facts, parse_reach(stdout), errors, warnings, session.forwarding)


def result_fields(res: SessionResult) -> dict[str, Any]:
    """What the launch step reads back from the preflight result: the controller's identity and GPUs there."""
    gpus = res.facts.gpus
    return {"host": res.host, "identity": res.facts.identity,
            "gpus": gpus.as_dict() if gpus else None}


def launch_host_facts(preflight: Any, host: str | None) -> tuple[str, GpuCounts | None]:
    """(HOSTNAME to export, the controller's GPU counts) for a launch on ``host``, from the preflight result.

    Without a preflight session of that host in this play: no HOSTNAME (never this machine's name) and
    no count.
    """
    found = preflight.get(RESULT_KEY) if isinstance(preflight, Mapping) else None
    if not isinstance(found, Mapping) or found.get("host") != host:
        return "", None
    identity = found.get("identity")
    counts = GpuCounts.from_dict(found.get("gpus"))
    return (str(identity) if isinstance(identity, str) else ""), counts
