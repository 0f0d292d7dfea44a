# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side process execution: local one-shot commands and parallel ssh sweeps.

Lives in plugin_utils because it only ever runs on the controller (inside
action plugins); modules use AnsibleModule.run_command instead.
"""
from __future__ import annotations

import math
import os
import pwd
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass


def effective_user(_argv: list[str]) -> str | None:
    """What ``whoami`` prints, without a process (a ``module_utils._run.identity`` runner for ``controller_user``)."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return None


def run_for_output(argv: list[str]) -> str | None:
    """stdout of a short local command, or ``None`` when it cannot run or fails."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout


@dataclass(frozen=True)
class LocalRun:
    """What a script run here said: its exit code and stdout, or why it could not run (``error``)."""

    returncode: int | None
    stdout: str
    error: str | None = None


def run_sh(script: str, timeout: float = 30.0) -> LocalRun:
    """A probe's script run on this machine with the workers' own ``sh`` (the first on PATH): the one local runner."""
    try:
        proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return LocalRun(None, "", str(exc))
    return LocalRun(proc.returncode, proc.stdout)


@dataclass
class SshResult:
    """Outcome of one remote command; ``error`` is set when ssh could not run at all."""

    host: str
    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.returncode == 0


# Processes being started right now, and whether starting more is over (plugin_utils._proc.parent_watch):
# a stop waits for the starts in flight, so no ssh is forked after the stop signalled its group.
_SPAWN = threading.Condition()
_SPAWNING = [0]
_STOPPING = threading.Event()


@contextmanager
def _spawn_slot() -> Iterator[None]:
    with _SPAWN:
        if _STOPPING.is_set():
            raise OSError("the run is stopping (ansible-playbook is gone)")
        _SPAWNING[0] += 1
    try:
        yield
    finally:
        with _SPAWN:
            _SPAWNING[0] -= 1
            _SPAWN.notify_all()


def stop_spawning(wait: float = 2.0) -> bool:
    """No new process from here on; waits (up to ``wait`` s) for the starts in flight. Whether none is left."""
    with _SPAWN:
        _STOPPING.set()
        return _SPAWN.wait_for(lambda: _SPAWNING[0] == 0, wait)


def run_one(host: str, argv: list[str], timeout: float, bound: float | None = None) -> SshResult:
    """``argv`` under ``timeout``; ``bound``: the wait to name in the error (a sweep's whole deadline)."""
    start = time.monotonic()
    try:
        with _spawn_slot():
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, errors="replace")
    except OSError as exc:
        return SshResult(host, argv, None, "", "", time.monotonic() - start, error=f"could not start ssh: {exc}")
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()  # what it printed before it was stopped
        return SshResult(host, argv, None, _text(stdout), _text(stderr), time.monotonic() - start,
                         error=f"no answer within {bound or timeout:g}s")
    return SshResult(host, argv, proc.returncode, stdout, stderr, time.monotonic() - start)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


# Each running job holds about 3 descriptors here (its pipes); the rest of the process needs some too.
FDS_PER_JOB = 3
FDS_SPARE = 128


def parallel_cap(jobs: int, limit: int) -> int:
    """How many jobs run at once under an open-files ``limit``: all of them when it allows, never under 16."""
    return max(1, min(jobs, max(16, (limit - FDS_SPARE) // FDS_PER_JOB)))


def _open_files_limit(wanted: int) -> int:
    """The soft open-files limit, raised towards ``wanted`` (up to the hard limit) when it is lower."""
    try:
        import resource  # noqa: PLC0415  (POSIX only; the controller is POSIX)

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and soft < wanted:
            target = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        return soft if soft != resource.RLIM_INFINITY else wanted
    except (ImportError, ValueError, OSError):
        return 1024


def _late(host: str, argv: list[str], timeout: float, count: int, cap: int) -> SshResult:
    return SshResult(host, argv, None, "", "", 0.0,
                     error=f"not reached: the sweep of {count} hosts ({cap} at once) used its whole {timeout:g}s")


def run_parallel(jobs: Mapping[str, list[str]], timeout: float = 30.0,
                 max_parallel: int | None = None) -> dict[str, SshResult]:
    """Run every host's argv and return results keyed by host, all within ``timeout`` seconds.

    One deadline for the whole sweep, however many hosts: every job runs at once (the open-files
    limit is raised for that when it can be) unless ``max_parallel`` (an operator's cap) or that
    limit says fewer; then a job that starts late gets what is left of the deadline, and one that
    cannot start before it is reported as not reached.
    """
    if not jobs:
        return {}
    count = len(jobs)
    cap = parallel_cap(count, _open_files_limit(count * FDS_PER_JOB + FDS_SPARE))
    cap = min(cap, max_parallel) if max_parallel else cap
    deadline = time.monotonic() + timeout

    def one(host: str, argv: list[str]) -> SshResult:
        left = deadline - time.monotonic()
        if left <= 0:
            return _late(host, argv, timeout, count, cap)
        return run_one(host, argv, left, timeout)

    with ThreadPoolExecutor(max_workers=cap) as pool:
        futures = {host: pool.submit(one, host, argv) for host, argv in jobs.items()}
        return {host: fut.result() for host, fut in futures.items()}


# Probes in flight per controller CPU. Each probe is an ssh handshake (a post-quantum key exchange) and a
# shell on the far side; all of a large sweep at once on a small, loaded controller made every one of them
# slow, and most ran out of their time (94 of 128 at 30 s on 2 CPUs, bench/README.md).
PROBES_PER_CPU = 16


def controller_cpus() -> int:
    """The CPUs this process may run on (its affinity, as a container's limit shows), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def probe_bounds(count: int, timeout: float, cpus: int, limit: int, max_parallel: int | None) -> tuple[int, float]:
    """(how many probes run at once, the whole sweep's deadline in seconds) for ``count`` probes.

    At most ``PROBES_PER_CPU`` per CPU (and under the open-files ``limit`` and the operator's ``max_parallel``),
    so that a probe's time measures its host rather than the controller's queue; each probe gets its whole
    ``timeout`` from its own start, and the sweep one ``timeout`` per round of that many probes to start them
    all (a probe started by then still gets its whole timeout: the sweep ends within one round more).
    """
    cap = min(parallel_cap(count, limit), max(1, cpus) * PROBES_PER_CPU)
    if max_parallel:
        cap = min(cap, max_parallel)
    return cap, timeout * math.ceil(count / cap)


def run_probes(jobs: Mapping[str, list[str]], timeout: float = 30.0, max_parallel: int | None = None,
               cpus: int | None = None) -> dict[str, SshResult]:
    """Run every host's probe, a bounded number at once (:func:`probe_bounds`), results keyed by host.

    A host that does not answer ends at ``timeout`` after its probe started; a probe that could not start
    before the sweep's deadline is reported as not reached.
    """
    if not jobs:
        return {}
    count = len(jobs)
    limit = _open_files_limit(count * FDS_PER_JOB + FDS_SPARE)
    cap, bound = probe_bounds(count, timeout, cpus or controller_cpus(), limit, max_parallel)
    deadline = time.monotonic() + bound

    def one(host: str, argv: list[str]) -> SshResult:
        if time.monotonic() >= deadline:
            return _late(host, argv, bound, count, cap)
        return run_one(host, argv, timeout)

    with ThreadPoolExecutor(max_workers=cap) as pool:
        futures = {host: pool.submit(one, host, argv) for host, argv in jobs.items()}
        return {host: fut.result() for host, fut in futures.items()}
