# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Running the launch command on another inventory host (``flodl_launch_host``) over ssh.

Under AWX the play's ``localhost`` is the job's container; the launcher
belongs on the real controller box, the machine workers dial back to. The
environment is prepared on the controller side exactly as for a local
launch and travels on ssh's stdin, never in argv (it holds the run's
topology and may hold its HMAC salt). The remote wrapper:

- reads ``NAME=value`` lines up to an end marker and exports them (no eval);
- starts the command in a session of its own (``setsid``), so one signal
  reaches every process it started;
- watches stdin (its watcher holds no output, so ssh ends with the command):
  when the controller side goes away (job cancel, lost
  network, ansible-playbook killed) stdin closes and the wrapper stops the
  whole session, TERM then KILL after the grace period;
- exits with the command's exit code.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from ansible_collections.flodl.cluster.plugins.module_utils._files.file_modes import SHELL_TIGHTEN_UMASK
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_cleanup import PLAN_END
from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import always_quote

END_MARK = "__FLODL_ENV_END__"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class RemoteLaunchError(ValueError):
    """An environment that cannot travel to the launch host as lines."""


def env_payload(env: Mapping[str, str]) -> bytes:
    """The stdin the wrapper reads: one ``NAME=value`` line per variable, then the end marker."""
    lines = []
    for name in sorted(env):
        value = str(env[name])
        if not _NAME.fullmatch(name):
            raise RemoteLaunchError(f"environment name {name!r} cannot be exported by a POSIX shell")
        if "\n" in value or "\0" in value:
            raise RemoteLaunchError(f"environment value of {name} holds a newline or NUL and cannot travel as a line")
        lines.append(f"{name}={value}")
    lines.append(END_MARK)
    return ("\n".join(lines) + "\n").encode("utf-8")


def wrapper_script(cwd: str, command: str, grace: float, shell: str = "/bin/sh", plan: bool = False) -> str:
    """The POSIX sh run on the launch host (one argument to ssh; every value single-quoted).

    With ``plan``, stdin carries a cleanup plan after the environment (module_utils._ssh.remote_cleanup): it
    is kept in a private directory, its masters are opened beside the command, and when stdin closes
    while the command runs, the plan's cleanup runs on every worker once the session is stopped.
    """
    grace_s = max(1, int(round(grace)))
    lines = [
        f"while IFS= read -r __flodl_line; do [ \"$__flodl_line\" = {END_MARK} ] && break; "
        'export "$__flodl_line"; done',
    ]
    if plan:
        lines += [
            '__flodl_d=$(umask 077 && mktemp -d "${TMPDIR:-/tmp}/flodl-launch.XXXXXX" 2>/dev/null) || __flodl_d=',
            '__flodl_plan=/dev/null; [ -n "$__flodl_d" ] && __flodl_plan="$__flodl_d/plan"',
            f"while IFS= read -r __flodl_line; do [ \"$__flodl_line\" = {PLAN_END} ] && break; "
            "printf '%s\\n' \"$__flodl_line\"; done >\"$__flodl_plan\"",
            '[ -n "$__flodl_d" ] || echo "flodl launch: cannot create a private directory under ${TMPDIR:-/tmp}: '
            'no orphan cleanup from this host if the job dies" >&2',
        ]
    lines += [
        # As a local launch: the session's umask, never one that lets the command write group- or world-writable files.
        SHELL_TIGHTEN_UMASK,
        f"cd {always_quote(cwd)} || {{ echo 'flodl launch: no directory {cwd.replace(chr(39), '')} on this host' >&2; "
        "exit 97; }",
        # A background job's stdin is /dev/null in sh: keep the real one on fd 3 for the watcher.
        "exec 3<&0",
        f"setsid {always_quote(shell)} -c {always_quote(command)} </dev/null 3<&- 2>&1 &",
        "__flodl_pid=$!",
    ]
    step = '[ -n "$__flodl_d" ] && /bin/sh "$__flodl_d/plan" {0} "$__flodl_d"'
    if plan:
        lines.append(step.format("start") + " </dev/null >/dev/null 2>&1 3<&- &")
    stop = (
        'kill -TERM -"$__flodl_pid" 2>/dev/null; __flodl_i=0; '
        f'while [ "$__flodl_i" -lt {grace_s} ] && kill -0 -"$__flodl_pid" 2>/dev/null; '
        'do sleep 1; __flodl_i=$((__flodl_i + 1)); done; kill -KILL -"$__flodl_pid" 2>/dev/null'
    )
    after = f"; {step.format('cleanup')}" if plan else ""
    end = f'; {step.format("close")}; [ -n "$__flodl_d" ] && rm -rf "$__flodl_d"' if plan else ""
    lines += [
        f'( cat <&3 >/dev/null; if kill -0 "$__flodl_pid" 2>/dev/null; then {stop}{after}; fi{end} ) '
        ">/dev/null 2>&1 </dev/null &",
        "wait \"$__flodl_pid\"",
        "exit $?",
    ]
    return "\n".join(lines)


REACH_MARK = "__FLODL_REACH__"


def reach_script(worker_argvs: Mapping[str, list[str]]) -> str:
    """POSIX sh for the launch host: can it reach every worker the way the launcher will? All at once.

    Prints ``__FLODL_REACH__ <host> <exit code>`` per worker; ssh's last error line follows as
    ``__FLODL_REACH_ERR__ <host> <text>`` when it failed.
    """
    parts = []
    for host, argv in worker_argvs.items():
        cmd = " ".join(always_quote(a) for a in argv)
        q = always_quote(host)
        parts.append(
            f"( e=$({cmd} </dev/null 2>&1 >/dev/null); rc=$?; echo {REACH_MARK} {q} $rc; "
            f"[ $rc -ne 0 ] && printf '%s\\n' \"$e\" | tail -n 1 | sed 's/^/{REACH_MARK}_ERR {host} /' ) &"
        )
    return " ".join(parts) + " wait"


def parse_reach(stdout: str) -> dict[str, tuple[int, str]]:
    """host -> (exit code, last ssh error line) from :func:`reach_script`'s output."""
    codes: dict[str, int] = {}
    errors: dict[str, str] = {}
    for line in stdout.splitlines():
        fields = line.split(" ", 2)
        if len(fields) >= 3 and fields[0] == REACH_MARK and fields[2].strip().isdigit():
            codes[fields[1]] = int(fields[2].strip())
        elif len(fields) >= 2 and fields[0] == REACH_MARK + "_ERR":
            errors[fields[1]] = fields[2] if len(fields) > 2 else ""
    return {host: (rc, errors.get(host, "")) for host, rc in codes.items()}


def unreachable_from_launch_host(launch_host: str, host: str, rc: int, error: str, forwarding: bool) -> str:
    """The preflight error for a worker the launcher on ``launch_host`` could not reach."""
    fix = (
        "the forwarded agent holds no key this worker accepts: load the right key into the job's ssh-agent"
        if forwarding else
        f"give the launcher a way in: forward the job's ssh-agent (flodl_launch_forward_agent: true) or install "
        f"a key for this worker on {launch_host}"
    )
    return (
        f"{host}: flodl's launcher will run on {launch_host} (flodl_launch_host) and fan out from there, but "
        f"{launch_host} cannot reach this worker over ssh (exit {rc}{': ' + error[:200] if error else ''}); "
        f"the launch would fail after every build; {fix}"
    )
