# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run's cluster as a typed, immutable value: :class:`Cluster`, built once by :func:`cluster_model`.

Built from a ``cluster:`` block the validator (module_utils._cluster.validate) has passed: the reader
builds it after validation, the handoff rebuilds it from the model a step handed back (a block of the
wrong shape raises :class:`ClusterShapeError`: that model is then refused). Rules, checks and actions
read its fields; only the renderers of bytes that leave the collection read ``Cluster.document``.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Tuple, Union

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import DEFAULT_CONTROLLER_PORT

ALL = "all"  # local_devices: every GPU the host has, counted at launch
Devices = Union[Tuple[int, ...], Literal["all"]]  # typing.Tuple: module_utils run on older Pythons too
Env = Mapping[str, str]  # a MappingProxyType: read-only


class ClusterShapeError(ValueError):
    """A ``cluster:`` block that is not of the validated shape (a handed-back model that was altered)."""


@dataclass(frozen=True)
class Ssh:
    """A worker's declared ``ssh:`` block (module_utils._ssh.sshargs derives it from the Ansible connection)."""

    target: str | None = None
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class Join:
    """``controller.join``: the elastic-join settings; ``token`` is the run's HMAC salt (never shown)."""

    min_rank_start: int | None = None
    join_timeout: int | None = None
    target_ranks: int | None = None
    max_join_timeout: int | None = None
    open_admission: bool | None = None
    discovery: bool | None = None
    token: str | None = field(default=None, repr=False)
    tunnel_only: bool | None = None
    start: str | None = None


@dataclass(frozen=True)
class Controller:
    host: str
    path: str  # the project root as the controller sees it
    port: int = DEFAULT_CONTROLLER_PORT
    docker: str | None = None
    arch: str | None = None
    data_path: str | None = None
    join: Join | None = None


@dataclass(frozen=True)
class Worker:
    host: str  # the logical label: names target/cluster/<host>/, compared with the controller's identity
    path: str  # the project checkout on that host
    local_devices: Devices  # GPU indices, or "all" (counted at launch)
    nccl_socket_ifname: str = ""
    ranks: tuple[int, ...] = ()  # never in a run's input (refused there); numbered at render time
    ssh: Ssh | None = None  # None: no block declared (fdl-cli then omits it)
    tunnel: bool = False
    arch: str | None = None
    data_path: str | None = None
    gpu_ram_share: float | None = None
    docker: str | None = None
    env: Env = field(default_factory=lambda: MappingProxyType({}))
    # Its validated entry as JSON text, for the helpers that take flodl's worker entry (ssh argv,
    # preflight verdicts) and also serve entries that are not the run's (the launch host's).
    source: str = field(default="{}", repr=False)

    @property
    def all_devices(self) -> bool:
        return self.local_devices == ALL

    @property
    def document(self) -> dict[str, Any]:
        """A fresh copy of its validated entry (flodl's worker shape)."""
        return dict(json.loads(self.source))


@dataclass(frozen=True)
class Cluster:
    """The run's ``cluster:`` block, typed and immutable.

    ``source`` is the validated block as JSON text. It is here for the renderers alone (the topology and
    cluster JSON shipped to flodl's launcher, the envelope, fdl files: module_utils._launch.cluster_json
    ordered_cluster) so that those bytes stay exactly fdl-cli's, omissions and number forms included, and
    for the handoff, which carries it and rebuilds this value from it. Everything else reads the fields.
    """

    controller: Controller
    workers: tuple[Worker, ...] = ()
    env: Env = field(default_factory=lambda: MappingProxyType({}))
    gpu_ram_share: float | None = None
    source: str = field(default="{}", repr=False)

    @property
    def document(self) -> dict[str, Any]:
        """A fresh copy of the validated block, to render from (a renderer may change its copy)."""
        return dict(json.loads(self.source))

    @property
    def hosts(self) -> tuple[str, ...]:
        """``controller.host`` and every worker's ``host``, in order."""
        return (self.controller.host, *(w.host for w in self.workers))

    def remotes(self, controller_identity: str) -> tuple[Worker, ...]:
        """Workers that are not the controller's own box, by logical label (a container there is remote)."""
        return tuple(w for w in self.workers if w.host != controller_identity)

    def holds_secret(self) -> bool:
        return self.controller.join is not None and self.controller.join.token is not None


def _fail(where: str, want: str) -> ClusterShapeError:
    return ClusterShapeError(f"cluster {where}: not {want}")


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _fail(where, "a string")
    return value


def _opt_str(value: Any, where: str) -> str | None:
    return None if value is None else _str(value, where)


def _opt_int(value: Any, where: str) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise _fail(where, "an integer")
    return value


def _opt_bool(value: Any, where: str) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise _fail(where, "true or false")
    return value


def _opt_float(value: Any, where: str) -> float | None:
    if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)):
        raise _fail(where, "a number")
    return None if value is None else float(value)


def _map(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(where, "a map")
    return value


def _ints(value: Any, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or any(not isinstance(v, int) or isinstance(v, bool) for v in value):
        raise _fail(where, "a list of integers")
    return tuple(value)


def _env(value: Any, where: str) -> Env:
    env = _map({} if value is None else value, where)
    return MappingProxyType({_str(k, where): _str(v, f"{where}.{k}") for k, v in env.items()})


def _ssh(value: Any, where: str) -> Ssh | None:
    if value is None:
        return None
    ssh = _map(value, where)
    options = ssh.get("options") or []
    if not isinstance(options, list):
        raise _fail(f"{where}.options", "a list")
    return Ssh(target=_opt_str(ssh.get("target"), f"{where}.target"), port=_opt_int(ssh.get("port"), f"{where}.port"),
               user=_opt_str(ssh.get("user"), f"{where}.user"),
               identity_file=_opt_str(ssh.get("identity_file"), f"{where}.identity_file"),
               options=tuple(_str(o, f"{where}.options") for o in options))


def _join(value: Any) -> Join | None:
    if value is None:
        return None
    join = _map(value, "controller.join")
    ints = {k: _opt_int(join.get(k), f"controller.join.{k}")
            for k in ("min_rank_start", "join_timeout", "target_ranks", "max_join_timeout")}
    bools = {k: _opt_bool(join.get(k), f"controller.join.{k}") for k in ("open_admission", "discovery", "tunnel_only")}
    return Join(**ints, **bools, token=_opt_str(join.get("token"), "controller.join.token"),
                start=_opt_str(join.get("start"), "controller.join.start"))


def _controller(value: Any) -> Controller:
    ctl = _map(value, "controller")
    port = _opt_int(ctl.get("port"), "controller.port")
    return Controller(host=_str(ctl.get("host"), "controller.host"), path=_str(ctl.get("path"), "controller.path"),
                      port=DEFAULT_CONTROLLER_PORT if port is None else port,
                      docker=_opt_str(ctl.get("docker"), "controller.docker"),
                      arch=_opt_str(ctl.get("arch"), "controller.arch"),
                      data_path=_opt_str(ctl.get("data_path"), "controller.data_path"), join=_join(ctl.get("join")))


def _devices(value: Any, where: str) -> Devices:
    return ALL if value == ALL else _ints(value, where)


def _worker(value: Any, index: int) -> Worker:
    entry = _map(value, f"workers[{index}]")
    at = f"workers[{index}]."
    return Worker(
        host=_str(entry.get("host"), at + "host"), path=_str(entry.get("path"), at + "path"),
        local_devices=_devices(entry.get("local_devices"), at + "local_devices"),
        nccl_socket_ifname=_opt_str(entry.get("nccl_socket_ifname"), at + "nccl_socket_ifname") or "",
        ranks=_ints(entry.get("ranks") or [], at + "ranks"), ssh=_ssh(entry.get("ssh"), at + "ssh"),
        tunnel=bool(_opt_bool(entry.get("tunnel"), at + "tunnel")), arch=_opt_str(entry.get("arch"), at + "arch"),
        data_path=_opt_str(entry.get("data_path"), at + "data_path"),
        gpu_ram_share=_opt_float(entry.get("gpu_ram_share"), at + "gpu_ram_share"),
        docker=_opt_str(entry.get("docker"), at + "docker"), env=_env(entry.get("env"), at + "env"),
        source=json.dumps(entry))


def cluster_model(document: Any) -> Cluster:
    """The typed cluster of a validated ``cluster:`` block (pure: the block is copied, never kept).

    Raises :class:`ClusterShapeError` when ``document`` is not of that shape.
    """
    try:
        plain = json.loads(json.dumps(document, allow_nan=False))  # plain JSON types, a copy of its own
    except (TypeError, ValueError) as exc:
        raise ClusterShapeError(f"cluster: not JSON data ({exc})") from None
    block = _map(plain, "")
    workers = block.get("workers")
    if not isinstance(workers, list):
        raise _fail("workers", "a list")
    return Cluster(controller=_controller(block.get("controller")),
                   workers=tuple(_worker(w, i) for i, w in enumerate(workers)),
                   env=_env(block.get("env"), "env"),
                   gpu_ram_share=_opt_float(block.get("gpu_ram_share"), "gpu_ram_share"),
                   source=json.dumps(plain))
