# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side process execution: local one-shot commands and parallel ssh sweeps.

Lives in plugin_utils because it only ever runs on the controller (inside
action plugins); modules use AnsibleModule.run_command instead.
"""
from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass


def run_for_output(argv: list[str]) -> str | None:
    """stdout of a short local command, or ``None`` when it cannot run or fails."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout


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


def run_one(host: str, argv: list[str], timeout: float) -> SshResult:
    start = time.monotonic()
    try:
        proc = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        return SshResult(
            host, argv, None, _text(exc.stdout), _text(exc.stderr), time.monotonic() - start,
            error=f"no answer within {timeout:g}s",
        )
    except OSError as exc:
        return SshResult(host, argv, None, "", "", time.monotonic() - start, error=f"could not start ssh: {exc}")
    return SshResult(host, argv, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


def run_parallel(jobs: Mapping[str, list[str]], timeout: float = 30.0, max_parallel: int = 64) -> dict[str, SshResult]:
    """Run every host's argv at once (bounded) and return results keyed by host."""
    if not jobs:
        return {}
    with ThreadPoolExecutor(max_workers=min(max_parallel, len(jobs))) as pool:
        futures = {host: pool.submit(run_one, host, argv, timeout) for host, argv in jobs.items()}
        return {host: fut.result() for host, fut in futures.items()}
