# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight step's part in a launch that follows in the same run (``phases`` holds ``launch``).

Before any host is touched: the launch environment's size and the run lock. Then, with the sweep: the
launch host's session, the run-lock check added to each worker's probe, and the ssh masters the probes
leave for the launcher's fan-out. The preflight step imports this module only for such a run, so that a
play without a launch (the preflight playbook) does not compile the launch side of the collection.
"""
from __future__ import annotations

import os

from collections.abc import Mapping
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._probe import check_registry
from ansible_collections.flodl.cluster.plugins.module_utils._probe.preflight_probe import restatus
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import DATA_PATH
from ansible_collections.flodl.cluster.plugins.module_utils._ssh import remote_launch
from ansible_collections.flodl.cluster.plugins.module_utils._run import runlock
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_launch import RemoteLaunchError
from ansible_collections.flodl.cluster.plugins.plugin_utils._host import launch_host as lhio
from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import launch_precheck
from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import sshreuse_io
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import INVALID_CONFIG, RunContext
from ansible_collections.flodl.cluster.plugins.plugin_utils._host.launch_target import launch_host_of
from ansible_collections.flodl.cluster.plugins.plugin_utils._host.runlock_io import lock_for_action

LOCK_NOT_TAKEN = "the run lock was not taken; nothing was started"


class LaunchFollows:
    """What a preflight adds for the launch after it; one per step, used in the order of its methods."""

    def __init__(self, action: Any, task_vars: Mapping[str, Any], ctx: RunContext, phases: list[str]):
        self._action = action
        self._task_vars = task_vars
        self._ctx = ctx
        self._phases = phases
        self._lock_on = ctx.settings.run_lock
        self.remote = launch_host_of(ctx, task_vars, action._templar)
        self.locking = self._lock_on and not action._task.check_mode
        self.live: dict[str, str] = {}
        self.session: lhio.Session | None = None
        self.reuse_dir: str | None = None
        self.answers: lhio.SessionResult | None = None

    def refusals(self) -> tuple[list[str], str]:
        """(why the launch would be refused before any host is touched, the headline for them).

        With the launcher on this box the run lock is taken here, until ansible-playbook exits; with a launch
        host it is taken in that host's session (``start``).
        """
        too_big = launch_precheck.size_problems(self._action, self._task_vars, self._ctx, self._phases)
        if too_big:
            return too_big, INVALID_CONFIG
        if self.remote is None and not os.path.isdir(self._ctx.project_dir):
            # The launch runs in it (a launcher in an execution-environment container sees only what is mounted).
            return [f"controller: the project directory {self._ctx.project_dir} does not exist on this machine, where "
                    "the launch runs (flodl_launch_host is this machine); mount it here (ansible-navigator: "
                    "--execution-environment-volume-mount, AWX: the job's volume), or set flodl_launch_host to the "
                    "machine that has it"], INVALID_CONFIG
        if self.locking and self.remote is None:
            _taken, refusal = lock_for_action(self._action, self._task_vars, self._ctx)
            if refusal:
                return [refusal], LOCK_NOT_TAKEN
        return [], INVALID_CONFIG

    def start(self) -> list[str]:
        """Start what runs beside the sweep: the launch host's session; problems when it cannot start.

        The session also runs the armed probe checks of the controller's data path (module_utils._probe.check_registry).
        """
        self.live = runlock.live_binaries(self._ctx.remotes, self._ctx.cmd) if self._lock_on else {}
        try:
            # A walk-in launcher dials no worker (each worker's agent dials it): no reach check from the launch host.
            self.session = lhio.start(self._action, self._task_vars, self._ctx, lock=self.locking, gpus=True,
                                      checks=check_registry.armed(self._ctx.settings, DATA_PATH),
                                      reach=self._ctx.settings.launch_mode != "walk_in")
        except RemoteLaunchError as exc:
            return [f"controller: {exc}"]
        # The masters the probe leaves serve the launcher's fan-out: only when it runs here.
        if self.session is None:
            self.reuse_dir = sshreuse_io.reuse_dir_for(self._action, self._task_vars, self._ctx, self._phases)
        return []

    def live_binary(self, host: str) -> str | None:
        """The rank binary a worker's probe counts the live processes of (the registry's live-rank part,
        module_utils._probe.live_ranks): is another run's rank of this project already running there?"""
        return self.live.get(host)

    def finish(self, timeout: float) -> lhio.SessionResult | None:
        """The launch host's answers, read once the workers answered."""
        if self.session is not None:
            self.answers = lhio.finish(self.session, self._ctx.project_dir, timeout)
        return self.answers

    def judge(self, host: str, running: int | None, report: dict[str, Any]) -> None:
        """A worker's problems for the launch: unreachable from the launch host, or a live run there (``running``:
        the live ranks its probe counted, None when not asked or the probe failed)."""
        launch = self.answers
        reach = launch.reach if launch is not None and launch.facts.complete else None
        if launch is not None and reach is not None and host in reach and reach[host][0] != 0:
            report["errors"].append(remote_launch.unreachable_from_launch_host(
                launch.host, host, reach[host][0], reach[host][1], launch.forwarding))
        if running and host in self.live:
            report["errors"].append(runlock.refusal_message(self._ctx.project_dir, {host: running}))
        restatus(report)

    def _answered(self) -> lhio.SessionResult | None:
        """The launch host's answers when its session had no problem."""
        return self.answers if self.answers is not None and not self.answers.errors else None

    def controller_identity(self) -> str | None:
        """Who the controller is on the launch host, when its session answered without a problem."""
        answered = self._answered()
        return answered.facts.identity if answered is not None else None

    def result_fields(self, failed: bool) -> dict[str, Any]:
        """What the launch step reads back from the step's result: the launch host's identity and GPUs, and the
        masters' directory (closed instead when the run stops here: nothing will reuse them)."""
        answered = self._answered()
        out = {lhio.RESULT_KEY: lhio.result_fields(answered)} if answered is not None else {}
        if failed:
            sshreuse_io.close_masters(self.reuse_dir)
        elif self.reuse_dir:
            out[sshreuse_io.RESULT_KEY] = self.reuse_dir
        return out
