# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One run of a project at a time: the lock record, its staleness, and the refusal.

A second start on the same hosts is worse than a refusal: the launcher's pre-spawn cleanup stops
every process of the same binary path, so it kills the first run's ranks. Pure parts only; the
caller writes the lock (exclusively, see safe_files.create_exclusive), adds the live-rank part
(module_utils._probe.live_ranks) to the preflight probe, and refuses with :func:`refusal_message`.

The lock file is never trusted: it lives in a shared project and anyone may have written it.

The lock is a lease (as an etcd or Consul lease): its holder renews it by touching the file every
:func:`renew_seconds` while the run lives, and anyone, on any controller, reads it as over once the file
has not been renewed for its ``ttl``. Its age is the file's mtime against a fresh file's mtime in the same
directory: both stamped by the clock of the file system that holds the lock, never by a controller's
clock, so a skewed controller clock cannot age a live lease. A holder's pid is checked only where it
means something: same controller identity and the same pid namespace of the same boot (``space``).
"""
from __future__ import annotations

import hashlib
import json
import math
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.model import Worker
from ansible_collections.flodl.cluster.plugins.module_utils._run.prebuild_layout import binary_subpath
from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import always_quote

FORMAT = "flodl-run-lock/1"
LOCK_FILE_REL = "target/cluster/run.lock"
MAX_LOCK_BYTES = 4096
MAX_FIELD_CHARS = 1024
# The lease: a lock not renewed for its ttl is over (flodl_run_lock_ttl; its holder renews every ttl/6).
DEFAULT_TTL = 60
MIN_TTL = 5
MAX_TTL = 86400
TTL_VARIABLE = "flodl_run_lock_ttl"
OVERRIDE_VARIABLE = "flodl_run_lock"
_STR_FIELDS = ("run_id", "controller_host", "project", "user")
# Optional fields (a record of an earlier version has none): where the pid means something, and who started it.
_OPTIONAL_FIELDS = ("space", "pid_start", "origin")
SAFE_CHARS = "A-Za-z0-9._:-"


@dataclass(frozen=True)
class LockRecord:
    """Who holds the run lock. ``started`` (the holder's clock) is shown, never compared: the file's mtime is the lease.

    ``space`` is ``<boot id>:<pid namespace inode>`` of the holder's pid, ``pid_start`` that process's start
    time (``/proc/<pid>/stat`` field 22): together they say whether a reader can check the pid at all.
    ``origin`` is the machine that ran ansible-playbook when it is not the controller (a launch host's lock).
    """

    run_id: str
    controller_host: str
    pid: int
    started: float
    project: str
    user: str
    ttl: int | None = None
    space: str | None = None
    pid_start: str | None = None
    origin: str | None = None

    def to_json(self) -> str:
        body = {k: v for k, v in asdict(self).items() if v is not None}
        body["format"] = FORMAT
        return json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n"

    @property
    def lease(self) -> int:
        return self.ttl or DEFAULT_TTL


def lock_name(identity: str) -> str:
    """The controller's identity as the lock records it (the launch host's sh does the same): safe characters only."""
    name = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "._:-") else "_" for ch in identity.strip())
    return name[:255] or "unknown-host"


def renew_seconds(ttl: float) -> int:
    """How often the holder renews a lease of ``ttl`` seconds: five renewals may fail before it lapses."""
    return max(1, int(ttl // 6))


def pid_checkable(record: LockRecord, this_host: str, this_space: str | None) -> bool:
    """Whether this reader may judge the holder by its pid: same controller identity, boot and pid namespace.

    A pid from another machine, container or boot names another process here, or none.
    """
    return bool(record.controller_host == this_host and record.space and record.space == this_space
                and record.pid_start)


def new_run_id() -> str:
    return secrets.token_hex(8)


def playbook_run_id(host: str, pid: int, pid_start: str) -> str:
    """The run id of one ansible-playbook process: the same for every step of that run, never for another.

    ``pid_start`` is the process's start time as the kernel gives it (``/proc/<pid>/stat`` field 22), so
    a reused pid gets another id.
    """
    return hashlib.sha256(f"{host}\0{pid}\0{pid_start}".encode("utf-8", "surrogateescape")).hexdigest()[:16]


def lock_path(project_dir: str) -> str:
    return f"{project_dir.rstrip('/') or ''}/{LOCK_FILE_REL}"


def field_sed(key: str, pattern: str) -> str:
    """A quoted ``sed -n`` program printing a JSON field of a one-line lock record (BRE, one group)."""
    return always_quote('s/.*"' + key + '": *' + pattern + '.*/\\1/p')


RUN_ID_SED = field_sed("run_id", '"\\([0-9a-f]*\\)"')


def release_script(project_dir: str, run_id: str) -> str:
    """POSIX sh removing the project's run lock when ``run_id`` holds it, and only then.

    A fragment for any script on the lock's host (the holder session that took it, a launch wrapper
    that outlives its job): it reads the lock's run id, never follows a link, never fails.
    """
    return _if_ours(project_dir, run_id, "rm -f")


def renew_script(project_dir: str, run_id: str) -> str:
    """POSIX sh renewing the lease (the lock's mtime, stamped by its file system) when ``run_id`` holds it."""
    return _if_ours(project_dir, run_id, "touch -c")


def _if_ours(project_dir: str, run_id: str, command: str) -> str:
    if not run_id or any(ch not in "0123456789abcdef" for ch in run_id):
        raise ValueError("the run lock's scripts need a run id of lowercase hex digits")
    f = always_quote(lock_path(project_dir))
    rid = f"$(head -c {MAX_LOCK_BYTES} {f} 2>/dev/null | tr -d '\\n' | sed -n {RUN_ID_SED})"
    return f'if [ -f {f} ] && [ ! -L {f} ] && [ "{rid}" = {run_id} ]; then {command} {f}; fi'


def parse_lock(data: bytes | str) -> tuple[LockRecord | None, str | None]:
    """``(record, None)`` or ``(None, problem)``; the problem tells type and size, never content."""
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    if len(raw) > MAX_LOCK_BYTES:
        return None, f"the lock file is {len(raw)} bytes, over the {MAX_LOCK_BYTES}-byte limit of a lock record"
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None, f"the lock file ({len(raw)} bytes) is not JSON"
    if not isinstance(value, dict):
        return None, f"the lock file holds a JSON {type(value).__name__}, not an object"
    if value.get("format") != FORMAT:
        return None, "the lock file is not a flodl run lock (wrong or missing format)"
    for key in _STR_FIELDS:
        field = value.get(key)
        if not isinstance(field, str) or not field or len(field) > MAX_FIELD_CHARS:
            return None, f"the lock file's {key} is not a non-empty string of at most {MAX_FIELD_CHARS} characters"
        if any(ord(ch) < 32 or ord(ch) == 127 for ch in field):
            return None, f"the lock file's {key} holds control characters"
    pid = value.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid < 2**31:
        return None, "the lock file's pid is not a positive integer"
    started = value.get("started")
    if isinstance(started, bool) or not isinstance(started, (int, float)) or not math.isfinite(started) or started < 0:
        return None, "the lock file's started is not a time in seconds"
    ttl = value.get("ttl")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int) or not MIN_TTL <= ttl <= MAX_TTL):
        return None, f"the lock file's ttl is not a whole number of seconds from {MIN_TTL} to {MAX_TTL}"
    optional: dict[str, str | None] = {}
    for key in _OPTIONAL_FIELDS:
        field = value.get(key)
        if field is not None and (not isinstance(field, str) or len(field) > 255 or not _safe(field)):
            return None, f"the lock file's {key} is not a short string of letters, digits and ._:-"
        optional[key] = field or None
    return LockRecord(
        run_id=value["run_id"],
        controller_host=value["controller_host"],
        pid=pid,
        started=float(started),
        project=value["project"],
        user=value["user"],
        ttl=ttl,
        **optional,
    ), None


def _safe(text: str) -> bool:
    return all(ch.isascii() and (ch.isalnum() or ch in "._:-") for ch in text)


def stale_reason(
    record: LockRecord,
    *,
    this_host: str,
    this_space: str | None,
    lease_age: float | None,
    holder_start: str | None = None,
) -> str | None:
    """Why the lock no longer protects a run, or None when it must be honoured.

    ``lease_age``: seconds since the lock was last renewed, by its file system's clock (None: unknown).
    ``holder_start``: the start time of the process now at the holder's pid, "" when there is none; only
    asked for when :func:`pid_checkable`. A negative age (the file system's clock stepped back) is a
    live lease. The probe of the workers (binary running?) is separate: a run whose lock is stale but
    whose binary still runs is live.
    """
    if holder_start is not None and pid_checkable(record, this_host, this_space):
        if not holder_start:
            return f"its process {record.pid} on {this_host} is gone"
        if holder_start != record.pid_start:
            return f"process {record.pid} on {this_host} is a newer process that reused the pid"
    if lease_age is not None and lease_age > record.lease:
        return (f"its lease was last renewed {int(lease_age)} s ago, over its {record.lease} s: the run on "
                f"{record.controller_host} ended without releasing it (killed, or cut off)")
    return None


def holder_text(lock: LockRecord, lease_age: float | None = None) -> str:
    """``controller <c> (run lock held by pid ..., run id ...)``: who holds the lock, for a message."""
    extra = f", started from {lock.origin}" if lock.origin and lock.origin != lock.controller_host else ""
    if lease_age is not None:
        extra += f", lease renewed {max(0, int(lease_age))} s ago, over once {lock.lease} s pass without renewal"
    held = f"run lock held by pid {lock.pid} of {lock.user}, run id {lock.run_id}{extra}"
    return f"controller {lock.controller_host} ({held})"


def refusal_message(
    project: str,
    running: Mapping[str, int],
    lock: LockRecord | None = None,
    *,
    inventory_hint: str = "<inventory>",
    this_run: str | None = None,
    lease_age: float | None = None,
) -> str:
    """The refusal when another run is live: where, which run was refused (``this_run``), why, how to stop it."""
    places: list[str] = []
    for host in sorted(running):
        count = running[host]
        if count:
            places.append(f"{host} ({count} process{'es' if count != 1 else ''} of the rank binary)")
    if lock is not None:
        places.append(holder_text(lock, lease_age))
    where = "; ".join(places) if places else "an unknown host"
    refused = f"; {this_run} was not started" if this_run else ""
    return (
        f"flodl run lock: another run of project {project} is live on {where}{refused}. Starting now would kill it: "
        "the launcher's pre-spawn cleanup stops every process of the same binary. Stop the other run with "
        f"`ansible-playbook flodl.cluster.teardown -i {inventory_hint}` (or wait for it to end: a run that ends "
        "releases its lock, a killed one's lease lapses), or, to replace "
        f"it on purpose, run again with `-e {OVERRIDE_VARIABLE}=false`."
    )


def this_run_text(controller: str, run_id: str, origin: str | None = None) -> str:
    """The refused run, for :func:`refusal_message`: its controller (and origin) and run id."""
    start = f", started from {origin}" if origin and origin != controller else ""
    return f"this run (controller {controller}, run id {run_id}{start})"


def live_hosts(running: Mapping[str, int | None]) -> Sequence[str]:
    """Hosts whose probe saw the binary running, sorted."""
    return sorted(h for h, n in running.items() if n)


def live_binaries(remotes: Iterable[Worker], cmd: str | None) -> dict[str, str]:
    """Where a live run of this project would show: each remote worker's prebuilt rank binary (host -> path)."""
    if not cmd:
        return {}
    return {w.host: f"{w.path.rstrip('/')}/{binary_subpath(w.host, w.arch, cmd)}" for w in remotes if w.arch}
