"""Shared bench helpers: a tiny callback plugin that records when each task starts, and its reading.

The plugin is written into a temp dir and enabled with ``ANSIBLE_CALLBACK_PLUGINS`` +
``ANSIBLE_CALLBACKS_ENABLED``; it appends ``[kind, name, time.monotonic()]`` events and writes them
as JSON to ``$FLODL_BENCH_TIMES`` at the end of the play. ``time.monotonic()`` is the same clock
in every process on Linux, so the bench's own spawn time sits on the same axis.

A task's cost is the time from its start to the next task's start (the linear strategy runs one
task at a time, for every host), so per-host tasks are timed with everything they cost: queueing a
worker per host, the results' callbacks, the argument templating.
"""
from __future__ import annotations

import json
from pathlib import Path

CALLBACK = '''\
from __future__ import annotations
import json, os, time
from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: flodl_bench_timer
type: aggregate
short_description: task start times for flodl.cluster's benches
description: [Writes the start time of every task to $FLODL_BENCH_TIMES.]
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "flodl_bench_timer"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._events = [["loaded", "", time.monotonic()]]

    def v2_playbook_on_play_start(self, play):
        self._events.append(["play", play.get_name(), time.monotonic()])

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._events.append(["task", task.get_name(), time.monotonic()])

    def v2_playbook_on_stats(self, stats):
        self._events.append(["stats", "", time.monotonic()])
        path = os.environ.get("FLODL_BENCH_TIMES")
        if path:
            with open(path, "w") as fh:
                json.dump(self._events, fh)
'''

# A role's automatic task, and cluster_train's one task for the three roles.
ARGSPEC = ("Validating arguments against arg spec", "Validate every worker's variables")
WORKER_RESULT = "Result of this worker"


def install_callback(root: Path) -> dict[str, str]:
    """Write the plugin under ``root``; the environment that enables it."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "flodl_bench_timer.py").write_text(CALLBACK)
    return {"ANSIBLE_CALLBACK_PLUGINS": str(root), "ANSIBLE_CALLBACKS_ENABLED": "flodl_bench_timer"}


def task_costs(events: list[list], ended: float) -> list[tuple[str, float, float]]:
    """(task name, start, seconds) per task: until the next task starts (the last: until stats)."""
    marks = [e for e in events if e[0] in ("task", "stats")]
    out = []
    for i, (kind, name, t) in enumerate(marks):
        if kind != "task":
            continue
        nxt = marks[i + 1][2] if i + 1 < len(marks) else ended
        out.append((name, t, nxt - t))
    return out


def per_host_seconds(costs: list[tuple[str, float, float]]) -> dict[str, float]:
    """What the per-host tasks cost: the roles' argument-spec validation and the worker_result reports."""
    return {
        "argspec": sum(s for n, _start, s in costs if any(a in n for a in ARGSPEC)),
        "worker_result": sum(s for n, _start, s in costs if WORKER_RESULT in n),
    }


def read_events(path: Path) -> list[list]:
    return json.loads(path.read_text())
