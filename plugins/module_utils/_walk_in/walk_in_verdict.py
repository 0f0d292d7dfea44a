# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A walk-in run's verdicts: what the launcher says of each host, and each worker's own result.

Upstream's agent reports a failed rank to the launcher, says ``finished DEGRADED`` and exits 0: the run's
verdict is the launcher's (docs/launcher-contract.md, E13). So a worker's result comes from what the
launcher printed about its host (joined, a rank's exit code) together with what its agent printed and
how it ended, never from the agent's exit code alone. Pure parts only.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._core.phase_result import entry

_JOINED = re.compile(r'host "(?P<host>[^"]+)" joined with ranks \[(?P<ranks>[0-9, ]*)\]')
_REPORTS = re.compile(r'host "(?P<host>[^"]+)" reports rank (?P<rank>\d+) exited with code (?P<code>-?\d+)')
_QUORUM = re.compile(r"quorum not met")
TAIL_LINES = 20


@dataclass
class LauncherView:
    """What the launcher's output says about each host."""

    joined: dict[str, list[int]] = field(default_factory=dict)
    failed_ranks: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    quorum_failed: bool = False

    def to_data(self) -> dict[str, Any]:
        return {"joined": self.joined, "failed_ranks": {h: [list(p) for p in v] for h, v in self.failed_ranks.items()},
                "quorum_failed": self.quorum_failed}


def read_launcher(lines: Iterable[str]) -> LauncherView:
    """The launcher's lines, read for what they say of each host (its wording, as upstream prints it)."""
    view = LauncherView()
    for line in lines:
        joined = _JOINED.search(line)
        if joined:
            ranks = [int(r) for r in joined.group("ranks").replace(" ", "").split(",") if r]
            view.joined[joined.group("host")] = ranks
            continue
        reported = _REPORTS.search(line)
        if reported:
            view.failed_ranks.setdefault(reported.group("host"), []).append(
                (int(reported.group("rank")), int(reported.group("code"))))
            continue
        if _QUORUM.search(line):
            view.quorum_failed = True
    return view


def view_of(data: Any) -> LauncherView:
    """A :class:`LauncherView` back from its registered form (``to_data``); empty when there is none."""
    if not isinstance(data, Mapping):
        return LauncherView()
    joined = {str(h): [int(r) for r in v] for h, v in (data.get("joined") or {}).items()}
    failed = {str(h): [(int(p[0]), int(p[1])) for p in v] for h, v in (data.get("failed_ranks") or {}).items()}
    return LauncherView(joined, failed, bool(data.get("quorum_failed")))


def view_for(host: str, joined: Any, failed_ranks: Any, quorum_failed: Any) -> LauncherView:
    """The launcher's view of one host only, from its registered entries (each worker reads just its own)."""
    mine: dict[str, Any] = {"quorum_failed": quorum_failed}
    if isinstance(joined, list):
        mine["joined"] = {host: joined}
    if isinstance(failed_ranks, list):
        mine["failed_ranks"] = {host: failed_ranks}
    return view_of(mine)


def window_problem(opened: Any) -> str | None:
    """Why the registered open step (run_launcher, walk_in_stage=open) left no join window; None when it did."""
    if not isinstance(opened, Mapping):
        return "nothing is registered for it: the step did not run"
    if opened.get("skipped"):
        return "the step was skipped"
    if opened.get("failed"):
        return f"the step failed: {str(opened.get('msg') or 'no message')[:300]}"
    launcher = opened.get("launcher")
    if not isinstance(launcher, Mapping) or not isinstance(launcher.get("pid"), int):
        return "the step registered no launcher"
    return None


def no_window_entry_msg(host: str, launch_host: str, why: str, window_var: str) -> str:
    """A worker's start refused for want of a window: where, why it matters, and where to look."""
    return (f"{host}: its walk-in agent was not started: the launcher's join window on {launch_host} did not open "
            f"({why}). An agent with no window to dial would run as a plain process, outside the run. See the "
            f"output of the launch step that opens the window (registered as {window_var}), fix what it reports, "
            "and run the play again.")


def worker_entry(host: str, view: LauncherView, agent_code: int | None, agent_tail: Sequence[str],
                 launcher_rc: int | None, join_timeout: float, started: bool, start_problem: str = "") -> dict[str, Any]:
    """One worker's phase entry (module_utils._core.phase_result) from the launcher's view and its agent's end.

    ``host`` is the worker's flodl host name (what the launcher prints); ``started`` whether Ansible started its
    agent; ``agent_code`` the agent's exit code (None: it recorded none, so it was stopped or killed).
    """
    tail = [str(line) for line in agent_tail][-TAIL_LINES:]
    last = "\n".join(f"  | {line}" for line in tail)
    data = {"agent_rc": agent_code, "ranks": view.joined.get(host, []), "agent_tail": tail}
    if not started:
        return entry("failed", f"{host}: its agent was not started ({start_problem or 'no answer'})", **data)
    if host not in view.joined:
        why = "the window's quorum was not met" if view.quorum_failed else "the launcher never admitted it"
        return entry("failed", f"{host}: did not join within {join_timeout:g} s ({why}); its agent "
                     f"{_ended(agent_code)} and printed:\n{last or '  | (nothing)'}", **data)
    if view.quorum_failed:
        # Joined, then sent home when the window closed short: the workers that did not join are charged.
        return entry("ok", f"{host}: joined with ranks {view.joined[host]}, but the run never started (the window's "
                     f"quorum was not met: a worker that did not join fails with why); its agent {_ended(agent_code)}",
                     **data)
    failed = view.failed_ranks.get(host)
    if failed:
        ranks = ", ".join(f"rank {r} exited with code {c}" for r, c in failed)
        return entry("failed", f"{host}: {ranks} (the launcher's report); its agent's last lines:\n{last}",
                     rc=failed[0][1], **data)
    if agent_code not in (0, None) or (agent_code is None and launcher_rc not in (0, None)):
        return entry("failed", f"{host}: its agent {_ended(agent_code)} (launcher exit code {launcher_rc}); last "
                     f"lines:\n{last}", **data)
    if launcher_rc is None:
        return entry("failed", f"{host}: joined with ranks {view.joined[host]}, but the launcher's end is unknown",
                     **data)
    return entry("changed", f"{host}: ranks {view.joined[host]} ran; agent exit code {agent_code}", **data)


def _ended(code: int | None) -> str:
    return "was stopped (it recorded no exit code)" if code is None else f"exited with code {code}"


def unattributed(view: LauncherView, launcher_rc: int | None, hosts: Iterable[str]) -> bool:
    """True when the launcher failed and no worker's result says why: the launch host's own step then fails."""
    if launcher_rc == 0:
        return False
    named = set(view.failed_ranks) | ({h for h in hosts if h not in view.joined} if view.quorum_failed else set())
    return not named
