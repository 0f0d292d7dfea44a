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

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

REPO = Path(__file__).resolve().parent.parent

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

    def v2_runner_on_ok(self, result):
        # The collection's tasks that run a command report its own wall time ("seconds"): the work inside the task.
        seconds = result._result.get("seconds")
        if isinstance(seconds, (int, float)):
            self._events.append(["work", result._task.get_name(), float(seconds)])

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


# Ansible's floor on the benches' hosts: the cheapest run-once task and the cheapest per-host task, i.e. what a
# phase's step and its per-host report cannot go under, whatever the collection does.
FLOOR_PLAY = """\
- name: Ansible's floor
  hosts: flodl_workers
  gather_facts: false
  tasks:
    - name: floor run-once task
      ansible.builtin.debug: {msg: x}
      run_once: true
      delegate_to: localhost
    - name: floor per-host task
      ansible.builtin.debug: {msg: x}
    - name: floor end
      ansible.builtin.meta: noop
      run_once: true
"""

# The same, plus a role of one run-once `debug`, imported as the collection's playbooks import their roles: at a
# role's end Ansible runs an implicit `role_complete` meta task for every host (the variables of each host are
# computed for it), which no `debug` pays. "floor role task" minus "floor run-once task" is that role end.
FLOOR_ROLE_PLAY = FLOOR_PLAY.replace("""    - name: floor end
""", """    - name: floor role
      ansible.builtin.import_role:
        name: flodl_bench_floor
    - name: floor end
""")
FLOOR_ROLE_TASKS = """\
- name: floor role task
  ansible.builtin.debug: {msg: x}
  run_once: true
  delegate_to: localhost
"""


def write_floor_play(work: Path, with_role: bool = False) -> Path:
    """The floor play under ``work`` (with its one-task role next to it when ``with_role``); its path."""
    play = work / ("floor-role.yml" if with_role else "floor.yml")
    play.write_text(FLOOR_ROLE_PLAY if with_role else FLOOR_PLAY)
    if with_role:
        tasks = work / "roles" / "flodl_bench_floor" / "tasks"
        tasks.mkdir(parents=True, exist_ok=True)
        (tasks / "main.yml").write_text(FLOOR_ROLE_TASKS)
    return play


def bench_args(doc: str, default_sizes: str) -> argparse.Namespace:
    """The options every bench takes (its first docstring paragraph is the description)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--sizes", default=default_sizes)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--ansible-playbook", default=str(Path(sys.executable).parent / "ansible-playbook"))
    ap.add_argument("--json", type=Path, default=None)
    return ap.parse_args()


def ansible_env(work: Path, collections_path: Path, **extra: str) -> dict[str, str]:
    """This process's environment plus the timing callback and the collection under ``collections_path``."""
    env = dict(os.environ)
    env.update(install_callback(work / "callbacks"))
    env.update(
        ANSIBLE_COLLECTIONS_PATH=str(collections_path), ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
        ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="false", ANSIBLE_LOCAL_TEMP=str(work / "ansible-local"),
        **extra,
    )
    return env


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


def is_per_host(task_name: str) -> bool:
    """A task every worker runs (the rest of the collection's tasks run once)."""
    return WORKER_RESULT in task_name or any(a in task_name for a in ARGSPEC)


def work_seconds(events: list[list]) -> dict[str, float]:
    """Task name -> the wall time of the command it ran, as its result reported it."""
    return {name: sec for kind, name, sec in events if kind == "work"}


def per_host_seconds(costs: list[tuple[str, float, float]]) -> dict[str, float]:
    """What the per-host tasks cost: the roles' argument-spec validation and the worker_result reports."""
    return {
        "argspec": sum(s for n, _start, s in costs if any(a in n for a in ARGSPEC)),
        "worker_result": sum(s for n, _start, s in costs if WORKER_RESULT in n),
    }


def read_events(path: Path) -> list[list]:
    return json.loads(path.read_text())


def enter_bench(playbook: Path, root_problem: str | None) -> int | None:
    """What every bench's main needs first: root, a private mount namespace (for /etc/hosts), the tools.

    None to go on; else the exit code to return (2 for a missing need, or the re-executed bench's own).
    """
    if root_problem:
        print(root_problem, file=sys.stderr)
        return 2
    if os.environ.get("FLODL_BENCH_MOUNT_NS") != "1":
        env = dict(os.environ, FLODL_BENCH_MOUNT_NS="1")
        return subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, *sys.argv],
                              env=env, check=False).returncode
    if not playbook.exists() or shutil.which("cargo") is None:
        print(f"needs ansible-playbook ({playbook}) and cargo", file=sys.stderr)
        return 2
    return None


def install_collection(work: Path, galaxy: str) -> Path:
    """Build the tarball from this checkout and install it, as an operator would."""
    out = work / "dist"
    subprocess.run([galaxy, "collection", "build", str(REPO), "--output-path", str(out), "--force"],
                   check=True, capture_output=True)
    tarball = next(out.glob("flodl-cluster-*.tar.gz"))
    dest = work / "collections"
    subprocess.run([galaxy, "collection", "install", str(tarball), "-p", str(dest), "--force", "--offline"],
                   check=True, capture_output=True)
    sys.path.insert(0, str(dest))
    return dest


@dataclass
class Workspace:
    """What a bench's runs share: the Ansible binaries, its temp dir, their environment, the version line."""
    bins: dict[str, str]
    work: Path
    env: dict[str, str]
    version: str


@contextlib.contextmanager
def installed_workspace(playbook: Path, prefix: str) -> Iterator[Workspace]:
    """A temp dir (removed after) with the collection installed from its tarball, and Ansible's environment for it."""
    bins = {"ansible-playbook": str(playbook), "ansible-galaxy": str(playbook.parent / "ansible-galaxy")}
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        dest = install_collection(work, bins["ansible-galaxy"])
        env = ansible_env(work, dest, ANSIBLE_HOST_KEY_CHECKING="false")
        version = subprocess.run([str(playbook), "--version"], capture_output=True, text=True,
                                 check=False).stdout.splitlines()[0]
        yield Workspace(bins, work, env, version)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def host_counts(spec: str) -> list[int]:
    """The ``--sizes`` option (``8,32``) as host counts."""
    return [int(x) for x in spec.split(",") if x.strip()]


def run_sizes(args: argparse.Namespace, prefix: str, root_problem: str | None,
              one_size: Callable[[Workspace, int, list[dict]], None], report: Callable[[Workspace, list[dict]], None]) -> int:
    """A bench's main after its options: the entry checks, then in one workspace each ``--sizes`` count measured
    (``one_size`` appends its row), then ``report``; the exit code."""
    playbook = Path(args.ansible_playbook)
    entered = enter_bench(playbook, root_problem)
    if entered is not None:
        return entered
    with installed_workspace(playbook, prefix) as ws:
        rows: list[dict] = []
        for n in host_counts(args.sizes):
            one_size(ws, n, rows)
        report(ws, rows)
    return 0


# --------------------------------------------------------------------------- reading a play's output and samples

_RESULT_LINE = re.compile(r"^(ok|changed|fatal|failed|skipping): \[")
_AGENT_TAIL = re.compile(r"^\[[^\]\s]+\] ")  # a walk-in agent's last lines, shown by its collect: "[h1] agent: ..."


def own_lines(text: str) -> tuple[int, int]:
    """(all lines, the collection's own): the training's output is not the collection's, i.e. the lines the launch
    command streams (after ``flodl launch: running``, until the next task or result) and, in walk_in, the agents'
    last lines each collect shows (``[host] ...``)."""
    lines = text.splitlines()
    streamed, inside = 0, False
    for line in lines:
        if line.startswith("flodl launch: running "):
            inside = True
            continue
        if inside and (_RESULT_LINE.match(line) or line.startswith(("TASK [", "PLAY RECAP"))):
            inside = False
        elif inside or _AGENT_TAIL.match(line):
            streamed += 1
    return len(lines), len(lines) - streamed


def med(row: dict, kind: str, key: str = "total") -> float:
    return statistics.median(s[key] for s in row["samples"][kind])


def spread(row: dict, kind: str, key: str = "total") -> str:
    """``median (min-max)`` of a kind's samples in a bench row; ``-`` when the kind did not run there."""
    if not row["samples"].get(kind):
        return "-"
    vals = [s[key] for s in row["samples"][kind]]
    return f"{statistics.median(vals):.2f} ({min(vals):.2f}-{max(vals):.2f})"


def ratio(row: dict, kind: str, base: str) -> str:
    have = row["samples"].get(kind) and row["samples"].get(base)
    return f"{med(row, kind) / med(row, base):.2f}x" if have else "-"


def failure_text(out: str, err: str = "", limit: int = 6000) -> str:
    """What a failed play says: its failed and unreachable results, errors and the lines before PLAY RECAP (a
    recap of hundreds of workers would fill the output's tail)."""
    lines = out.splitlines()
    recap = next((i for i, ln in enumerate(lines) if ln.startswith("PLAY RECAP")), len(lines))
    bad = [ln for ln in lines[:recap] if ln.startswith(("fatal: ", "failed: ", "ERROR", "[ERROR]"))
           or "UNREACHABLE!" in ln or "NO MORE HOSTS LEFT" in ln]
    failed = [ln for ln in lines[recap:] if re.search(r"\b(failed|unreachable)=[1-9]", ln)]
    text = "\n".join([*bad[:40], "...", *lines[max(0, recap - 40):recap], *failed[:20], err[-1500:]])
    return text[-limit:]
