# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the launch command in its own session, stream its output, stop it cleanly.

The command gets a process group of its own, so a stop (Ctrl-C, an AWX
cancel's SIGTERM, ansible-playbook dying) reaches every process it started:
SIGTERM to the group, then SIGKILL after the grace period.
"""
from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._files.file_modes import current_umask, tightened_umask
from ansible_collections.flodl.cluster.plugins.module_utils._core.group_watch import GroupWatch, group_alive
from ansible_collections.flodl.cluster.plugins.module_utils._core.output_batch import DEFAULT_INTERVAL, OutputBatcher

TAIL_LINES = 30
# After the command exits: how long its last output may still arrive, and how often exit is checked.
DRAIN_SECONDS = 2.0
EXIT_POLL_SECONDS = 0.5


class _Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def stop_group(proc: subprocess.Popen, grace: float) -> str:
    """TERM the command's whole process group, then KILL what is left after ``grace`` seconds."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return "already gone"
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if proc.poll() is not None and not group_alive(proc.pid):
            return "stopped by SIGTERM"
        time.sleep(0.1)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    return f"SIGKILL after {grace:g}s"


def _watch_parent(parent: int, done: threading.Event) -> None:
    """SIGTERM ourselves when ansible-playbook dies without telling us (e.g. SIGKILL)."""
    while not done.wait(1.0):
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)
            return


def _close_quietly(stream: Any) -> None:
    try:
        stream.close()
    except OSError:
        pass  # the far side is already gone


def _pump(stream: Any, log: Any, tail: deque, show: Callable[[str], None], batcher: OutputBatcher,
          exited: Callable[[], bool] | None = None, drain: float = DRAIN_SECONDS,
          on_line: Callable[[str], None] | None = None) -> None:
    """Every output line to the log (and the tail, and ``on_line``) as it comes; to ``show`` in batches, until EOF.

    With ``exited``: once the command has exited, at most ``drain`` more seconds of reading. Something the
    command left behind may still hold the pipe (an ssh ControlPersist master keeps its stderr): the launch
    must end with the command, not with that.
    """
    fd = stream.fileno()
    selector = selectors.DefaultSelector()
    selector.register(fd, selectors.EVENT_READ)
    pending = b""

    def one(raw: bytes) -> None:
        log.write(raw)
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        tail.append(line)
        if on_line is not None:
            on_line(line)
        batch = batcher.add(line, time.monotonic())
        if batch is not None:
            show(batch)

    deadline: float | None = None
    try:
        while True:
            now = time.monotonic()
            wait = batcher.wait(now)
            if exited is not None:
                if deadline is None and exited():
                    deadline = now + drain
                poll = EXIT_POLL_SECONDS if deadline is None else max(0.0, deadline - now)
                wait = poll if wait is None else min(wait, poll)
            if not selector.select(wait):
                now = time.monotonic()
                if batcher.wait(now) == 0.0:
                    batch = batcher.take()  # the oldest buffered line has waited long enough
                    if batch is not None:
                        show(batch)
                if deadline is not None and now >= deadline:
                    break  # the command is gone; what still holds its pipe is not waited for
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            for raw in lines:
                one(raw + b"\n")
        if pending:
            one(pending)
    finally:
        selector.close()
        batch = batcher.take()
        if batch is not None:
            show(batch)


@dataclass
class RunOutcome:
    rc: int
    seconds: float
    tail: list[str] = field(default_factory=list)
    interrupted: int | None = None
    stop_note: str = ""
    previous_handler: Any = None
    timed_out: bool = False


def run_streamed(
    argv: list[str],
    cwd: str,
    env: Mapping[str, str],
    log: Any,
    show: Callable[[str], None],
    grace: float,
    stdin_data: bytes | None = None,
    timeout: float | None = None,
    batch_seconds: float = DEFAULT_INTERVAL,
    watch: GroupWatch | None = None,
    on_line: Callable[[str], None] | None = None,
) -> RunOutcome:
    """Run ``argv``; every output line goes to ``log`` (bytes) as it comes and to ``show`` in batches
    (module_utils._core.output_batch: a line waits at most ``batch_seconds``); stop cleanly on a signal.

    With ``stdin_data`` (a remote launch over ssh) the data is written and stdin kept open: closing it
    is how the remote wrapper learns to stop its session, so a stop closes stdin first and gives the
    far side the grace period (plus the way back) before ssh itself is stopped.

    ``timeout`` (seconds) bounds the whole run: past it the command is stopped the same way and the
    outcome says ``timed_out``.

    ``watch`` (module_utils._core.group_watch, started before this call): told the command's process group as
    soon as it exists, so the group is stopped even when this process is killed outright. Without one,
    a thread here notices ansible-playbook's death and interrupts the run as a SIGTERM would.

    ``on_line`` sees every output line as it is read (the launcher's rank-exit reports, module_utils._launch.launch_outcome).
    """
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    interrupted: int | None = None
    stop_note = ""
    start = time.monotonic()
    previous: dict[int, Any] = {}

    def on_signal(signum, _frame):
        raise _Interrupted(signum)

    proc: subprocess.Popen | None = None
    watchdog: threading.Timer | None = None
    timed_out = threading.Event()
    done = threading.Event()
    if watch is None:
        threading.Thread(target=_watch_parent, args=(os.getppid(), done), daemon=True).start()
    try:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            previous[signum] = signal.signal(signum, on_signal)
        proc = subprocess.Popen(
            argv, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL if stdin_data is None else subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
            # The caller's umask, but never one that lets the launch (cargo run, the launcher) write
            # group- or world-writable files into the project.
            umask=tightened_umask(current_umask()),
        )
        if watch is not None:
            watch.add(proc.pid)
        if proc.stdout is None:
            raise RuntimeError("no stdout pipe")
        if stdin_data is not None and proc.stdin is not None:
            proc.stdin.write(stdin_data)
            proc.stdin.flush()
        if timeout:
            watchdog = threading.Timer(timeout, _stop_on_timeout, args=(proc, grace, timed_out))
            watchdog.daemon = True
            watchdog.start()
        _pump(proc.stdout, log, tail, show, OutputBatcher(batch_seconds), exited=lambda: proc.poll() is not None,
              on_line=on_line)
        rc = proc.wait()
    except _Interrupted as exc:
        interrupted = exc.signum
        # Ignore repeats while stopping; the command gets its grace period.
        for signum in previous:
            signal.signal(signum, signal.SIG_IGN)
        if proc is not None and proc.stdin is not None:
            _close_quietly(proc.stdin)
            try:
                proc.wait(timeout=grace + 5)
                stop_note = "the launch host stopped its session when stdin closed"
            except subprocess.TimeoutExpired:
                stop_note = stop_group(proc, grace)
        elif proc is not None:
            stop_note = stop_group(proc, grace)
            rest = proc.stdout.read() if proc.stdout else b""
            if rest:
                log.write(rest)
                tail.extend(rest.decode("utf-8", "replace").splitlines())
        rc = proc.returncode if proc is not None and proc.returncode is not None else -interrupted
    finally:
        done.set()
        if watchdog is not None:
            watchdog.cancel()
        if proc is not None and proc.stdin is not None:
            _close_quietly(proc.stdin)
        if proc is not None and proc.poll() is None:
            stop_group(proc, grace)
        log.write(f"# exit {proc.returncode if proc else 'not started'}\n".encode())
        if interrupted is None:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
    return RunOutcome(rc=rc, seconds=round(time.monotonic() - start, 3), tail=list(tail), interrupted=interrupted,
                      stop_note=stop_note, previous_handler=previous.get(interrupted) if interrupted else None,
                      timed_out=timed_out.is_set())


def _stop_on_timeout(proc: subprocess.Popen, grace: float, flag: threading.Event) -> None:
    """The launch timeout: stop the command as an interrupt would (the reader then sees EOF)."""
    if proc.poll() is not None:
        return
    flag.set()
    if proc.stdin is not None:
        _close_quietly(proc.stdin)
        try:
            proc.wait(timeout=grace + 5)
            return
        except subprocess.TimeoutExpired:
            pass
    stop_group(proc, grace)


def hand_back_signal(outcome: RunOutcome) -> None:
    """Re-deliver the interrupting signal to Ansible's own handling, now the command is gone."""
    if outcome.interrupted is None:
        return
    handler = outcome.previous_handler
    signal.signal(outcome.interrupted, handler if handler is not None else signal.SIG_DFL)
    if callable(handler):
        handler(outcome.interrupted, None)
