# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the launch command on the controller, streaming its output live."""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()

TAIL_LINES = 30


class _Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _signal_name(signum: int) -> str:
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
        if proc.poll() is not None and not _group_alive(proc.pid):
            return "stopped by SIGTERM"
        time.sleep(0.1)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    return f"SIGKILL after {grace:g}s"


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _watch_parent(parent: int, done: threading.Event) -> None:
    """SIGTERM ourselves when ansible-playbook dies without telling us (e.g. SIGKILL)."""
    while not done.wait(1.0):
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)
            return


class ActionModule(ActionBase):
    """The command runs in its own session, so a stop reaches every process it started."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _spec, args = self.validate_argument_spec(
            argument_spec={
                "command": {"type": "str", "required": True},
                "chdir": {"type": "path", "required": True},
                "env": {"type": "dict", "default": {}},
                "log_dir": {"type": "path"},
                "grace_seconds": {"type": "float", "default": 10.0},
                "shell": {"type": "str", "default": "/bin/sh"},
            }
        )
        command: str = args["command"]
        chdir: str = args["chdir"]
        added: Mapping[str, Any] = args["env"] or {}
        log_dir = args["log_dir"] or os.path.join(chdir, "target", "cluster", "logs")
        result["command"] = command
        result["cwd"] = chdir
        if self._task.check_mode:
            msg = f"check mode: would run `{command}` in {chdir} with {len(added)} added variable(s)"
            display.display(f"flodl launch: {msg}")
            result.update(changed=False, msg=msg)
            return result
        if not os.path.isdir(chdir):
            result.update(failed=True, msg=f"the launch directory {chdir} does not exist on the controller")
            return result

        env = dict(os.environ)
        env.update({str(k): str(v) for k, v in added.items()})
        stamp = time.strftime("%Y%m%d-%H%M%S")
        try:
            os.makedirs(log_dir, exist_ok=True)
            log_path = os.path.join(log_dir, f"launch-{stamp}-{os.getpid()}.log")
            log = open(log_path, "ab", buffering=0)  # noqa: SIM115  (closed in finally)
        except OSError as exc:
            result.update(failed=True, msg=f"cannot create the launch log under {log_dir}: {exc}")
            return result

        tail: deque[str] = deque(maxlen=TAIL_LINES)
        interrupted: int | None = None
        stop_note = ""
        start = time.monotonic()
        previous: dict[int, Any] = {}

        def on_signal(signum, _frame):
            raise _Interrupted(signum)

        proc: subprocess.Popen | None = None
        done = threading.Event()
        threading.Thread(target=_watch_parent, args=(os.getppid(), done), daemon=True).start()
        try:
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                previous[signum] = signal.signal(signum, on_signal)
            log.write(f"# flodl launch {stamp}: {command}\n# cwd {chdir}\n".encode())
            display.display(f"flodl launch: running `{command}` in {chdir} (log: {log_path})")
            proc = subprocess.Popen(
                [args["shell"], "-c", command],
                cwd=chdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            if proc.stdout is None:
                raise RuntimeError("no stdout pipe")
            for raw in iter(proc.stdout.readline, b""):
                log.write(raw)
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                tail.append(line)
                display.display(line)
            rc = proc.wait()
        except _Interrupted as exc:
            interrupted = exc.signum
            # Ignore repeats while stopping; the command gets its grace period.
            for signum in previous:
                signal.signal(signum, signal.SIG_IGN)
            if proc is not None:
                stop_note = stop_group(proc, float(args["grace_seconds"]))
                rest = proc.stdout.read() if proc.stdout else b""
                if rest:
                    log.write(rest)
                    tail.extend(rest.decode("utf-8", "replace").splitlines())
            rc = proc.returncode if proc is not None and proc.returncode is not None else -interrupted
        finally:
            done.set()
            if proc is not None and proc.poll() is None:
                stop_group(proc, float(args["grace_seconds"]))
            try:
                log.write(f"# exit {proc.returncode if proc else 'not started'}\n".encode())
            finally:
                log.close()
            if interrupted is None:
                for signum, handler in previous.items():
                    signal.signal(signum, handler)

        seconds = round(time.monotonic() - start, 3)
        result.update(
            changed=True,
            rc=rc,
            log_file=log_path,
            seconds=seconds,
            stdout_tail=list(tail),
        )
        if interrupted is not None:
            result.update(
                failed=True,
                interrupted=_signal_name(interrupted),
                msg=(
                    f"the launch command was interrupted by {_signal_name(interrupted)}: its process group "
                    f"was stopped ({stop_note}); log: {log_path}"
                ),
            )
            # Hand the signal back to Ansible's own handling now the command is gone.
            handler = previous.get(interrupted)
            signal.signal(interrupted, handler if handler is not None else signal.SIG_DFL)
            if callable(handler):
                handler(interrupted, None)
            return result
        if rc != 0:
            how = f"signal {-rc}" if rc < 0 else f"code {rc}"
            last = "\n".join(f"  {line}" for line in list(tail)[-12:])
            result.update(
                failed=True,
                msg=f"the launch command exited with {how} (rc={rc}) after {seconds:.1f}s; "
                f"log: {log_path}\nlast lines:\n{last}",
            )
            if rc < 0:
                result["rc"] = 128 - rc
                result["signal"] = -rc
            result.pop("stdout_tail", None)  # already in msg; keeps the failure readable
            return result
        result["msg"] = f"the launch command exited with code 0 after {seconds:.1f}s; log: {log_path}"
        return result
