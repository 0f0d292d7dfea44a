# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The orphan cleanup the launch host's wrapper runs itself when the job goes away.

A job killed whole (its pod deleted, an OOM kill) runs nothing more, so the
wrapper on ``flodl_launch_host`` (module_utils._ssh.remote_launch) carries the
cleanup: a POSIX sh *plan* rendered here, from the per-worker cleanup argv
the collection's own orphan cleanup uses (the launcher's ssh shape with the
connect bound, module_utils._launch.teardown's script). It travels on the wrapper's
stdin after the environment, never in argv, and the wrapper runs it as
``sh PLAN <step> <private dir>``:

- ``start``: one ssh master per worker (ControlPersist, socket in the run's
  private directory), opened while the job is alive. A forwarded agent ends
  with the job; an authenticated master does not, so the cleanup still gets
  in after a pod deletion;
- ``cleanup``: every worker at once, through its master (or a fresh
  connection when there is none), the whole step bounded by ``budget``
  seconds (SIGKILL of what is left);
- ``close``: the masters are told to exit (after the start step ended, bounded too).
"""
from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.flodl.cluster.plugins.module_utils._ssh.connect_bound import DEFAULT_SECONDS
from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import always_quote

PLAN_END = "__FLODL_PLAN_END__"
# The cleanup script sleeps 1 s between TERM and KILL; the rest is ssh's round trips.
CLEANUP_EXTRA_SECONDS = 6


class CleanupPlanError(ValueError):
    """A cleanup argv that cannot travel as lines of a plan."""


def cleanup_budget(connect_timeout: int) -> int:
    """Seconds the whole cleanup step may take: a connect, the script, a margin."""
    return (connect_timeout if connect_timeout > 0 else DEFAULT_SECONDS) + CLEANUP_EXTRA_SECONDS


def _checked(host: str, argv: list[str]) -> list[str]:
    if len(argv) < 4 or argv[0] != "ssh" or argv[-3] != "--":
        raise CleanupPlanError(f"{host}: not an ssh argv ending with a remote command")
    for arg in [host, *argv]:
        if "\n" in arg or "\r" in arg or "\0" in arg:
            raise CleanupPlanError(f"{host}: a cleanup argument holds a line break or NUL and cannot travel as a line")
    return argv


def _ssh(argv: list[str], control: list[str], rest: list[str]) -> str:
    """``ssh`` + our control options first (ssh keeps the first value of an option) + quoted ``rest``.

    The socket path is the one unquoted-by-always_quote piece: ``"$d"/%C`` expands the private
    directory given to the plan (``$2``); every other word is single-quoted.
    """
    words = [always_quote(argv[0]), *control, '-o "ControlPath=$d/%C"', *(always_quote(a) for a in rest)]
    return " ".join(words)


def render_plan(argvs: Mapping[str, list[str]], budget: int) -> str:
    """The plan (see the module docstring) for host -> cleanup argv (``ssh ... -- target script``)."""
    budget = max(1, int(budget))
    start, cleanup, close = [], [], []
    for host in sorted(argvs):
        argv = _checked(host, list(argvs[host]))
        dest = argv[1:-1]  # options, "--" and the target, without the remote command
        start.append(_ssh(argv, ["-o ControlMaster=yes", "-o ControlPersist=yes"], [*dest, "true"])
                     + " </dev/null >/dev/null 2>&1 &")
        cleanup.append(_ssh(argv, ["-o ControlMaster=auto", "-o ControlPersist=no"], argv[1:])
                       + ' </dev/null >/dev/null 2>&1 & pids="$pids $!"')
        close.append(_ssh(argv, ["-O exit"], dest) + " </dev/null >/dev/null 2>&1 &")
    lines = ['d=$2', 'pids=""', 'case $1 in', 'start)', *start, 'wait; : >"$d/started" ;;', 'cleanup)', *cleanup]
    if cleanup:
        lines += [
            # The bound: a timer that SIGKILLs every cleanup ssh still running; stopped (with its sleep) after.
            f"( trap 'kill $s 2>/dev/null; exit 0' TERM; sleep {budget} & s=$!; wait $s; kill -KILL $pids 2>/dev/null ) "
            "</dev/null >/dev/null 2>&1 & t=$!",
            "wait $pids",
            "kill -TERM $t 2>/dev/null; wait $t",
        ]
    # close: a master still being opened would outlive the run; wait (bounded) for the start step first.
    lines += [';;', 'close)', f'i=0; while [ ! -e "$d/started" ] && [ $i -lt {budget} ]; do sleep 1; i=$((i + 1)); done',
              *close, 'wait ;;', 'esac']
    return "\n".join(lines) + "\n"


def plan_payload(plan: str) -> bytes:
    """The plan's lines and the end marker, sent on the wrapper's stdin after the environment."""
    if any(line == PLAN_END for line in plan.splitlines()):
        raise CleanupPlanError("the plan holds its own end marker")
    return (plan.rstrip("\n") + "\n" + PLAN_END + "\n").encode("utf-8")
