"""Issue 36: only the reader reads a ``flodl_*`` variable from a task's variables; everything else takes the run.

Every .py under plugins/ is parsed. A read is a ``flodl_*`` key (a string literal, or a module-level constant
holding one) passed to a call that also gets the task's or a host's variables (``var(task_vars, templar, key)``,
``registered(task_vars, KEY)``), to ``.get`` on them, as their subscript, or tested with ``in``. A message or a
docstring that names a variable is no read.
"""
from __future__ import annotations

import ast
import collections.abc
import dataclasses
import re
import typing
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.model import Cluster, cluster_model
from ansible_collections.flodl.cluster.plugins.module_utils._run.run_model import Run, RunSettings

PLUGINS = Path(__file__).resolve().parents[5] / "plugins"

# The reader: it reads the run's variables once, validates them and fills the RunContext.
READER = {
    "plugin_utils/_run/run_reader.py",
    "plugin_utils/_run/run_rules.py",
    "plugin_utils/_run/context.py",
    "plugin_utils/_run/task_vars.py",
    "plugin_utils/_run/run_handoff.py",
    "plugin_utils/_run/vault_values.py",
    "plugin_utils/_run/run_settings.py",
    # Builds the cluster from each worker's inventory variables; only the reader calls it (with those variables).
    "module_utils/_cluster/topology.py",
    # A worker's own ``flodl_ssh`` block, from the variables the reader hands it.
    "module_utils/_ssh/sshargs.py",
    # The knobs' rules, which the reader applies to the values it read.
    "module_utils/_run/knobs.py",
}

# (file, variable) reads not moved to the reader yet. This list may only shrink: a stale entry fails too.
ALLOWED = {
    # launch_env looks at the earlier steps' registered results (not settings of the run: what a task returned).
    ("action/launch_env.py", "flodl_launch_env"),
    ("action/launch_env.py", "flodl_preflight_run"),
    ("action/launch_env.py", "flodl_prebuild_run"),
    ("action/orphan_cleanup.py", "flodl_prebuild_run"),
    ("plugin_utils/_launch/orphans.py", "flodl_prebuild_run"),
}

_SOURCE = re.compile(r"task_vars|hostvars|host_vars")
# The reader's helpers that read a knob from task_vars themselves (the reader calls them before the run exists).
_HELPERS = {"walks_in": "flodl_launch_mode", "run_lock_enabled": "flodl_run_lock", "run_lock_ttl": "flodl_run_lock_ttl"}


def _files() -> list[Path]:
    return sorted(p for p in PLUGINS.rglob("*.py") if "__pycache__" not in p.parts)


@lru_cache(maxsize=None)
def _tree(path: Path) -> ast.Module:
    """Each file parsed once per session (the checks only read the trees)."""
    return ast.parse(path.read_text(encoding="utf-8"))


def _constants() -> dict[str, str]:
    """Module-level ``NAME = "flodl_..."`` anywhere under plugins/ (a key may be imported from another file)."""
    found: dict[str, str] = {}
    for path in _files():
        for node in _tree(path).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str) and node.value.value.startswith("flodl_"):
                found.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})
    return found


def _key(node: ast.AST, constants: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("flodl_"):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.Attribute):
        return constants.get(node.attr)
    return None


def _source(node: ast.AST) -> bool:
    """The task's or a host's variables; not ``groups`` (the inventory's group names, e.g. flodl_workers)."""
    text = ast.unparse(node)
    return bool(_SOURCE.search(text)) and "groups" not in text


def _reads(tree: ast.AST, constants: dict[str, str]) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        keys: list[str | None] = []
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "get" and _source(func.value) and node.args:
                keys.append(_key(node.args[0], constants))
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            args = [*node.args, *(k.value for k in node.keywords)]
            if any(isinstance(a, (ast.Name, ast.Attribute)) and _source(a) for a in args):
                keys += [_HELPERS.get(name), *(_key(a, constants) for a in args)]
        elif isinstance(node, ast.Subscript) and _source(node.value):
            keys.append(_key(node.slice, constants))
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) \
                and any(_source(c) for c in node.comparators):
            keys.append(_key(node.left, constants))
        found.update(k for k in keys if k)
    return found


@lru_cache(maxsize=None)
def _all_reads() -> frozenset[tuple[str, str]]:
    """Computed once for both tests below (the tree is the same for both)."""
    constants = _constants()
    found: set[tuple[str, str]] = set()
    for path in _files():
        rel = str(path.relative_to(PLUGINS))
        if rel not in READER:
            found.update((rel, key) for key in _reads(_tree(path), constants))
    return frozenset(found)


def test_no_module_outside_the_reader_reads_a_flodl_variable() -> None:
    extra = sorted(_all_reads() - ALLOWED)
    assert not extra, "a flodl_* variable read outside the reader (read it there, into the RunContext):\n" + \
        "\n".join(f"  {path}: {key}" for path, key in extra)


def test_the_allowlist_only_shrinks() -> None:
    stale = sorted(ALLOWED - _all_reads())
    assert not stale, "no longer read there: drop from ALLOWED:\n" + "\n".join(f"  {p}: {k}" for p, k in stale)


def test_the_check_sees_each_way_of_reading() -> None:
    code = '''
KEY = "flodl_b"
var(task_vars, templar, "flodl_a")
registered(task_vars, KEY)
task_vars.get("flodl_c")
task_vars["flodl_d"]
hostvars[name].get("flodl_e")
"flodl_f" in task_vars
display("set flodl_g")
other.get("flodl_h")
(task_vars.get("groups") or {}).get("flodl_workers")
walks_in(task_vars, templar, phases)
ctx.settings.walks_in(phases)
'''
    tree = ast.parse(code)
    found = _reads(tree, {"KEY": "flodl_b"})
    assert found == {"flodl_a", "flodl_b", "flodl_c", "flodl_d", "flodl_e", "flodl_f", "flodl_launch_mode"}


def _untyped(hint: Any, where: str, seen: set[type]) -> list[str]:
    """Where ``hint`` (a field's type) leaves a value untyped: ``Any``, or a bare dict, list or mapping."""
    if hint is Any:
        return [where]
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if hint in seen:
            return []
        seen.add(hint)
        hints = typing.get_type_hints(hint)
        return [bad for f in dataclasses.fields(hint) if f.compare
                for bad in _untyped(hints[f.name], f"{where}.{f.name}", seen)]
    origin = typing.get_origin(hint)
    if hint in (dict, list, tuple, Mapping, collections.abc.Sequence, object):
        return [where]  # no element types
    if origin is typing.Literal:
        return []
    return [bad for arg in typing.get_args(hint) if arg is not Ellipsis for bad in _untyped(arg, where, seen)]


def test_the_run_is_fully_typed() -> None:
    """Issue 36: every field of the run's model is typed, the cluster's included (no dict[str, Any]).

    Fields left out of comparison (``trace``, ``handoff``, ``vaulted``) are no part of the model: a step's own
    account of how it got it, the plain data it hands on, the vault ciphertexts.
    """
    assert _untyped(Run, "Run", set()) == []
    assert typing.get_type_hints(Run)["cluster"] is Cluster
    assert _untyped(dict[str, Any], "x", set()) == ["x"] and _untyped(Mapping, "m", set()) == ["m"]  # it does catch


def _mutable(hint: Any, where: str, seen: set[type]) -> list[str]:
    """Where ``hint`` lets a step change the run in place: a list, dict or set (tuples and Mappings are read-only)."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if hint in seen:
            return []
        seen.add(hint)
        hints = typing.get_type_hints(hint)
        return [bad for f in dataclasses.fields(hint) for bad in _mutable(hints[f.name], f"{where}.{f.name}", seen)]
    if typing.get_origin(hint) in (list, dict, set) or hint in (list, dict, set):
        return [where]
    return [bad for arg in typing.get_args(hint) if arg is not Ellipsis for bad in _mutable(arg, where, seen)]


def test_the_run_is_read_only_all_the_way_down() -> None:
    """Issue 36: no step can change the run for the next one, not even a list or a map inside it."""
    assert _mutable(Run, "Run", set()) == []
    assert _mutable(dict[str, int], "x", set()) == ["x"] and _mutable(tuple[list[int], ...], "t", set()) == ["t"]
    cluster = cluster_model({"controller": {"host": "10.0.0.1", "path": "/p"},
                             "workers": [{"host": "gpu-b", "path": "/p", "local_devices": [0]}]})
    # Built from lists and dicts, as the reader and the handoff build it: kept as read-only copies.
    run = Run(cluster=cluster, controller_identity="c", prebuild=False, net_timeout_scale=None, cmd=None, cmd_dir="",
              fdl_env=None, build_host="c", launch_command=None, play_hosts=["gpu-b"], inventory_names={"gpu-b": "b"},
              ansible_only={}, warnings=["w"], settings=RunSettings(prebuild_env={"K": "v"}),
              trace={"source": "built"}, vaulted={"p": "c"}, handoff={"context": {"play_hosts": ["gpu-b"]}})
    for change in (lambda: run.inventory_names.__setitem__("x", "y"), lambda: run.settings.prebuild_env.pop("K"),
                   lambda: run.vaulted.setdefault("x", "y"), lambda: run.trace.update(x=1),
                   lambda: run.handoff["context"]["play_hosts"].append("x")):
        with pytest.raises((TypeError, AttributeError)):
            change()
    assert run.play_hosts == ("gpu-b",) and run.warnings == ("w",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.play_hosts = ()  # type: ignore[misc]
