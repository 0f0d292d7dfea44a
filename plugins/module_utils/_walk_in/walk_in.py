# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Walk-in launches (``flodl_launch_mode: walk_in``): what the launcher and each worker's agent are given.

In a walk-in run flodl's launcher fans nothing out. It opens a roster-free join window and the agents
that Ansible starts on the workers dial in (docs/launcher-contract.md, errata E13/E14, as upstream's
launcher code requires):

* the launcher's topology keeps the controller and an empty ``workers`` array, with
  ``join: {min_rank_start: W, target_ranks: W, discovery: true, token: T}``: the window closes as soon
  as this run's W ranks are in, and only agents holding the run's fresh 16-byte token are admitted;
* each agent gets ``FLODL_INTERNAL_AGENT_JSON`` = hex of its spec (``host``, ``controller_host``,
  ``controller_port``, ``salt_hex`` = T, its ``local_devices``, and ``libtorch``, ``data_path``,
  ``gpu_ram_share`` when the worker declares them) and ``FLODL_HOST_NAME`` = its host, in an otherwise
  clean environment (no other role variable), with its library path, ``env`` and NCCL interface.

Pure parts only: the renderers and the agent's start and collect scripts (POSIX sh, no Python on the
workers). The spec reaches the agent on stdin, never on a command line, since it holds the token.
"""
from __future__ import annotations

import ipaddress
import math
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._launch.cluster_json import ordered_cluster
from ansible_collections.flodl.cluster.plugins.module_utils._core.hexcodec import hex_encode
from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import live_member_function
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_launch import END_MARK, env_payload
from ansible_collections.flodl.cluster.plugins.module_utils._core.serde_json_text import serde_compact, serde_pretty
from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import always_quote

ENV_AGENT_JSON = "FLODL_INTERNAL_AGENT_JSON"
ENV_HOST_NAME = "FLODL_HOST_NAME"
ENV_NCCL_IFNAME = "NCCL_SOCKET_IFNAME"
# The join knobs the mode sets itself; a user's other knobs (join_timeout, max_join_timeout) are kept.
_MODE_KNOBS = ("min_rank_start", "target_ranks", "discovery", "token", "open_admission", "start")
AGENT_MARK = "__FLODL_AGENT__"
AGENT_EXIT_MARK = "__FLODL_AGENT_EXIT__"
_TOKEN = re.compile(r"[0-9a-f]{32}")


def new_token() -> str:
    """A fresh join token per run: 16 random bytes as 32 lowercase hex characters."""
    return secrets.token_hex(16)


def rank_total(cluster: Mapping[str, Any]) -> int:
    """W: the ranks of every worker (``ranks`` populated from the devices, as for a fan-out)."""
    return sum(len(w.get("ranks") or []) for w in cluster.get("workers", []))


def window_topology(shipped: Mapping[str, Any], token: str) -> dict[str, Any]:
    """The launcher's topology: the controller with this run's join window, no roster."""
    if not _TOKEN.fullmatch(token):
        raise ValueError("a join token is 32 lowercase hex characters")
    total = rank_total(shipped)
    controller = dict(shipped["controller"])
    user_join = {k: v for k, v in (controller.get("join") or {}).items() if k not in _MODE_KNOBS}
    controller["join"] = {**user_join, "min_rank_start": total, "target_ranks": total, "discovery": True,
                          "token": token}
    return ordered_cluster({**shipped, "controller": controller, "workers": []})


def agent_spec(worker: Mapping[str, Any], controller: Mapping[str, Any], token: str,
               gpu_ram_share: Any = None) -> dict[str, Any]:
    """One worker's agent spec, in upstream's field order; optional fields only when the worker declares them."""
    devices = worker.get("local_devices")
    spec: dict[str, Any] = {
        "host": str(worker["host"]),
        "controller_host": str(controller["host"]),
        "controller_port": int(controller["port"]),
        "salt_hex": token,
        # "all" was counted by preflight: the ranks hold the count, and the agent gets those devices.
        "local_devices": list(devices) if isinstance(devices, list) else list(range(len(worker.get("ranks") or []))),
    }
    if worker.get("arch"):
        spec["libtorch"] = str(worker["arch"])
    if worker.get("data_path"):
        spec["data_path"] = str(worker["data_path"])
    share = worker.get("gpu_ram_share", gpu_ram_share)
    if share is not None:
        spec["gpu_ram_share"] = float(share)
    return spec


def spec_hex(spec: Mapping[str, Any]) -> str:
    return hex_encode(serde_compact(spec))


@dataclass(frozen=True)
class AgentLaunch:
    """What Ansible runs on one worker: where, which binary, and the environment the agent gets."""

    host: str
    cwd: str
    binary: str
    env: dict[str, str]


def agent_launch(worker: Mapping[str, Any], entry: Mapping[str, Any], spec: Mapping[str, Any],
                 cluster_env: Mapping[str, str], extra: Mapping[str, str]) -> AgentLaunch:
    """The agent's start: the prebuilt binary of its envelope ``entry``, in its cwd, with its environment.

    ``extra`` holds the launch's own knobs every rank gets in a fan-out (``FLODL_VERBOSITY``,
    ``FLODL_NET_TIMEOUT_SCALE``, ``FDL_ENV``). The cluster's ``env``, then the worker's, override them;
    the role variables come last so that nothing can replace them.
    """
    path = str(worker["path"]).rstrip("/") or "/"
    cwd = f"{path}/{entry['cwd_subpath']}" if entry.get("cwd_subpath") else path
    binary = str(entry["bin"]) if str(entry["bin"]).startswith("/") else f"{path}/{entry['bin']}"
    env: dict[str, str] = dict(extra)
    if entry.get("ld_library_path"):
        env["LD_LIBRARY_PATH"] = str(entry["ld_library_path"])
    if worker.get("nccl_socket_ifname"):
        env[ENV_NCCL_IFNAME] = str(worker["nccl_socket_ifname"])
    env.update({str(k): str(v) for k, v in cluster_env.items()})
    env.update({str(k): str(v) for k, v in (worker.get("env") or {}).items()})
    env[ENV_AGENT_JSON] = spec_hex(spec)
    env[ENV_HOST_NAME] = str(worker["host"])
    return AgentLaunch(str(worker["host"]), cwd, binary, env)


# An agent log no collect took (its job was cancelled or killed) is kept this long for a post-mortem, then the next
# agent started on that worker removes it. Only a finished agent's (its ``.exit`` written): never a running one's.
STALE_LOG_MINUTES = 10
_LOG_PREFIX = "flodl-agent-"


def agent_log(run_id: str) -> str:
    """The agent's output on its worker: in the connection user's temporary directory, this run's name."""
    if not re.fullmatch(r"[0-9a-f]{16}", run_id):
        raise ValueError("a run id is 16 lowercase hex characters")
    return f"${{TMPDIR:-/tmp}}/{_LOG_PREFIX}{run_id}.log"


def start_script(launch: AgentLaunch, log: str, timeout_s: int) -> str:
    """POSIX sh: read the environment from stdin, start the agent in a clean environment and a session of its
    own, print its pid. The agent is killed after ``timeout_s`` whatever happens; its exit code is recorded
    beside its log (``<log>.exit``). Finished agents' logs of earlier runs older than :data:`STALE_LOG_MINUTES`
    in the same directory are removed first.

    The environment goes on in a pipe, never as arguments: the session's shell and ``timeout`` live as long as
    the agent, and their command lines (any local user's to read in /proc) would show the run's join token.
    """
    # The session's shell: only PATH and HOME from env -i, then the lines from the pipe, exported as they are.
    inner = ('while IFS= read -r __l; do [ -n "$__l" ] && export "$__l"; done; unset __l; '
             'timeout -s KILL "$1" "$2" </dev/null >"$0" 2>&1; echo $? >"$0.exit"')
    return "\n".join([
        "set --; __end=",
        f'while IFS= read -r __l; do [ "$__l" = {END_MARK} ] && {{ __end=1; break; }}; set -- "$@" "$__l"; done',
        # Without the whole environment the binary would start as a plain process, not an agent.
        f'[ -n "$__end" ] || {{ echo {AGENT_MARK}=no-env; exit 0; }}',
        f"cd {always_quote(launch.cwd)} || {{ echo {AGENT_MARK}=no-cwd; exit 0; }}",
        "umask 077",
        f'__log="{log}"; rm -f "$__log" "$__log.exit"',
        (f'for __x in "${{__log%/*}}"/{_LOG_PREFIX}*.log.exit; do [ -f "$__x" ] && '
         f'[ -n "$(find "$__x" -mmin +{STALE_LOG_MINUTES} 2>/dev/null)" ] && rm -f "${{__x%.exit}}" "$__x"; done'),
        # printf is built in: the values reach the pipe without a command line of their own.
        f'printf "%s\\n" "$@" | env -i "PATH=$PATH" "HOME=${{HOME:-/}}" setsid /bin/sh -c {always_quote(inner)} '
        # Its own descriptors too: the connection (ssh, docker exec) ends when nothing holds its output.
        f'"$__log" {int(timeout_s)} {always_quote(launch.binary)} >/dev/null 2>&1 &',
        f"echo {AGENT_MARK}=$!",
    ])


def start_stdin(launch: AgentLaunch) -> bytes:
    return env_payload(launch.env)


def parse_start(stdout: str) -> int | str | None:
    """The agent's pid; ``"no-cwd"`` (no such directory there) or ``"no-env"`` (its environment did not arrive
    whole on stdin); None when nothing was printed."""
    for line in stdout.splitlines():
        if line.startswith(AGENT_MARK + "="):
            value = line.split("=", 1)[1].strip()
            return int(value) if value.isdigit() else value
    return None


def collect_script(pid: int, log: str, lines: int) -> str:
    """POSIX sh: stop what is left of the agent's session, then its exit code and its log's last lines."""
    if int(pid) < 2:
        raise ValueError(f"pid {pid} is never an agent's session")
    return "; ".join([
        f'__log="{log}"',
        # The whole session: timeout puts the agent in a process group of its own, inside it. Zombies do not
        # count (live_member_function): a second's grace per worker would add up over a cluster's collects.
        live_member_function("__flodl_live"),
        f"if __flodl_live -s {int(pid)}; then pkill -TERM -s {int(pid)} 2>/dev/null; "
        f"sleep 1; pkill -KILL -s {int(pid)} 2>/dev/null; fi",
        f'echo {AGENT_EXIT_MARK}=$(head -c 8 "$__log.exit" 2>/dev/null)',
        f'tail -n {max(1, int(lines))} "$__log" 2>/dev/null',
        'rm -f "$__log" "$__log.exit"; true',
    ])


def parse_collect(stdout: str) -> tuple[int | None, list[str]]:
    """(the agent's exit code or None when it recorded none, its last lines)."""
    code: int | None = None
    rest = []
    for line in stdout.splitlines():
        if line.startswith(AGENT_EXIT_MARK + "="):
            text = line.split("=", 1)[1].strip()
            code = int(text) if text.isdigit() else None
        else:
            rest.append(line)
    return code, rest


WINDOW_OPEN_SECONDS = 60.0  # the launcher's start up to its window's bind (a compose launcher pulls nothing)
DEFAULT_JOIN_TIMEOUT = 300.0  # upstream's window when the user's join block sets none
_AGENT_KNOBS = ("FLODL_VERBOSITY", "FLODL_NET_TIMEOUT_SCALE", "FDL_ENV")
_ROSTER_VARS = ("FLODL_INTERNAL_PREBUILD_PER_HOST", "FLODL_TESTING_CLUSTER_JSON")


def plan(env: Mapping[str, str], topology: Mapping[str, Any], envelope: Mapping[str, Any],
         names: Mapping[str, str], launch_timeout: float
         ) -> tuple[dict[str, str], dict[str, Any], dict[str, Any], list[str]]:
    """A fan-out's prepared launch turned walk-in: (the launcher's environment, its topology, the walk-in plan,
    problems).

    ``topology`` is the shipped fan-out topology (ranks populated), ``envelope`` the prebuild envelope per
    host, ``names`` flodl host -> inventory name. The plan holds the run id, the window's port and bounds,
    and each worker's agent (by inventory name): host, cwd, binary and environment.
    """
    token, run_id = new_token(), secrets.token_hex(8)
    window = window_topology(topology, token)
    # The roster's size stays out of the launcher's environment: no envelope (it fans nothing out) and no testing
    # copy of the whole cluster.
    launcher_env = {k: v for k, v in env.items() if k not in _ROSTER_VARS}
    launcher_env["FLODL_INTERNAL_FULL_CLUSTER_JSON"] = hex_encode(serde_pretty(window))
    extra = {k: str(env[k]) for k in _AGENT_KNOBS if k in env}
    join_timeout = float((window["controller"]["join"]).get("join_timeout") or DEFAULT_JOIN_TIMEOUT)
    agents: dict[str, Any] = {}
    problems = []
    for worker in topology["workers"]:
        host = str(worker["host"])
        entry = envelope.get(host)
        if not isinstance(entry, Mapping) or not entry.get("bin"):
            problems.append(f"{host}: no prebuilt binary in the prebuild envelope; a walk-in agent is this host's "
                            "prebuilt binary: run the prebuild (flodl_prebuild: true) or use flodl_launch_mode: fanout")
            continue
        launch = agent_launch(worker, entry, agent_spec(worker, window["controller"], token,
                                                        topology.get("gpu_ram_share")),
                              topology.get("env") or {}, extra)
        agents[names.get(host, host)] = {"host": host, "cwd": launch.cwd, "binary": launch.binary, "env": launch.env,
                                         "devices": list(agent_spec(worker, window["controller"], token)["local_devices"])}
    bound = (launch_timeout if launch_timeout > 0 else 0.0)
    walk_in = {"run_id": run_id, "host": str(window["controller"]["host"]), "port": int(window["controller"]["port"]),
               "open_timeout": WINDOW_OPEN_SECONDS,
               "join_timeout": join_timeout, "agents": agents,
               # Each agent is killed at this bound whatever happens (0: the launch has none, nor does it).
               "agent_timeout": int(bound + join_timeout + WINDOW_OPEN_SECONDS) if bound else 0}
    return launcher_env, window, walk_in, problems


def plan_lines(walk_in: Mapping[str, Any]) -> list[str]:
    """The plan's walk-in part: the window and one line per agent (never its environment: it holds the token)."""
    agents = walk_in["agents"]
    lines = [f"  walk-in: the launcher's join window on port {walk_in['port']} waits for "
             f"{sum(len(a['devices']) for a in agents.values())} rank(s) (join timeout {walk_in['join_timeout']:g} s, "
             "fresh join token, withheld); one agent per worker, started over its own Ansible connection:"]
    lines += [f"    {name}: {a['binary']} in {a['cwd']}, devices {a['devices']}" for name, a in agents.items()]
    return lines


# --------------------------------------------------------------------------- is the window open?

LISTEN_MARK = "__FLODL_WINDOW_OPEN__"
TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
LISTEN_STEP_SECONDS = 0.2


def table_addresses(host: str | None) -> set[str] | None:
    """How /proc/net/tcp* spells ``host`` and the any-address, in upper case (None: any address matches).

    The one definition of a window's address in the kernel's tables: the check on this machine
    (plugin_utils._walk_in.walk_in_io.listening) and the one on a launch host (:func:`listen_check_script`).
    """
    try:
        addr = ipaddress.ip_address(str(host))
    except ValueError:
        return None  # a name: the window's own bind is not knowable from here
    packed = addr.packed
    if addr.version == 4:  # one little-endian 32-bit word
        return {packed[::-1].hex().upper(), "00000000"}
    words = "".join(packed[i:i + 4][::-1].hex() for i in range(0, 16, 4)).upper()
    return {words, "0" * 32}


# Exits 0 when a row of the table is in LISTEN state (0A) on port p at one of the addresses in w (any when w is empty).
_LISTEN_AWK = (
    'BEGIN { n = split(w, a, " "); for (i = 1; i <= n; i++) ok[a[i]] = 1 } '
    'FNR > 1 && $4 == "0A" { split($2, x, ":"); if (toupper(x[2]) == p && (n == 0 || (toupper(x[1]) in ok))) f = 1 } '
    "END { exit f ? 0 : 1 }"
)


def listen_check_script(port: int, host: str | None, seconds: float,
                        tables: tuple[str, ...] = TCP_TABLES) -> str:
    """POSIX sh (with awk) for the launch host: wait up to ``seconds`` until a socket of its network namespace
    listens on ``host:port`` (or on ``port`` of every address), as :func:`table_addresses` spells it; then print
    :data:`LISTEN_MARK` and exit 0. At the bound: exit 1, nothing printed but progress dots.

    A dot per round: once the ssh that started it is gone, the next write fails and the loop ends with it (no
    connection, no loop left behind on the launch host).
    """
    wanted = table_addresses(host)
    words = " ".join(sorted(wanted)) if wanted is not None else ""
    rounds = max(1, int(math.ceil(float(seconds) / LISTEN_STEP_SECONDS)))
    files = " ".join(always_quote(t) for t in tables)
    awk = (f"awk -v p={int(port):04X} -v w={always_quote(words)} {always_quote(_LISTEN_AWK)} \"$__flodl_t\" "
           "2>/dev/null")
    return (f"__flodl_i=0; while [ \"$__flodl_i\" -lt {rounds} ]; do "
            f"for __flodl_t in {files}; do [ -r \"$__flodl_t\" ] && {awk} && {{ echo {LISTEN_MARK}; exit 0; }}; done; "
            f"printf .; sleep {LISTEN_STEP_SECONDS:g}; __flodl_i=$((__flodl_i + 1)); done; exit 1")
