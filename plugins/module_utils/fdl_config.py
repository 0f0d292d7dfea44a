# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read an fdl project's cluster configuration the way fdl-cli does.

docs/launcher-contract.md §2a-§2e: the base manifest (``fdl.yaml``/``fdl.yml``/
``fdl.json``), an environment overlay ``fdl.<env>.{yaml,yml,json}`` next to
it, ``inherit-from:`` chains on both, a deep merge (maps merge, scalars and
lists replace, ``null`` deletes) and a strict check of the merged
``cluster:`` block. :func:`inventory_from_cluster` maps the result onto the
variables of the public interface (docs/public-interface.md).

Every problem raises :class:`FdlConfigError` whose message names the
file(s), the key path, what was found and how to fix it.

Controller-side helper (used by the ``fdl_cluster`` inventory plugin); it
only needs the standard library plus PyYAML, which ships with ansible-core.
"""
from __future__ import annotations

import json
import math
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ansible_collections.flodl.cluster.plugins.module_utils.fdl_commands import (
    CONFIG_NAMES,
    cluster_command,
    command_dir,
    run_line,
)
from ansible_collections.flodl.cluster.plugins.module_utils.safe_reads import FDL_FILE_MAX, read_capped_text
from ansible_collections.flodl.cluster.plugins.module_utils.serde_json_text import serde_float
from ansible_collections.flodl.cluster.plugins.module_utils.validate import FDL, cluster_problems, kind as _kind

try:
    import yaml
except ImportError:  # pragma: no cover - ansible-core always ships PyYAML
    yaml = None

OVERLAY_EXTENSIONS = ("yaml", "yml", "json")
DEFAULT_ENV = "cluster"
INHERIT_KEY = "inherit-from"

# (fdl worker key, host variable) in docs/public-interface.md order; required ones are
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


class FdlConfigError(Exception):
    """A problem in the fdl configuration, ready to show to an operator.

    ``files`` are the files involved, ``key`` the dotted key path (may be
    empty), ``problem`` what was found and ``fix`` what to do about it.
    """

    def __init__(
        self, problem: str, files: Sequence[Any] = (), key: str = "", fix: str = "",
        problems: Optional[Sequence[str]] = None,
    ) -> None:
        self.files = [str(f) for f in files]
        self.key = key
        self.problem = problem
        self.fix = fix
        self.problems = list(problems) if problems else []
        super().__init__(self._render())

    def _render(self) -> str:
        if self.problems:
            head = " + ".join(self.files) + ": " if self.files else ""
            if len(self.problems) == 1:
                return head + self.problems[0]
            return head + "%d problems:\n  " % len(self.problems) + "\n  ".join(self.problems)
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
    # Accepted-but-odd input worth telling the operator about (e.g. unquoted env values).
    warnings: List[str] = field(default_factory=list)

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

# fdl-cli reads its files with serde_yaml, i.e. YAML 1.2 core-schema typing
# for plain scalars, not PyYAML's YAML 1.1 (where `yes`/`on` are booleans,
# `1e-7` a string and `1:30` the integer 90). The patterns follow
# serde_yaml's own scalar rules: a digit string with a redundant leading
# zero (`010`) stays a string, radix integers take 0x/0o/0b, and floats
# are Rust's `f64` syntax plus `.inf`/`.nan`.
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT = re.compile(r"^(?:[-+]?(?:0|[1-9][0-9]*)|[-+]?0x[0-9a-fA-F]+|[-+]?0o[0-7]+|[-+]?0b[01]+)$")
_FLOAT = re.compile(
    r"^(?:[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+(?=[eE]))(?:[eE][-+]?[0-9]+)?"
    r"|\+?\.(?:inf|Inf|INF)|-\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_U64_MAX = 2 ** 64 - 1
_I64_MIN = -(2 ** 63)
_TAG = "tag:yaml.org,2002:"


def core_int(text: str) -> Any:
    """A scalar :data:`_INT` matched, as serde_yaml reads it (``+`` only before an unsigned value)."""
    negative = text.startswith("-")
    body = text[1:] if text[:1] in "+-" else text
    for prefix, base in (("0x", 16), ("0o", 8), ("0b", 2)):
        if body.startswith(prefix):
            value = int(body[2:], base)
            value = -value if negative else value
            # A radix literal beyond 64 bits is not a number to serde_yaml.
            return value if _I64_MIN <= value <= _U64_MAX else text
    value = int(text)
    if _I64_MIN <= value <= _U64_MAX:
        return value
    return float(value)  # serde_yaml falls back to f64 for a decimal beyond 64 bits


def core_float(text: str) -> Any:
    """A scalar :data:`_FLOAT` matched; one that overflows to infinity stays text, as in serde_yaml."""
    lowered = text.lstrip("+").lower()
    if lowered in (".inf", "-.inf"):
        return -math.inf if lowered.startswith("-") else math.inf
    if lowered == ".nan":
        return math.nan
    value = float(text)
    return value if math.isfinite(value) else text


if yaml is not None:

    class FdlYamlLoader(yaml.SafeLoader):  # type: ignore[misc,name-defined]
        """PyYAML's safe loader with YAML 1.2 core-schema typing and duplicate keys refused."""

        # A fresh table: the inherited one carries the YAML 1.1 resolvers.
        yaml_implicit_resolvers: Dict[str, Any] = {}

        def construct_mapping(self, node: Any, deep: bool = False) -> Dict[Any, Any]:
            # serde_yaml refuses a repeated key; PyYAML would silently keep the last.
            seen = set()
            for key_node, _value_node in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                except TypeError:
                    continue
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark,
                        "found duplicate key %r" % (key,), key_node.start_mark,
                    )
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    def _scalar_with(constructor: Any, node: Any, convert: Any) -> Any:
        return convert(constructor.construct_scalar(node))

    FdlYamlLoader.add_implicit_resolver(_TAG + "null", _NULL, ["~", "n", "N", ""])
    FdlYamlLoader.add_implicit_resolver(_TAG + "bool", _BOOL, list("tTfF"))
    FdlYamlLoader.add_implicit_resolver(_TAG + "int", _INT, list("-+0123456789"))
    FdlYamlLoader.add_implicit_resolver(_TAG + "float", _FLOAT, list("-+.0123456789"))
    FdlYamlLoader.add_constructor(_TAG + "null", lambda c, n: _scalar_with(c, n, lambda t: None))
    FdlYamlLoader.add_constructor(_TAG + "bool", lambda c, n: _scalar_with(c, n, lambda t: t[0] in "tT"))
    FdlYamlLoader.add_constructor(_TAG + "int", lambda c, n: _scalar_with(c, n, core_int))
    FdlYamlLoader.add_constructor(_TAG + "float", lambda c, n: _scalar_with(c, n, core_float))


def parse_yaml(text: str) -> Any:
    """One YAML document read as fdl-cli reads it (see :class:`FdlYamlLoader`)."""
    return yaml.load(text, Loader=FdlYamlLoader)  # noqa: S506  (a SafeLoader subclass)


def load_document(path: Any) -> Dict[str, Any]:
    """Parse one YAML/JSON file into a mapping; an empty file is ``{}``."""
    p = Path(path)
    try:
        # Non-blocking, regular files only, under a cap: a FIFO or a huge file never hangs or fills memory.
        text = read_capped_text(str(p), FDL_FILE_MAX)
    except (OSError, UnicodeDecodeError) as exc:
        raise FdlConfigError("cannot read file: %s" % (getattr(exc, "strerror", None) or exc), files=[p])
    try:
        if p.suffix == ".json":
            value = json.loads(text) if text.strip() else None
        else:
            if yaml is None:  # pragma: no cover
                raise FdlConfigError("PyYAML is not installed", files=[p], fix="install PyYAML")
            value = parse_yaml(text)
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


def scalar_text(value: Any) -> Optional[str]:
    """The string serde_yaml hands a ``String`` field for a non-string scalar, else ``None``.

    fdl-cli re-serialises the merged document and reads it back, so an env
    value written ``8``, ``true`` or ``1.5e3`` arrives as ``"8"``,
    ``"true"``, ``"1500.0"`` (floats in ryu's shortest form).
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return serde_float(value)
    return None


def _stringify_env(env: Any, where: str, files: Sequence[Any], warnings: List[str]) -> None:
    if not isinstance(env, dict):
        return
    for key in list(env):
        text = scalar_text(env[key])
        if text is None:
            continue
        kind = "a boolean" if isinstance(env[key], bool) else "a number"
        env[key] = text
        # The value itself is not echoed: env blocks can hold secrets.
        warnings.append(
            "%s: %s.%s is written as %s, not a string; it is passed as its text, as fdl-cli does "
            "(fix: quote the value so the file says what the command receives)"
            % (" + ".join(str(f) for f in files), where, key, kind)
        )


def stringify_env_values(data: Dict[str, Any], files: Sequence[Any] = ()) -> List[str]:
    """Turn non-string scalars in ``cluster.env`` and ``cluster.workers[].env`` into upstream's strings.

    Works in place on the merged document; returns one warning per value changed.
    """
    warnings: List[str] = []
    cluster = data.get("cluster")
    if not isinstance(cluster, dict):
        return warnings
    _stringify_env(cluster.get("env"), "cluster.env", files, warnings)
    workers = cluster.get("workers")
    if isinstance(workers, list):
        for index, worker in enumerate(workers):
            if isinstance(worker, dict):
                _stringify_env(worker.get("env"), "cluster.workers[%d].env" % index, files, warnings)
    return warnings


def load_config(project_dir: Any, env: Optional[str] = DEFAULT_ENV) -> FdlConfig:
    """Locate, chain and merge the project's manifest and its ``env`` overlay.

    ``env`` of ``None`` or ``""`` reads the base manifest alone. Env values
    written as numbers or booleans become strings (see :func:`scalar_text`)
    and are listed in ``warnings``.
    """
    directory = Path(os.path.expanduser(str(project_dir))).absolute()
    base = find_base_manifest(directory)
    overlay = require_overlay(base, env) if env else None
    layers = resolve_layers(base, overlay)
    files = [layer_path for layer_path, layer_doc in layers]
    data = merge_layers([layer_doc for layer_path, layer_doc in layers])
    warnings = stringify_env_values(data, files)
    return FdlConfig(
        project_dir=directory,
        base=base,
        overlay=overlay,
        env=env or None,
        layers=files,
        data=data,
        warnings=warnings,
    )


# --------------------------------------------------------------------------
# Strict check of the merged cluster block
# --------------------------------------------------------------------------


def validate_cluster(cluster: Any, files: Sequence[Any] = ()) -> Dict[str, Any]:
    """Check a merged ``cluster:`` block with the collection's one validator; return it unchanged.

    Every problem is reported at once, named by fdl key path
    (``cluster.workers[1] ("gpu-b").local_devices``), with the files merged.
    """
    problems = cluster_problems(cluster, FDL)
    if problems:
        raise FdlConfigError(problems[0], files=files, problems=problems)
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
    workers = [(worker["host"], worker_hostvars(worker, project_dir)) for worker in cluster["workers"]]

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
    # The checkout holding fdl.yml: fdl-cli launches and builds natively there.
    cluster_vars["flodl_project_dir"] = str(Path(project_dir).absolute())
    cmd = cluster_command(commands)
    if cmd is not None:
        cluster_vars["flodl_cmd"] = cmd
        spec = commands.get(cmd)
        script = run_line(spec)
        if script is not None:
            # fdl-cli runs a run: script itself (natively, or in the command's own compose service).
            cluster_vars["flodl_cmd_run"] = script
            docker = spec.get("docker")
            cluster_vars["flodl_launch_docker"] = docker if isinstance(docker, str) and docker.strip() else False
        directory = command_dir(cmd, spec, project_dir)
        if directory:
            cluster_vars["flodl_cmd_dir"] = directory
    return workers, cluster_vars


def build_inventory(
    project_dir: Any, env: Optional[str] = DEFAULT_ENV, warnings: Optional[List[str]] = None
) -> Tuple[List[Tuple[str, Dict[str, Any]]], Dict[str, Any]]:
    """Load, merge, check and map a project in one call; loader warnings go to ``warnings`` when given."""
    config = load_config(project_dir, env)
    if warnings is not None:
        warnings.extend(config.warnings)
    cluster = cluster_block(config)
    return inventory_from_cluster(
        cluster, config.project_dir, config.env, commands=config.data.get("commands"), files=config.files
    )
