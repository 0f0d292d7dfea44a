"""What an operator reads in ``ansible-playbook`` output (default callback): per-host results, PLAY RECAP."""
from __future__ import annotations

import base64
import json
import re
from typing import Any

_RESULT_RE = re.compile(r"^fatal: \[([^\]]+)\]: (FAILED|UNREACHABLE)! => (\{.*\})\s*$")
_RECAP_RE = re.compile(r"^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$")


def results(stdout: str, kind: str = "FAILED") -> dict[str, dict[str, Any]]:
    """Every ``fatal: [host]: FAILED! => {...}`` (or ``UNREACHABLE!``) result, parsed, keyed by host.

    A delegated result (``[h1 -> localhost]``) is keyed by the worker (``h1``).
    """
    out: dict[str, dict[str, Any]] = {}
    for line in stdout.splitlines():
        m = _RESULT_RE.match(line)
        if m and m.group(2) == kind:
            host = m.group(1).split(" -> ")[0]
            assert host not in out, f"two {kind} results for {host}"
            out[host] = json.loads(m.group(3))
    return out


def skipped_with_reason(stdout: str) -> dict[str, dict[str, Any]]:
    """Every ``skipping: [host] => {...}`` result that carries its reason (an unreachable probe), by host."""
    out: dict[str, dict[str, Any]] = {}
    decoder = json.JSONDecoder()
    # The default callback prints such a result as indented JSON over several lines.
    for m in re.finditer(r"^skipping: \[([^\]]+)\] => ", stdout, re.M):
        value, _end = decoder.raw_decode(stdout, m.end())
        out[m.group(1).split(" -> ")[0]] = value
    return out


RECORD_MARK = "FLODL-TEST-RECORD"


def recorded(stdout: str) -> Any:
    """The value a test play printed with ``debug: msg="FLODL-TEST-RECORD {{ value | to_json | b64encode }}"``
    (None when it printed none): a play's own record without a module run on localhost (a ``copy`` costs a
    ``stat`` and a ``copy`` module, about 0.75 CPU-s a run)."""
    found = re.findall(rf'"msg": "{RECORD_MARK} ([A-Za-z0-9+/=]*)"', stdout)
    assert len(found) <= 1, f"{len(found)} records in one play's output"
    return json.loads(base64.b64decode(found[0])) if found else None


def recap(stdout: str) -> dict[str, dict[str, int]]:
    """PLAY RECAP counts per host (the last recap in the output)."""
    text = stdout.rsplit("PLAY RECAP", 1)[1] if "PLAY RECAP" in stdout else ""
    out: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        m = _RECAP_RE.match(line.strip())
        if m:
            out[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
    return out


def failed_in_recap(stdout: str) -> list[str]:
    """Hosts the PLAY RECAP counts as failed (there must be a recap)."""
    counts = recap(stdout)
    assert counts, "no PLAY RECAP in the output"
    return sorted(h for h, c in counts.items() if c["failed"])


def task_results(stdout: str, task: str) -> dict[str, str]:
    """``{host: ok|changed|skipping|fatal|...}`` for the first task whose name contains ``task``."""
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("TASK [") and task in line:
            out: dict[str, str] = {}
            for follow in lines[i + 1:]:
                if follow.startswith(("TASK [", "PLAY [", "PLAY RECAP", "RUNNING HANDLER")):
                    break
                m = re.match(r"^(ok|changed|skipping|fatal|failed): \[([^\]]+)\]", follow)
                if m:
                    out.setdefault(m.group(2).split(" -> ")[0], m.group(1))
            return out
    raise AssertionError(f"no task {task!r} in the output")


def runner_hosts(runner: Any, event: str, task: str) -> set[str]:
    """The hosts of ansible-runner's ``event`` (``runner_on_ok``, ``runner_on_failed``...) for the task named
    ``task``: what AWX turns into each host's job events."""
    return {e["event_data"]["host"] for e in runner.events
            if e.get("event") == event and e["event_data"].get("task") == task}
