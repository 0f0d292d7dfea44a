# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Detached launches for runs of days: start, return a run id, follow with ``status``, stop with ``teardown``.

The launch command starts in a session of its own on the launch host,
detached from the play (``setsid``, output to its log file), and the play
ends. A small record under ``<project>/target/cluster/runs/<run id>.json``
on the controller side says where it runs (launch host, pid, log), for the
``status`` and ``teardown`` playbooks.

The record is never trusted: it lives in a shared project that anyone with
write access there can forge. It is size capped, JSON and typed, and before
``status`` reports its pid as the launcher or ``teardown`` signals it, the
launch host proves that the pid is this run's launcher (:func:`proof_part`):
the leader of its own session, owned by the user asking, started when the
record says (when the record knows), and running the recording wrapper with
this run's exit file on its command line. A pid of 1 or less is never used.
"""
from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from typing import Any
from dataclasses import asdict, dataclass

from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_launch import END_MARK
from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import always_quote, live_member_function

FORMAT = "flodl-detached/1"
RUNS_DIR_REL = "target/cluster/runs"
MAX_RECORD_BYTES = 4096
PID_MARK = "__FLODL_DETACHED_PID__"
ALIVE_MARK = "__FLODL_ALIVE__"
EXIT_MARK = "__FLODL_EXIT__"
PROOF_MARK = "__FLODL_PROOF__"
START_MARK = "__FLODL_DETACHED_START__"
EXIT_SUFFIX = ".exit"  # beside the log: the launch command's exit code, written when it ends
MIN_PID = 2  # 1 is init, 0 and -1 mean "my group" and "every process" to kill: never a launcher's
_RUN_ID = re.compile(r"[0-9a-f]{16}")


@dataclass(frozen=True)
class DetachedRun:
    run_id: str
    launch_host: str
    pid: int
    log: str
    command: str
    started: float
    # The launcher's start time on the launch host (clock ticks since boot, /proc/<pid>/stat), "" when unknown.
    proc_start: str = ""

    def to_json(self) -> str:
        return json.dumps(dict(asdict(self), format=FORMAT), sort_keys=True) + "\n"


def record_name(run_id: str) -> str:
    if not _RUN_ID.fullmatch(run_id):
        raise ValueError("a run id is 16 lowercase hex characters")
    return f"{run_id}.json"


def parse_record(data: bytes) -> tuple[DetachedRun | None, str | None]:
    """``(run, None)`` or ``(None, problem)``; the problem gives type and size, never content."""
    if len(data) > MAX_RECORD_BYTES:
        return None, f"the run record is {len(data)} bytes, over {MAX_RECORD_BYTES}"
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None, f"the run record ({len(data)} bytes) is not JSON"
    if not isinstance(value, dict) or value.get("format") != FORMAT:
        return None, "the file is not a flodl detached-run record"
    pid, started = value.get("pid"), value.get("started")
    if isinstance(pid, bool) or not isinstance(pid, int) or not MIN_PID <= pid < 2**31:
        return None, f"the run record's pid is not an integer from {MIN_PID} (pid 1 and below are never signalled)"
    if isinstance(started, bool) or not isinstance(started, (int, float)):
        return None, "the run record's started is not a time"
    for key in ("run_id", "launch_host", "log", "command"):
        if not isinstance(value.get(key), str) or not value[key] or "\n" in value[key]:
            return None, f"the run record's {key} is not a one-line string"
    if not _RUN_ID.fullmatch(value["run_id"]):
        return None, "the run record's run_id is not a run id"
    proc_start = value.get("proc_start", "")
    if not isinstance(proc_start, str) or not (proc_start == "" or proc_start.isdigit()) or len(proc_start) > 20:
        return None, "the run record's proc_start is not a start time"
    return DetachedRun(value["run_id"], value["launch_host"], pid, value["log"], value["command"], float(started),
                       proc_start), None


def exit_file(log: str) -> str:
    return log + EXIT_SUFFIX


# The session leader runs the command, then records its exit code (via a temporary name, so a reader
# never sees half a number). A session stopped by teardown records nothing: "ended without an exit code".
_RECORDING_WRAPPER = '"$0" -c "$1"; rc=$?; printf "%s\\n" "$rc" > "$2.tmp" && mv -f "$2.tmp" "$2"; exit "$rc"'


def detach_script(cwd: str, command: str, log: str, shell: str = "/bin/sh", stdin_through: bool = False) -> str:
    """POSIX sh: read the env lines from stdin, start ``command`` detached in ``cwd``, print its pid.

    The detached session records the command's exit code in :func:`exit_file` when it ends. With
    ``stdin_through`` nothing is read or exported here: the command gets this script's stdin as it is (a
    walk-in launcher on a launch host: the env lines travel on, plugin_utils._proc.stdin_holder).
    """
    log_dir = log.rsplit("/", 1)[0] or "/"
    # A background job's stdin is /dev/null in sh: the real one, when it goes through, waits on fd 3.
    take = ["exec 3<&0"] if stdin_through else [
        f"while IFS= read -r __flodl_line; do [ \"$__flodl_line\" = {END_MARK} ] && break; "
        'export "$__flodl_line"; done']
    given = "<&3 3<&-" if stdin_through else "</dev/null"
    return "\n".join([
        *take,
        f"cd {always_quote(cwd)} || exit 97",
        # The umask first: the log directory (and any parent made with it) is 0750 whatever the caller's.
        f"umask 027 && mkdir -p {always_quote(log_dir)} || exit 98",
        f"setsid {always_quote(shell)} -c {always_quote(_RECORDING_WRAPPER)} {always_quote(shell)} "
        f"{always_quote(command)} {always_quote(exit_file(log))} {given} >>{always_quote(log)} 2>&1 &",
        f"echo {PID_MARK}=$!",
        # Its start time, for the record: a pid reused by a later process never matches it.
        f"echo {START_MARK}=$(sed 's/.*) //' /proc/$!/stat 2>/dev/null | cut -d' ' -f20)",
    ])


def parse_pid(stdout: str) -> int | None:
    text = _mark(stdout, PID_MARK)
    return int(text) if text is not None and text.isdigit() else None


def parse_start(stdout: str) -> str:
    """The detached session's start time as the launch host printed it, "" when it printed none."""
    text = _mark(stdout, START_MARK) or ""
    return text if text.isdigit() and len(text) <= 20 else ""


def _mark(stdout: str, mark: str) -> str | None:
    for line in stdout.splitlines():
        if line.startswith(mark + "="):
            return line.split("=", 1)[1].strip()
    return None


# The proof, in POSIX sh: prints one word. ok: the pid is this run's launcher. gone: no such live process
# (ended, a zombie, or exiting: its command line is already empty). Any other word names the check the process failed, and nothing may signal it.
# Fields of /proc/<pid>/stat after "pid (comm) ": $4 state, $6 pgrp, $7 session, ${23} start time.
_PROOF_FUNCTION = (
    "__flodl_proof() { "
    "__s=$(sed 's/.*) //' \"/proc/$1/stat\" 2>/dev/null); [ -n \"$__s\" ] || { echo gone; return; }; "
    "set -f; set -- \"$1\" \"$2\" \"$3\" $__s; set +f; "
    "[ \"$4\" != Z ] || { echo gone; return; }; "
    "[ \"$6\" = \"$1\" ] && [ \"$7\" = \"$1\" ] || { echo session; return; }; "
    "[ -z \"$3\" ] || [ \"${23}\" = \"$3\" ] || { echo start; return; }; "
    "__u=$(sed -n 's/^Uid:[[:space:]]*\\([0-9]*\\).*/\\1/p' \"/proc/$1/status\" 2>/dev/null); "
    "[ \"$__u\" = \"$(id -u)\" ] || { echo user; return; }; "
    "__c=$(tr '\\000' '\\n' < \"/proc/$1/cmdline\" 2>/dev/null); [ -n \"$__c\" ] || { echo gone; return; }; "
    "printf '%s\\n' \"$__c\" | grep -qxF -e \"$2\" || { echo command; return; }; "
    "echo ok; }"
)

# What each failed check means, for the operator.
PROOF_FAILURES = {
    "session": "it is not the leader of a session of its own, as a detached launcher is",
    "start": "it started at another time than the record's launcher",
    "user": "it belongs to another user than the one asking",
    "command": "its command line is not the recording wrapper of this run's log",
}


def proof_part(run: DetachedRun) -> str:
    """POSIX sh that prints ``__FLODL_PROOF__=<word>`` for ``run``'s pid and leaves ``$__flodl_pf`` set to it."""
    pid = _signallable(run.pid)
    return (f"{_PROOF_FUNCTION}; __flodl_pf=$(__flodl_proof {pid} {always_quote(exit_file(run.log))} "
            f"{always_quote(run.proc_start)}); echo {PROOF_MARK}=$__flodl_pf")


def parse_proof(stdout: str) -> str | None:
    return _mark(stdout, PROOF_MARK)


def _signallable(pid: int) -> int:
    pid = int(pid)
    if pid < MIN_PID:
        raise ValueError(f"pid {pid} is never a launcher's")
    return pid


def status_script(run: DetachedRun, lines: int) -> str:
    """POSIX sh: the proof, whether the launcher is alive, its recorded exit code, the log's last ``lines`` lines.

    Only a proven launcher is alive: a zombie (a container's PID 1 may never reap) or another process on a
    reused or forged pid is not.
    """
    return (
        f"{proof_part(run)}; "
        f"if [ \"$__flodl_pf\" = ok ]; then echo {ALIVE_MARK}=1; else echo {ALIVE_MARK}=0; fi; "
        f"echo {EXIT_MARK}=$(head -c 16 {always_quote(exit_file(run.log))} 2>/dev/null); "
        f"tail -n {max(1, int(lines))} {always_quote(run.log)} 2>/dev/null; true"
    )


def stop_script(run: DetachedRun, grace: float) -> str:
    """POSIX sh: when the proof holds, TERM the launcher's own session, KILL what is left after ``grace`` s.

    The group signalled is the proven launcher's own (its pid is its session and group id), never another.
    """
    pgid = _signallable(run.pid)
    return (
        f"{proof_part(run)}; "
        f"{live_member_function('__flodl_live')}; "
        f"if [ \"$__flodl_pf\" = ok ]; then kill -TERM -{pgid} 2>/dev/null; "
        f"i=0; while __flodl_live -g {pgid} && [ $i -lt {max(1, int(grace)) * 10} ]; do sleep 0.1; i=$((i+1)); done; "
        f"kill -KILL -{pgid} 2>/dev/null; echo {ALIVE_MARK}=stopped; else echo {ALIVE_MARK}=0; fi; "
        f"echo {EXIT_MARK}=$(head -c 16 {always_quote(exit_file(run.log))} 2>/dev/null)"
    )


def parse_status(stdout: str) -> tuple[str | None, list[str]]:
    """(alive marker value, the other lines: the log tail)."""
    alive, rest = None, []
    for line in stdout.splitlines():
        if line.startswith(ALIVE_MARK + "=") and alive is None:
            alive = line.split("=", 1)[1].strip()
        elif not line.startswith((EXIT_MARK + "=", PROOF_MARK + "=")):
            rest.append(line)
    return alive, rest


def parse_exit(stdout: str) -> int | None:
    """The recorded exit code, or None when the run has recorded none (still running, or stopped)."""
    for line in stdout.splitlines():
        if line.startswith(EXIT_MARK + "="):
            text = line.split("=", 1)[1].strip()
            return int(text) if text.isdigit() and len(text) <= 3 else None
    return None


@dataclass(frozen=True)
class RunState:
    """What ``status`` reports about a detached run, and whether that fails the job."""

    state: str  # running | succeeded | failed | stopped | unknown
    rc: int | None
    failed: bool
    summary: str


def run_state(alive: str | None, rc: int | None, why_unknown: str = "no answer", proof: str | None = None) -> RunState:
    """The verdict: a run that ended with a non-zero code, ended without one, or cannot be asked, fails.

    ``proof`` is the launch host's word on the record's pid (:func:`proof_part`). A live process that is not
    this run's launcher (a forged record, or a pid reused after the run ended) is reported, never as running.
    """
    if alive == "1" and proof in (None, "ok"):
        return RunState("running", None, False, "launcher running")
    if proof not in (None, "ok", "gone") and rc is None:
        why = PROOF_FAILURES.get(str(proof), f"the launch host answered {proof!r}")
        return RunState("unproven", None, True, "the process at the record's pid is not this run's launcher "
                        f"({why}): the record may be forged, or the run ended and its pid was reused; "
                        "nothing was signalled")
    if alive == "0" and rc == 0:
        return RunState("succeeded", 0, False, "launcher ended, exit code 0")
    if alive == "0" and rc is not None:
        return RunState("failed", rc, True, f"launcher ended, exit code {rc}")
    if alive == "0":
        return RunState("stopped", None, True, "launcher ended without recording an exit code (stopped by teardown, "
                        "or its session was killed)")
    return RunState("unknown", None, True, f"launcher state unknown ({why_unknown})")


def latest(records: Mapping[str, DetachedRun]) -> DetachedRun | None:
    """The most recently started run."""
    return max(records.values(), key=lambda r: r.started, default=None)


def new_record(run_id: str, launch_host: str, pid: int, log: str, command: str, proc_start: str = "") -> DetachedRun:
    return DetachedRun(run_id, launch_host, pid, log, command, time.time(), proc_start)


def requested_run_id(given: Any, run_id_var: Any, launch_artifact: Any) -> tuple[str | None, str | None]:
    """The run to report on: the task's ``run_id``, else ``flodl_run_id``, else the start job's artifact
    ``flodl_launch.run_id`` (what an AWX workflow hands the next job); None means the latest.
    Blank values (a survey's empty answer) count as unset; anything else must be a run id."""
    artifact = launch_artifact.get("run_id") if isinstance(launch_artifact, Mapping) else None
    for source, value in (("run_id", given), ("flodl_run_id", run_id_var), ("flodl_launch.run_id", artifact)):
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        text = str(value).strip()
        if not _RUN_ID.fullmatch(text):
            return None, (f"{source} is not a run id (16 lowercase hex characters, as the detached start printed "
                          "and published in the flodl_launch artifact)")
        return text, None
    return None, None
