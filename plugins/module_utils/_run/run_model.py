# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run model: everything a phase needs about the run, validated once, as plain data between tasks.

The first step of a play builds it (plugin_utils._run.run_reader) and returns it in its result; a later
phase of the same run takes it back instead of reading and validating the run again. On the way back
in it is checked here, field by field: a value of the wrong shape is not a model (the phase then reads
the run itself). The fingerprint that ties a model to its run is made by plugin_utils._run.run_handoff.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._ssh.connect_bound import DEFAULT_SECONDS as DEFAULT_CONNECT_SECONDS
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.model import Cluster, ClusterShapeError, Worker, cluster_model
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import REDACTED
from ansible_collections.flodl.cluster.plugins.module_utils._core.vault_redact import mask, unmask
from ansible_collections.flodl.cluster.plugins.module_utils._run.runlock import DEFAULT_TTL

MODEL_VERSION = 1
RESULT_KEY = "run_model"  # where a step's result carries the model it built
TRACE_KEY = "run_model_use"  # how a step got its model: built (validated, connections resolved) or received


@dataclass(frozen=True)
class RunSettings:
    """The phases' play-level knobs, read once by the reader (their rules: module_utils._run.knobs)."""

    launch_mode: str = ""  # flodl_launch_mode, stripped: walk_in, fanout or blank (fanout)
    prebuild_dedupe: bool | None = True  # flodl_prebuild_dedupe; None: not a boolean (the prebuild refuses it)
    prebuild_dedupe_shown: str = "True"  # its value as that refusal shows it
    build_timeout: float | None = None  # flodl_build_timeout; None: the build's default
    prebuild_env: Mapping[str, str] = field(default_factory=dict)  # flodl_prebuild_env (read-only)
    preflight_require_all: bool = False  # flodl_preflight_require_all
    testing_cluster: bool = True  # flodl_testing_cluster
    launch_container_root: str | None = None  # flodl_launch_container_root; None: unset (the launch's default)
    launch_docker: str | bool | None = None  # flodl_launch_docker
    launch_docker_type: str = ""  # the type of a flodl_launch_docker that is neither text nor boolean (refused)
    launch_host: str = "localhost"  # flodl_launch_host
    launch_forward_agent: bool = False  # flodl_launch_forward_agent
    ssh_reuse: bool = True  # flodl_ssh_reuse, off for a detached launch (flodl_launch_detach)
    run_lock: bool = True  # flodl_run_lock
    run_lock_ttl: int = DEFAULT_TTL  # flodl_run_lock_ttl, bounded
    run_id: str | None = None  # flodl_run_id, as given (launch_status checks it)
    launch_run_id: str | None = None  # flodl_launch.run_id: the start job's artifact
    # The preflight knobs of knobs.NUMBERS that are set, as (name, value): the probe checks' thresholds, carried
    # here so that a new one is a line in knobs.py, not an option passed through the role and the action.
    preflight_numbers: tuple[tuple[str, float], ...] = ()

    def preflight_number(self, name: str) -> float | None:
        """The value of the preflight knob ``name`` (one of knobs.PREFLIGHT_NUMBERS); None when it is unset."""
        return dict(self.preflight_numbers).get(name)

    def probe_timeout(self) -> float:
        """``flodl_preflight_timeout``: seconds one host's probe may take (30 unset; knobs refuse one not above 0)."""
        return self.preflight_number("flodl_preflight_timeout") or 30.0

    def probe_parallel(self) -> int:
        """``flodl_preflight_max_parallel``: probes at once, at most (64 unset; knobs refuse a fraction or below 1)."""
        return max(1, int(self.preflight_number("flodl_preflight_max_parallel") or 64))

    def __post_init__(self) -> None:
        _freeze(self, "prebuild_env")

    def walks_in(self, phases: list[str]) -> bool:
        """Whether this run launches in ``walk_in`` mode (blank means fanout)."""
        return "launch" in phases and self.launch_mode == "walk_in"


@dataclass(frozen=True)
class RunContext:
    """Everything a phase needs to know about the run, already validated; frozen (a copy with ``replace``)."""

    cluster: Cluster  # typed; its validated document travels in the handoff and is rebuilt on the way back
    controller_identity: str
    prebuild: bool
    net_timeout_scale: str | None
    cmd: str | None
    cmd_dir: str
    fdl_env: str | None
    build_host: str
    launch_command: str | None
    project_dir: str = ""
    cmd_run: str | None = None  # the fdl command's run: line (flodl_cmd_run), run as fdl-cli runs it
    connect_timeout: int = DEFAULT_CONNECT_SECONDS  # flodl_launch_connect_timeout, for the launcher's ssh
    play_hosts: tuple[str, ...] = ()  # the workers this play runs on (after --limit)
    inventory_names: Mapping[str, str] = field(default_factory=dict)  # logical host -> inventory host
    # walk_in only: logical host -> the non-ssh Ansible connection that reaches it (flodl's ssh never does).
    ansible_only: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    settings: RunSettings = field(default_factory=RunSettings)
    # How this step got the model (run_handoff.trace), and the model it built for the later steps: not in the model.
    trace: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    handoff: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    # Values that came from Ansible Vault: plaintext -> ciphertext (plugin_utils._run.vault_values); never in the model.
    vaulted: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Callers may pass lists and dicts; the run keeps read-only copies, so no step can change it for the next.
        object.__setattr__(self, "play_hosts", tuple(self.play_hosts))
        object.__setattr__(self, "warnings", tuple(self.warnings))
        _freeze(self, "inventory_names", "ansible_only", "trace", "vaulted")
        if self.handoff is not None:
            object.__setattr__(self, "handoff", _frozen(self.handoff))

    @property
    def secrets(self) -> list[str]:
        """The vaulted plaintexts, to withhold from results, displays and logs (module_utils._core.vault_redact)."""
        return sorted(self.vaulted)

    @property
    def remotes(self) -> tuple[Worker, ...]:
        return self.cluster.remotes(self.controller_identity)

    @property
    def project_root(self) -> str:
        return self.cluster.controller.path

    def reached_by_ansible(self, host: str) -> str | None:
        """The non-ssh Ansible connection that alone reaches the worker ``host`` (walk_in), else None."""
        return self.ansible_only.get(host)

    def in_play(self, host: str) -> bool:
        """Whether the worker ``host`` (its logical label) is one of the play's hosts."""
        return self.inventory_names.get(host, "") in self.play_hosts


def _frozen(value: Any) -> Any:
    """A read-only deep copy of plain data: mappings as MappingProxyType, lists as tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value


def thawed(value: Any) -> Any:
    """Plain JSON data again (dicts and lists) from what :func:`_frozen` made, for a task's result."""
    if isinstance(value, Mapping):
        return {k: thawed(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thawed(v) for v in value]
    return value


def _fields(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


def _freeze(obj: Any, *names: str) -> None:
    for name in names:
        object.__setattr__(obj, name, MappingProxyType(dict(getattr(obj, name))))


# Field -> the types its value may have (None where the field is optional).
_SHAPE: dict[str, tuple[type, ...]] = {
    "controller_identity": (str,), "prebuild": (bool,), "net_timeout_scale": (str, type(None)),
    "cmd": (str, type(None)), "cmd_dir": (str,), "fdl_env": (str, type(None)), "build_host": (str,),
    "launch_command": (str, type(None)), "project_dir": (str,), "cmd_run": (str, type(None)),
}


_NOT_MODEL = ("trace", "handoff", "vaulted", "cluster")  # the cluster travels as its document
# RunSettings field -> the types its value may have.
_SETTINGS_SHAPE: dict[str, tuple[type, ...]] = {
    "launch_mode": (str,), "prebuild_dedupe": (bool, type(None)), "prebuild_dedupe_shown": (str,),
    "build_timeout": (float, int, type(None)), "preflight_require_all": (bool,), "testing_cluster": (bool,),
    "launch_container_root": (str, type(None)), "launch_docker": (str, bool, type(None)), "launch_docker_type": (str,),
    "launch_host": (str,), "launch_forward_agent": (bool,), "ssh_reuse": (bool,), "run_lock": (bool,),
    "run_lock_ttl": (int,), "run_id": (str, type(None)), "launch_run_id": (str, type(None)),
}


def fingerprint(inputs: Any) -> str:
    """A digest of what a model was built from (the join token only enters as part of the digest)."""
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def to_model(ctx: RunContext, phases: list[str], connections: bool, print_: str) -> dict[str, Any]:
    """The model as plain JSON data, the join token replaced (results are shown with -v and published).

    Each vaulted value is a numbered placeholder; its ciphertext travels beside (``vaulted``), in the same order.
    """
    plain = {k: v for k, v in _fields(ctx).items() if k not in _NOT_MODEL}
    data = thawed({"cluster": ctx.cluster.document, **plain, "settings": _fields(ctx.settings)})
    if ctx.cluster.holds_secret():
        data["cluster"]["controller"]["join"]["token"] = REDACTED
    secrets = ctx.secrets
    model = {"version": MODEL_VERSION, "phases": sorted(set(phases)), "connections": bool(connections),
             "fingerprint": print_, "context": mask(data, secrets)}
    if secrets:
        model["vaulted"] = [ctx.vaulted[s] for s in secrets]
    return model


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _cluster(document: Any) -> Cluster | None:
    """The typed cluster a model carries (its join token restored), when the document has the validated shape."""
    try:
        return cluster_model(document)
    except ClusterShapeError:
        return None


def _settings(data: Any) -> RunSettings | None:
    """The settings a model carries, when each has its shape."""
    if not isinstance(data, Mapping) or any(not isinstance(data.get(k), t) for k, t in _SETTINGS_SHAPE.items()):
        return None
    env = data.get("prebuild_env")
    if isinstance(data["run_lock_ttl"], bool) or isinstance(data["build_timeout"], bool) or not isinstance(env, Mapping):
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        return None
    numbers = _numbers(data.get("preflight_numbers"))
    if numbers is None:
        return None
    return RunSettings(**{k: data[k] for k in _SETTINGS_SHAPE}, prebuild_env=dict(env), preflight_numbers=numbers)


def _numbers(value: Any) -> tuple[tuple[str, float], ...] | None:
    """``preflight_numbers`` as JSON carried it (a list of [name, number] pairs), when it has that shape."""
    if not isinstance(value, list):
        return None
    pairs = [p for p in value if isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
             and isinstance(p[1], (int, float)) and not isinstance(p[1], bool)]
    return tuple((name, float(number)) for name, number in pairs) if len(pairs) == len(value) else None


def from_model(model: Any, phases: list[str], connections: bool, print_: str,
               token: str | None, unvault: Callable[[list[str]], list[str] | None] = lambda _c: None,
               ) -> RunContext | None:
    """The context a model carries, when it is one of this run, covers ``phases`` and has the right shape.

    ``connections``: the phase reaches workers, so the model must hold their resolved connections.
    ``token``: the join token as the run's variables give it now (the model holds a placeholder).
    ``unvault``: the plaintexts of the model's ``vaulted`` ciphertexts (None when they cannot be decrypted).
    """
    if not isinstance(model, Mapping) or model.get("version") != MODEL_VERSION:
        return None
    if model.get("fingerprint") != print_ or not _str_list(model.get("phases")):
        return None
    if not set(phases) <= set(model["phases"]) | {"teardown"} or (connections and model.get("connections") is not True):
        return None
    data = model.get("context")
    if not isinstance(data, Mapping) or not isinstance(data.get("cluster"), Mapping):
        return None
    if any(not isinstance(data.get(k), types) for k, types in _SHAPE.items()):
        return None
    timeout = data.get("connect_timeout")
    names = data.get("inventory_names")
    if not isinstance(timeout, int) or isinstance(timeout, bool) or not isinstance(names, Mapping):
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in names.items()):
        return None
    if not _str_list(data.get("play_hosts")) or not _str_list(data.get("warnings")):
        return None
    only = data.get("ansible_only", {})
    if not isinstance(only, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in only.items()):
        return None
    vaulted = model.get("vaulted", [])
    if not _str_list(vaulted):
        return None
    secrets = unvault(vaulted) if vaulted else []
    if secrets is None or len(secrets) != len(vaulted):
        return None
    try:
        values = unmask(json.loads(json.dumps(dict(data))), secrets)
    except ValueError:
        return None
    controller = values["cluster"].get("controller")
    join = controller.get("join") if isinstance(controller, dict) else None
    if isinstance(join, dict) and join.get("token") == REDACTED:
        if token is None:
            return None
        join["token"] = token
    settings = _settings(values.get("settings"))
    cluster = _cluster(values["cluster"])
    if settings is None or cluster is None:
        return None
    plain = {k: values[k] for k in (*_SHAPE, "connect_timeout", "inventory_names", "play_hosts", "warnings")}
    return RunContext(cluster=cluster, **plain, settings=settings, ansible_only=dict(values.get("ansible_only") or {}),
                      vaulted=dict(zip(secrets, vaulted)))


Run = RunContext  # the name issue 36 gives the run's one value
