# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read an fdl project's cluster configuration the way fdl-cli does.

flodl-contract.md §2a-§2e: the base manifest (``fdl.yaml``/``fdl.yml``/
``fdl.json``), an environment overlay ``fdl.<env>.{yaml,yml,json}`` next to
it, ``inherit-from:`` chains on both, a deep merge (maps merge, scalars and
lists replace, ``null`` deletes) and a strict check of the merged
``cluster:`` block. :func:`inventory_from_cluster` maps the result onto the
variables of the public interface (interface.md).

Every problem raises :class:`FdlConfigError` whose message names the
file(s), the key path, what was found and how to fix it.

Controller-side helper (used by the ``fdl_cluster`` inventory plugin); it
only needs the standard library plus PyYAML, which ships with ansible-core.
"""
from __future__ import annotations

import json
import math
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

# One definition of flodl's join/ssh key sets, shared with the inventory-side validator.
from ansible_collections.flodl.cluster.plugins.module_utils.topology import JOIN_KEYS, JOIN_STARTS as JOIN_START_VALUES, SSH_KEYS

try:
    import yaml
except ImportError:  # pragma: no cover - ansible-core always ships PyYAML
    yaml = None

CONFIG_NAMES = ("fdl.yaml", "fdl.yml", "fdl.json")
OVERLAY_EXTENSIONS = ("yaml", "yml", "json")
DEFAULT_ENV = "cluster"
INHERIT_KEY = "inherit-from"

CLUSTER_KEYS = ("controller", "workers", "env", "gpu_ram_share")
CONTROLLER_KEYS = ("host", "port", "path", "docker", "arch", "data_path", "join")
WORKER_KEYS = (
    "host",
    "local_devices",
    "nccl_socket_ifname",
    "path",
    "ssh",
    "tunnel",
    "arch",
    "data_path",
    "gpu_ram_share",
    "docker",
    "env",
)

# (fdl worker key, host variable) in interface.md order; required ones are
# always emitted, the rest only when the merged file sets them.
_WORKER_VARS = (
    ("host", "flodl_host"),
    ("path", "flodl_path"),
    ("local_devices", "flodl_local_devices"),
    ("nccl_socket_ifname", "flodl_nccl_socket_ifname"),
    ("arch", "flodl_arch"),
    ("data_path", "flodl_data_path"),
    ("env", "flodl_env"),
    ("gpu_ram_share", "flodl_gpu_ram_share"),
    ("tunnel", "flodl_tunnel"),
    ("docker", "flodl_docker"),
    ("ssh", "flodl_ssh"),
)
_CONTROLLER_VARS = (
    ("host", "flodl_controller_host"),
    ("port", "flodl_controller_port"),
    ("path", "flodl_controller_path"),
    ("docker", "flodl_controller_docker"),
    ("arch", "flodl_controller_arch"),
    ("data_path", "flodl_controller_data_path"),
    ("join", "flodl_controller_join"),
)
# Fields that make a root command a "preset" rather than a directory pointer.
_PRESET_FIELDS = ("ddp", "training", "output", "options")


class FdlConfigError(Exception):
    """A problem in the fdl configuration, ready to show to an operator.

    ``files`` are the files involved, ``key`` the dotted key path (may be
    empty), ``problem`` what was found and ``fix`` what to do about it.
    """

    def __init__(self, problem: str, files: Sequence[Any] = (), key: str = "", fix: str = "") -> None:
        self.files = [str(f) for f in files]
        self.key = key
        self.problem = problem
        self.fix = fix
        super().__init__(self._render())

    def _render(self) -> str:
        parts = []
        if self.files:
            parts.append(" + ".join(self.files))
        if self.key:
            parts.append(self.key)
        head = ": ".join(parts)
        text = head + ": " + self.problem if head else self.problem
        if self.fix:
            text += " (fix: " + self.fix + ")"
        return text


@dataclass
class FdlConfig:
    """The merged configuration of one project + environment."""

    project_dir: Path
    base: Path
    overlay: Optional[Path]
    env: Optional[str]
    layers: List[Path] = field(default_factory=list)
    data: Dict[str, Any] = field(default_factory=dict)

    @property
    def files(self) -> List[Path]:
        """The files that were merged, in merge order."""
        return list(self.layers)


# --------------------------------------------------------------------------
# Discovery
# --------------------------------------------------------------------------


def find_base_manifest(project_dir: Any) -> Path:
    """The first of ``fdl.yaml``, ``fdl.yml``, ``fdl.json`` in ``project_dir``."""
    directory = Path(project_dir)
    if not directory.is_dir():
        raise FdlConfigError(
            "project directory does not exist or is not a directory",
            files=[directory],
            fix="point project_dir at the fdl project root (the directory holding fdl.yml)",
        )
    for name in CONFIG_NAMES:
        candidate = directory / name
        if candidate.is_file():
            return candidate
    raise FdlConfigError(
        "no fdl manifest found (looked for " + ", ".join(CONFIG_NAMES) + ")",
        files=[directory],
        fix="point project_dir at the fdl project root (the directory holding fdl.yml)",
    )


def check_env_name(env: str) -> str:
    """Refuse environment names that cannot be an ``fdl.<env>.yml`` sibling."""
    if not isinstance(env, str) or not env.strip():
        raise FdlConfigError(
            "environment name must be a non-empty string, got %r" % (env,),
            key="env",
            fix="set env to the overlay name, e.g. cluster for fdl.cluster.yml",
        )
    if "/" in env or "\\" in env or env in (".", "..") or "\0" in env:
        raise FdlConfigError(
            "environment name %r is not a plain name" % (env,),
            key="env",
            fix="use the <env> part of fdl.<env>.yml, without directories",
        )
    return env


def find_overlay(base: Any, env: str) -> Optional[Path]:
    """``fdl.<env>.{yaml,yml,json}`` next to ``base`` (that preference order)."""
    check_env_name(env)
    directory = Path(base).parent
    for ext in OVERLAY_EXTENSIONS:
        candidate = directory / ("fdl.%s.%s" % (env, ext))
        if candidate.is_file():
            return candidate
    return None


def require_overlay(base: Any, env: str) -> Path:
    """Like :func:`find_overlay`, but a missing file is an error (as in fdl-cli)."""
    found = find_overlay(base, env)
    if found is None:
        raise FdlConfigError(
            "environment `%s` not found (expected fdl.%s.yml next to %s)" % (env, env, base),
            files=[base],
            fix="create fdl.%s.yml (or .yaml/.json) beside %s, or choose an existing env" % (env, Path(base).name),
        )
    return found


# --------------------------------------------------------------------------
# Loading, inherit-from, merge
# --------------------------------------------------------------------------


def load_document(path: Any) -> Dict[str, Any]:
    """Parse one YAML/JSON file into a mapping; an empty file is ``{}``."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FdlConfigError("cannot read file: %s" % exc, files=[p])
    try:
        if p.suffix == ".json":
            value = json.loads(text) if text.strip() else None
        else:
            if yaml is None:  # pragma: no cover
                raise FdlConfigError("PyYAML is not installed", files=[p], fix="install PyYAML")
            value = yaml.safe_load(text)
    except FdlConfigError:
        raise
    except Exception as exc:  # yaml.YAMLError, json.JSONDecodeError
        raise FdlConfigError("cannot parse file: %s" % exc, files=[p], fix="fix the syntax error")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise FdlConfigError(
            "top level must be a mapping, got %s" % _kind(value),
            files=[p],
            fix="write the file as `key: value` entries (e.g. `cluster:`)",
        )
    return value


def _shape(value: Any) -> str:
    """Type and size only: inherit-from errors never show what a file holds."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string of %d characters" % len(value)
    if isinstance(value, list):
        return "a list of %d items" % len(value)
    if isinstance(value, dict):
        return "a mapping of %d keys" % len(value)
    return "a %s" % type(value).__name__


def _inherit_target(value: Any, declaring: Path, canonical: Path) -> Optional[Path]:
    if value is None:
        return None
    if not isinstance(value, str):
        raise FdlConfigError(
            "must be a string path, got %s" % _shape(value), files=[declaring], key=INHERIT_KEY,
            fix="name the parent file, relative to this file",
        )
    if not value:
        raise FdlConfigError("must be a non-empty path", files=[declaring], key=INHERIT_KEY,
                             fix="name the parent file or remove the key")
    if "://" in value:
        raise FdlConfigError(
            "remote parents (a URL) are not supported", files=[declaring], key=INHERIT_KEY,
            fix="use a path to a file inside the project, relative to this file",
        )
    if "\0" in value:
        raise FdlConfigError("must not contain a NUL byte", files=[declaring], key=INHERIT_KEY,
                             fix="name the parent file, relative to this file")
    if value.startswith("~/"):
        return Path(os.path.expanduser("~")) / value[2:]
    target = Path(value)
    if target.is_absolute():
        return target
    return canonical.parent / target


def _canonical_roots(roots: Optional[Sequence[Any]], start: Path) -> List[Path]:
    if roots is None:
        return [start.absolute().parent.resolve()]
    return [Path(os.path.expanduser(str(r))).resolve() for r in roots]


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def resolve_chain(path: Any, roots: Optional[Sequence[Any]] = None) -> List[Tuple[Path, Dict[str, Any]]]:
    """``path`` and its ``inherit-from:`` ancestors, deepest ancestor first.

    Each entry is ``(canonical path, document without inherit-from)``.
    Relative parents resolve against the declaring file; cycles are errors.
    Every file of the chain must resolve (symlinks followed) inside one of
    ``roots``, by default the directory of ``path`` (the project): a parent
    elsewhere on the controller is refused before it is read, so no error can
    show what it holds. Pass ``roots`` to allow more directories on purpose.
    """
    start = Path(path)
    out: List[Tuple[Path, Dict[str, Any]]] = []
    _resolve_chain(start, [], out, None, _canonical_roots(roots, start))
    return out


def _load_parent(path: Path, canonical: Path, declared_by: Path) -> Dict[str, Any]:
    """load_document for an inherit-from parent, its failure told by type and size only."""
    try:
        return load_document(path)
    except FdlConfigError as exc:
        raise FdlConfigError(
            "inherit-from target `%s` (%s) %s; its content is not shown"
            % (canonical, _size(canonical), _failure_kind(exc.__context__)),
            files=[declared_by], key=INHERIT_KEY,
            fix="point inherit-from at an fdl config file (`key: value` entries) inside the project",
        ) from None


def _size(path: Path) -> str:
    try:
        return "%d bytes" % path.stat().st_size
    except OSError:
        return "size unknown"


def _failure_kind(cause: Optional[BaseException]) -> str:
    """Why a file would not load, from the exception behind it, without any of its text."""
    mark = getattr(cause, "problem_mark", None)
    if isinstance(cause, UnicodeDecodeError):
        return "cannot be read as UTF-8 text"
    if isinstance(cause, OSError):
        return "cannot be read (%s)" % (cause.strerror or type(cause).__name__)
    if mark is not None:
        return "is not valid YAML (line %d, column %d)" % (mark.line + 1, mark.column + 1)
    if isinstance(cause, ValueError) and hasattr(cause, "lineno"):
        return "is not valid JSON (line %d, column %d)" % (getattr(cause, "lineno"), getattr(cause, "colno"))
    if cause is not None:
        return "cannot be parsed"
    return "is not a mapping at its top level"


def _resolve_chain(path: Path, stack: List[Path], out: List[Tuple[Path, Dict[str, Any]]],
                   declared_by: Optional[Path], roots: Sequence[Path]) -> None:
    try:
        canonical = path.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise FdlConfigError(
            "cannot resolve inherit-from target `%s`: %s" % (path, getattr(exc, "strerror", None) or type(exc).__name__),
            files=[declared_by or path], key=INHERIT_KEY if declared_by else "",
            fix="fix the path (relative paths resolve against the declaring file)",
        )
    if not _inside(canonical, roots):
        raise FdlConfigError(
            "inherit-from target `%s` is outside the project (%s), so it was not read: a config must not "
            "pull in other files of the controller, whose content could then appear in errors and logs"
            % (canonical, ", ".join(str(r) for r in roots)),
            files=[declared_by or path], key=INHERIT_KEY if declared_by else "",
            fix="copy the shared settings into the project, or allow that directory explicitly",
        )
    if canonical in stack:
        chain = " -> ".join(str(p) for p in stack + [canonical])
        raise FdlConfigError(
            "inherit-from cycle detected: " + chain, files=[declared_by or path], key=INHERIT_KEY,
            fix="break the cycle by removing one inherit-from",
        )
    stack.append(canonical)
    document = dict(load_document(path) if declared_by is None else _load_parent(path, canonical, declared_by))
    parent = _inherit_target(document.pop(INHERIT_KEY, None), path, canonical)
    if parent is not None:
        _resolve_chain(parent, stack, out, path, roots)
    stack.pop()
    out.append((canonical, document))


def deep_merge(base: Any, overlay: Any) -> Any:
    """Merge ``overlay`` onto ``base`` (neither argument is modified).

    Maps merge recursively with the overlay winning; scalars and lists are
    replaced; a ``None`` value in an overlay map deletes that key.
    """
    if isinstance(base, dict) and isinstance(overlay, dict):
        merged = dict(base)
        for key, value in overlay.items():
            if value is None:
                merged.pop(key, None)
            elif key in merged:
                merged[key] = deep_merge(merged.pop(key), value)
            else:
                merged[key] = value
        return merged
    return overlay


def merge_layers(documents: Sequence[Any]) -> Dict[str, Any]:
    """Fold documents left to right with :func:`deep_merge`."""
    merged: Any = {}
    for index, document in enumerate(documents):
        merged = document if index == 0 else deep_merge(merged, document)
    return merged if isinstance(merged, dict) else {}


def resolve_layers(base: Any, overlay: Optional[Any]) -> List[Tuple[Path, Dict[str, Any]]]:
    """Chain(base) + chain(overlay), de-duplicated by canonical path (first kept)."""
    layers = resolve_chain(base)
    if overlay is not None:
        layers.extend(resolve_chain(overlay))
    seen = set()
    unique = []
    for canonical, document in layers:
        if canonical in seen:
            continue
        seen.add(canonical)
        unique.append((canonical, document))
    return unique


def load_config(project_dir: Any, env: Optional[str] = DEFAULT_ENV) -> FdlConfig:
    """Locate, chain and merge the project's manifest and its ``env`` overlay.

    ``env`` of ``None`` or ``""`` reads the base manifest alone.
    """
    directory = Path(os.path.expanduser(str(project_dir))).absolute()
    base = find_base_manifest(directory)
    overlay = require_overlay(base, env) if env else None
    layers = resolve_layers(base, overlay)
    return FdlConfig(
        project_dir=directory,
        base=base,
        overlay=overlay,
        env=env or None,
        layers=[layer_path for layer_path, layer_doc in layers],
        data=merge_layers([layer_doc for layer_path, layer_doc in layers]),
    )


# --------------------------------------------------------------------------
# Strict check of the merged cluster block
# --------------------------------------------------------------------------


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean (%s)" % json.dumps(value)
    if isinstance(value, int):
        return "an integer (%d)" % value
    if isinstance(value, float):
        return "a number (%r)" % value
    if isinstance(value, str):
        return "a string (%s)" % json.dumps(value)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return "a %s (%r)" % (type(value).__name__, value)


class _Checker:
    """Validation helpers bound to the files being checked."""

    def __init__(self, files: Sequence[Any]) -> None:
        self.files = list(files)

    def fail(self, key: str, problem: str, fix: str = "") -> None:
        raise FdlConfigError(problem, files=self.files, key=key, fix=fix)

    def mapping(self, value: Any, key: str, allowed: Sequence[str]) -> Dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(key, "expected a mapping, got %s" % _kind(value))
        for name in value:
            if name not in allowed:
                self.fail(
                    "%s.%s" % (key, name),
                    "unknown key %s" % json.dumps(str(name)),
                    "remove it or fix its spelling; allowed keys: " + ", ".join(allowed),
                )
        return value

    def required(self, mapping: Dict[str, Any], name: str, key: str, hint: str) -> Any:
        if mapping.get(name) is None:
            self.fail("%s.%s" % (key, name), "required key is missing", hint)
        return mapping[name]

    def string(self, value: Any, key: str) -> None:
        if not isinstance(value, str):
            self.fail(key, "expected a string, got %s" % _kind(value), "quote the value")

    def boolean(self, value: Any, key: str) -> None:
        if not isinstance(value, bool):
            self.fail(key, "expected true or false, got %s" % _kind(value))

    def uint(self, value: Any, key: str, upper: Optional[int] = None) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (upper is not None and value > upper):
            wanted = "an integer in 0..%d" % upper if upper is not None else "a non-negative integer"
            self.fail(key, "expected %s, got %s" % (wanted, _kind(value)))

    def share(self, value: Any, key: str) -> None:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or value < 0:
            self.fail(
                key,
                "must be a non-negative fraction of host RAM (e.g. 0.5), got %s" % _kind(value),
                "use a finite number >= 0 (values above 1.0 are allowed)",
            )

    def env_map(self, value: Any, key: str) -> None:
        if not isinstance(value, dict):
            self.fail(key, "expected a mapping of NAME: \"value\" strings, got %s" % _kind(value))
        for name, item in value.items():
            if not isinstance(name, str):
                self.fail(key, "environment variable names must be strings, got %s" % _kind(name))
            if not isinstance(item, str):
                self.fail(
                    "%s.%s" % (key, name),
                    "environment values must be strings, got %s" % _kind(item),
                    "quote the value, e.g. %s: \"%s\"" % (name, _plain(item)),
                )

    def optional(self, mapping: Dict[str, Any], name: str, key: str, check: Any, *args: Any) -> None:
        value = mapping.get(name)
        if value is not None:
            check(value, "%s.%s" % (key, name), *args)


def _plain(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def worker_label(index: int, worker: Any) -> str:
    """``cluster.workers[i] ("host")`` as fdl-cli names a worker."""
    label = "cluster.workers[%d]" % index
    if isinstance(worker, dict) and isinstance(worker.get("host"), str):
        label += " (%s)" % json.dumps(worker["host"])
    return label


def _check_local_devices(check: _Checker, value: Any, key: str) -> None:
    fix = 'use "all" or a list of GPU indices such as [0, 1]'
    if isinstance(value, str):
        if value != "all":
            check.fail(key, 'expected "all" or a list of GPU indices, got %s' % _kind(value), fix)
        return
    if not isinstance(value, list):
        check.fail(key, 'expected "all" or a list of GPU indices, got %s' % _kind(value), fix)
    if not value:
        check.fail(key, "the list of GPU indices is empty", fix)
    for position, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item <= 255:
            check.fail("%s[%d]" % (key, position), "expected a GPU index in 0..255, got %s" % _kind(item), fix)


def _check_ssh(check: _Checker, value: Any, key: str) -> None:
    ssh = check.mapping(value, key, SSH_KEYS)
    for name in ("target", "user", "identity_file"):
        check.optional(ssh, name, key, check.string)
    check.optional(ssh, "port", key, check.uint, 65535)
    options = ssh.get("options")
    if options is not None:
        if not isinstance(options, list):
            check.fail(key + ".options", "expected a list of Key=Value strings, got %s" % _kind(options))
        for position, item in enumerate(options):
            if not isinstance(item, str):
                check.fail(
                    "%s.options[%d]" % (key, position),
                    "expected a Key=Value string, got %s" % _kind(item),
                    "write each option as a string, e.g. \"ConnectTimeout=5\"",
                )


def _check_worker(check: _Checker, index: int, worker: Any) -> None:
    if not isinstance(worker, dict):
        check.fail("cluster.workers[%d]" % index, "expected a mapping, got %s" % _kind(worker))
    key = worker_label(index, worker)
    if "ranks" in worker:
        check.fail(
            key + ".ranks",
            "declares `ranks:`, which is not user configuration; ranks are computed from probed "
            "device counts at launch",
            "Remove the key.",
        )
    check.mapping(worker, key, WORKER_KEYS)
    check.string(check.required(worker, "host", key, "name the worker's hostname"), key + ".host")
    _check_local_devices(
        check,
        check.required(worker, "local_devices", key, 'set local_devices to "all" or a list of GPU indices'),
        key + ".local_devices",
    )
    check.string(
        check.required(worker, "nccl_socket_ifname", key, "name the NIC NCCL should use, e.g. enp1s0"),
        key + ".nccl_socket_ifname",
    )
    check.string(check.required(worker, "path", key, "set the project checkout path on that host"), key + ".path")
    if worker.get("ssh") is not None:
        _check_ssh(check, worker["ssh"], key + ".ssh")
    check.optional(worker, "tunnel", key, check.boolean)
    for name in ("arch", "data_path", "docker"):
        check.optional(worker, name, key, check.string)
    check.optional(worker, "gpu_ram_share", key, check.share)
    check.optional(worker, "env", key, check.env_map)


def _check_join(check: _Checker, value: Any, key: str) -> None:
    join = check.mapping(value, key, JOIN_KEYS)
    for name in ("min_rank_start", "join_timeout", "target_ranks", "max_join_timeout"):
        check.optional(join, name, key, check.uint)
    for name in ("open_admission", "discovery", "tunnel_only"):
        check.optional(join, name, key, check.boolean)
    check.optional(join, "token", key, check.string)
    start = join.get("start")
    if start is not None and start not in JOIN_START_VALUES:
        check.fail(
            key + ".start",
            "must be one of auto | manual | hybrid, got %s" % _kind(start),
            "use auto, manual or hybrid",
        )


def validate_cluster(cluster: Any, files: Sequence[Any] = ()) -> Dict[str, Any]:
    """Strictly check a merged ``cluster:`` block; return it unchanged.

    Type/shape checks as fdl-cli's strict parse does them (unknown keys at
    every level, required keys, value types), plus the load-time refusals
    of ``ranks:`` and bad ``gpu_ram_share`` values. Semantic checks that
    also apply to hand-written inventories (blank values, reserved env
    keys, ...) are left to the roles.
    """
    check = _Checker(files)
    check.mapping(cluster, "cluster", CLUSTER_KEYS)
    controller = check.required(cluster, "controller", "cluster", "add a controller: block with host and path")
    check.mapping(controller, "cluster.controller", CONTROLLER_KEYS)
    for name, hint in (("host", "the address workers dial"), ("path", "the controller's project root")):
        check.string(check.required(controller, name, "cluster.controller", "set " + hint),
                     "cluster.controller." + name)
    check.optional(controller, "port", "cluster.controller", check.uint, 65535)
    for name in ("docker", "arch", "data_path"):
        check.optional(controller, name, "cluster.controller", check.string)
    if controller.get("join") is not None:
        _check_join(check, controller["join"], "cluster.controller.join")
    if "workers" not in cluster or cluster["workers"] is None:
        check.fail("cluster.workers", "required key is missing", "list the worker hosts under workers:")
    workers = cluster["workers"]
    if not isinstance(workers, list):
        check.fail("cluster.workers", "expected a list of workers, got %s" % _kind(workers))
    for index, worker in enumerate(workers):
        _check_worker(check, index, worker)
    check.optional(cluster, "env", "cluster", check.env_map)
    check.optional(cluster, "gpu_ram_share", "cluster", check.share)
    return cluster


def cluster_block(config: FdlConfig) -> Dict[str, Any]:
    """The validated ``cluster:`` block of a merged configuration."""
    cluster = config.data.get("cluster")
    if cluster is None:
        raise FdlConfigError(
            "no `cluster:` block in the merged configuration",
            files=config.files, key="cluster",
            fix="declare cluster: (controller + workers) in fdl.%s.yml" % (config.env or DEFAULT_ENV),
        )
    return validate_cluster(cluster, config.files)


# --------------------------------------------------------------------------
# The fdl command that fans out
# --------------------------------------------------------------------------


def _dispatches(spec: Any, inherited: bool) -> bool:
    """Whether ``spec`` (or an inline nested command) resolves to cluster: true."""
    if not isinstance(spec, dict):
        return inherited
    own = spec.get("cluster")
    effective = own if isinstance(own, bool) else inherited
    nested = spec.get("commands")
    if isinstance(nested, dict) and nested:
        return effective or any(_dispatches(child, effective) for child in nested.values())
    return effective


def cluster_command(commands: Any) -> Optional[str]:
    """The single top-level command whose ``cluster`` flag resolves to true.

    ``None`` when there is none or more than one (ambiguous).
    """
    if not isinstance(commands, dict):
        return None
    hits = [str(name) for name, spec in commands.items() if _dispatches(spec, False)]
    return hits[0] if len(hits) == 1 else None


def command_dir(name: str, spec: Any, project_dir: Any) -> Optional[str]:
    """The directory of a directory-pointer command, relative to the project.

    Only returned when it is unambiguous: the command has no ``run:`` and
    no preset fields, its directory (``path:`` or ``./<name>/``) lies inside
    the project and holds its own fdl manifest.
    """
    spec = spec if isinstance(spec, dict) else {}
    if spec.get("run") is not None or any(spec.get(k) is not None for k in _PRESET_FIELDS):
        return None
    relative = spec.get("path") if spec.get("path") is not None else name
    if not isinstance(relative, str) or not relative:
        return None
    root = Path(project_dir).absolute()
    target = Path(os.path.normpath(str(root / relative)))
    try:
        inside = target.relative_to(Path(os.path.normpath(str(root))))
    except ValueError:
        return None
    if not any((target / n).is_file() for n in CONFIG_NAMES):
        return None
    text = inside.as_posix()
    return "" if text == "." else text


# --------------------------------------------------------------------------
# Mapping to inventory variables
# --------------------------------------------------------------------------


def identity_for_ansible(identity_file: str, project_dir: Any) -> str:
    """A relative key resolves against the project root; absolute and ``~`` are kept."""
    if identity_file.startswith("/") or identity_file.startswith("~"):
        return identity_file
    return str(Path(project_dir).absolute() / identity_file)


def ssh_common_args(options: Sequence[str]) -> str:
    """``-o K=V`` for each ssh option, each value shell-quoted (Ansible splits with shlex)."""
    return " ".join("-o " + shlex.quote(option) for option in options)


def _copy(value: Any) -> Any:
    return json.loads(json.dumps(value))


def worker_hostvars(worker: Dict[str, Any], project_dir: Any) -> Dict[str, Any]:
    """Host variables of one (validated) worker entry."""
    hostvars: Dict[str, Any] = {}
    for source, variable in _WORKER_VARS:
        if worker.get(source) is not None:
            hostvars[variable] = _copy(worker[source])
    ssh = worker.get("ssh") or {}
    hostvars["ansible_host"] = ssh.get("target") or worker["host"]
    if ssh.get("port") is not None:
        hostvars["ansible_port"] = ssh["port"]
    if ssh.get("user"):
        hostvars["ansible_user"] = ssh["user"]
    if ssh.get("identity_file"):
        hostvars["ansible_ssh_private_key_file"] = identity_for_ansible(ssh["identity_file"], project_dir)
    if ssh.get("options"):
        hostvars["ansible_ssh_common_args"] = ssh_common_args(ssh["options"])
    return hostvars


def inventory_from_cluster(
    cluster: Dict[str, Any],
    project_dir: Any,
    env_name: Optional[str],
    commands: Any = None,
    files: Sequence[Any] = (),
) -> Tuple[List[Tuple[str, Dict[str, Any]]], Dict[str, Any]]:
    """Map a merged ``cluster:`` block to ``(workers, cluster_vars)``.

    ``workers`` is ``[(inventory_hostname, hostvars), ...]`` in rank order;
    ``cluster_vars`` belong on group ``all``. ``commands`` is the merged
    top-level ``commands:`` map, used for ``flodl_cmd``/``flodl_cmd_dir``;
    ``files`` only serve error messages.
    """
    validate_cluster(cluster, files)
    workers: List[Tuple[str, Dict[str, Any]]] = []
    seen: Dict[str, int] = {}
    for index, worker in enumerate(cluster["workers"]):
        name = worker["host"]
        if not name.strip():
            raise FdlConfigError(
                "is blank", files=files, key=worker_label(index, worker) + ".host",
                fix="set the worker's hostname",
            )
        if name in seen:
            raise FdlConfigError(
                "host %s is already used by cluster.workers[%d]; an inventory holds each host once"
                % (json.dumps(name), seen[name]),
                files=files, key=worker_label(index, worker) + ".host",
                fix="list each machine once, with all its GPUs in local_devices",
            )
        seen[name] = index
        workers.append((name, worker_hostvars(worker, project_dir)))

    cluster_vars: Dict[str, Any] = {}
    controller = cluster["controller"]
    for source, variable in _CONTROLLER_VARS:
        if controller.get(source) is not None:
            cluster_vars[variable] = _copy(controller[source])
    if cluster.get("env") is not None:
        cluster_vars["flodl_cluster_env"] = _copy(cluster["env"])
    if cluster.get("gpu_ram_share") is not None:
        cluster_vars["flodl_cluster_gpu_ram_share"] = cluster["gpu_ram_share"]
    if env_name:
        cluster_vars["flodl_fdl_env"] = env_name
    cmd = cluster_command(commands)
    if cmd is not None:
        cluster_vars["flodl_cmd"] = cmd
        directory = command_dir(cmd, commands.get(cmd), project_dir)
        if directory:
            cluster_vars["flodl_cmd_dir"] = directory
    return workers, cluster_vars


def build_inventory(
    project_dir: Any, env: Optional[str] = DEFAULT_ENV
) -> Tuple[List[Tuple[str, Dict[str, Any]]], Dict[str, Any]]:
    """Load, merge, check and map a project in one call."""
    config = load_config(project_dir, env)
    cluster = cluster_block(config)
    return inventory_from_cluster(
        cluster, config.project_dir, config.env, commands=config.data.get("commands"), files=config.files
    )
