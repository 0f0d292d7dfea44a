# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The house: wings by concern, imports that only run downhill, one definition per shared name, a true map.

Read from the source with ``ast`` (nothing is imported but the entry points a wing names).
"""
from __future__ import annotations

import ast
import importlib
import re
from functools import lru_cache
from pathlib import Path

import pytest

PLUGINS = Path(__file__).resolve().parents[3] / "plugins"
DOC = PLUGINS.parent / "docs" / "architecture.md"
PREFIX = "ansible_collections.flodl.cluster.plugins."
MAX_FILES = 12  # "about 12" per folder: every .py file, the wing's face (__init__.py) included

# Lower numbers are foundations. An import may go to its own wing or to a lower level, never up; the phase
# wings of one level never import each other, and a wing of one phase never imports one of another phase.
LEVELS = {
    "module_utils/_core": 0,
    "module_utils/_files": 1,
    "module_utils/_ssh": 2,
    "module_utils/_cluster": 2,
    "module_utils/_fdl": 3,
    "module_utils/_run": 4,
    "module_utils/_probe": 5,
    "module_utils/_preflight": 6,
    "module_utils/_prebuild": 6,
    "module_utils/_launch": 6,
    "module_utils/_walk_in": 7,
    "plugin_utils/_proc": 8,
    "plugin_utils/_run": 9,
    "plugin_utils/_host": 10,
    "plugin_utils/_preflight": 11,
    "plugin_utils/_launch": 11,
    "plugin_utils/_walk_in": 12,
}
# The phase of each phase wing: the walk-in is a mode of the launch, a level above it (it builds on its plans).
PHASES = {"_preflight": "preflight", "_prebuild": "prebuild", "_launch": "launch", "_walk_in": "launch"}
STEPS = ("action", "modules", "inventory", "filter")


def _unit(path: Path) -> str:
    """``module_utils/_launch`` for a wing file, ``action`` for an action."""
    parts = path.relative_to(PLUGINS).parts
    return "/".join(parts[:2]) if parts[0] in ("module_utils", "plugin_utils") else parts[0]


def _phase(unit: str) -> str | None:
    """The phase a wing belongs to (``launch`` for ``plugin_utils/_walk_in``), None for a shared wing."""
    return PHASES.get(unit.rsplit("/", 1)[-1]) if unit.startswith(("module_utils/", "plugin_utils/")) else None


def _module_file(module: str) -> Path | None:
    rel = module[len(PREFIX):].replace(".", "/")
    for candidate in (PLUGINS / f"{rel}.py", PLUGINS / rel / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _import_nodes(tree: ast.Module, eager: bool) -> list[ast.ImportFrom]:
    """Every ``from`` import, or with ``eager`` only those run when the module loads (not in a function, not
    under ``TYPE_CHECKING``)."""
    if not eager:
        return [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    found: list[ast.ImportFrom] = []
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.dump(node.test):
            todo.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            todo.extend(node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body])
    return found


# Each file is read and parsed once per session (the tests only read the trees).
@lru_cache(maxsize=None)
def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def _tree(path: Path) -> ast.Module:
    return ast.parse(_text(path))


@lru_cache(maxsize=None)
def _imports(path: Path, eager: bool = False) -> tuple[Path, ...]:
    """The collection's files this file imports (``from X import name`` counts ``X/name.py`` when it exists)."""
    found: list[Path] = []
    for node in _import_nodes(_tree(path), eager):
        if not (node.module or "").startswith(PREFIX):
            continue
        for alias in node.names:
            sub = _module_file(f"{node.module}.{alias.name}")
            target = sub or _module_file(node.module)
            if target is not None and target not in found:
                found.append(target)
    return tuple(found)


def _files() -> list[Path]:
    return sorted(p for p in PLUGINS.rglob("*.py") if "__pycache__" not in p.parts)


def _closure(start: Path, eager: bool = False) -> set[Path]:
    seen: set[Path] = set()
    todo = [start]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        todo.extend(_imports(path, eager))
    return seen


def test_no_folder_holds_more_than_about_twelve_files() -> None:
    for folder in {p.parent for p in _files()}:
        count = len(list(folder.glob("*.py")))
        assert count <= MAX_FILES, (f"{folder.relative_to(PLUGINS)} holds {count} .py files, __init__.py included "
                                    f"(at most {MAX_FILES}): split it into wings")


def test_every_wing_is_known_and_has_a_face() -> None:
    wings = {_unit(p) for p in _files() if p.relative_to(PLUGINS).parts[0] in ("module_utils", "plugin_utils")}
    wings.discard("plugin_utils/__init__.py")
    assert wings == set(LEVELS), "a wing was added or removed: give it a level here and a table in the doc"
    for wing in wings:
        doc = ast.get_docstring(_tree(PLUGINS / wing / "__init__.py")) or ""
        entries = re.findall(r"^- ``(\w+)\.(\w+)``", doc.split("Entry points:", 1)[-1], re.M)
        assert "Entry points:" in doc and entries, f"{wing}/__init__.py names no entry points"
        for module, name in entries:
            loaded = importlib.import_module(f"{PREFIX}{wing.replace('/', '.')}.{module}")
            assert hasattr(loaded, name), f"{wing}/__init__.py names {module}.{name}, which does not exist"


def test_imports_run_downhill_and_never_sideways_between_phases() -> None:
    wrong = []
    for path in _files():
        src = _unit(path)
        for target in _imports(path):
            dst = _unit(target)
            if dst == src or src in STEPS:
                continue
            if src == "plugin_utils/__init__.py" or dst not in LEVELS:
                wrong.append(f"{path.relative_to(PLUGINS)} -> {target.relative_to(PLUGINS)} (not a wing)")
                continue
            uphill = LEVELS[dst] > LEVELS[src]
            sideways = LEVELS[dst] == LEVELS[src] and _phase(dst) is not None
            other_phase = None not in (_phase(src), _phase(dst)) and _phase(src) != _phase(dst)
            if uphill or sideways or other_phase:
                wrong.append(f"{path.relative_to(PLUGINS)} -> {target.relative_to(PLUGINS)}")
    assert not wrong, "imports against the layering (docs/architecture.md):\n" + "\n".join(wrong)


def test_the_map_names_every_file() -> None:
    doc = DOC.read_text(encoding="utf-8")
    missing = [str(p.relative_to(PLUGINS)) for p in _files()
               if p.name != "__init__.py" and str(p.relative_to(PLUGINS)) not in doc]
    assert not missing, f"docs/architecture.md does not name: {', '.join(missing)}"


@pytest.mark.parametrize("pattern", [
    r"^WORKERS_GROUP = ",
    r"^ENV_NET_TIMEOUT_SCALE = ",
    r"^CONTAINER_ROOT = ",
    r"^LIBTORCH_CPU_REL = |libtorch/precompiled/cpu\"$",
    r"^def _?blank\(",
    r"^def host_key_failure\(",
    r"^STATUS_ERROR = ",
    r"^MARK_DIR = ",
    r"^MARK_READ = ",
    r"__FLODL_DP_DIR__",
    r"__FLODL_DP_READ__",
])
def test_a_shared_name_is_defined_once(pattern: str) -> None:
    where = [f"{p.relative_to(PLUGINS)}:{n}" for p in _files()
             for n, line in enumerate(_text(p).splitlines(), 1) if re.search(pattern, line)]
    assert len(where) == 1, f"{pattern!r} is defined {len(where)} times: {where}"


def _sizes(eager: bool) -> dict[str, tuple[int, int]]:
    sizes = {}
    for step in sorted((PLUGINS / "action").glob("*.py")):
        closure = {p for p in _closure(step, eager) - {step} if p.name != "__init__.py"}
        sizes[step.stem] = (len(closure), sum(len(_text(p).splitlines()) for p in closure))
    return sizes


def test_each_steps_import_closure(capsys: pytest.CaptureFixture[str]) -> None:
    """Printed for the record; each step pays its eager closure in ansible-playbook before any fork, and the
    rest only on the path that needs it (the preflight of a run without a launch never loads the launch side)."""
    eager, every = _sizes(True), _sizes(False)
    with capsys.disabled():
        print("\nimport closure per step, files/lines, eager (all paths):",
              ", ".join(f"{k} {n}/{lines} ({every[k][0]}/{every[k][1]})" for k, (n, lines) in eager.items()))
    # Measured before the wings (ce1fc20): preflight_check imported 66 files.
    assert eager["preflight_check"][0] < 66
    assert eager["walk_in_agent"][0] < eager["run_launcher"][0]


ANSIBLE_INTERNALS = {"_ds", "_get_parent_attribute", "_resolve_option_variables"}
INTERNALS_HOME = ("plugin_utils/_run/connection.py", {"_written_connection", "_option_vars"})


def test_ansible_internals_stay_behind_their_two_functions() -> None:
    """Where no public Ansible API exists (a connection's resolved options), one function reads the internal."""
    wrong = []
    for path in _files():
        rel = str(path.relative_to(PLUGINS))
        # One walk, each node with its owner: the outermost function it is in (or is), None at module level.
        todo: list[tuple[ast.AST, str | None]] = [(_tree(path), None)]
        while todo:
            node, owner = todo.pop()
            if owner is None and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                owner = node.name
            todo.extend((child, owner) for child in ast.iter_child_nodes(node))
            name = node.attr if isinstance(node, ast.Attribute) else node.value if isinstance(node, ast.Constant) else None
            if name in ANSIBLE_INTERNALS and (rel, owner) not in {(INTERNALS_HOME[0], f) for f in INTERNALS_HOME[1]}:
                wrong.append(f"{rel}:{node.lineno} {name}")
    assert not wrong, f"Ansible internals read outside {INTERNALS_HOME}: {wrong}"


def test_the_vendor_pair_is_one_type() -> None:
    """GPU counts are a ``GpuCounts`` (module_utils/_cluster/variants.py); no other file spells the pair out."""
    home = PLUGINS / "module_utils" / "_cluster" / "variants.py"
    where = [f"{p.relative_to(PLUGINS)}:{n}" for p in _files() if p.parent.name != "modules" and p != home
             for n, line in enumerate(_text(p).splitlines(), 1)
             if re.search(r"[\"']nvidia[\"']", line) and re.search(r"[\"']amd[\"']", line)
             or re.search(r"tuple\[int, int\]", line) and "gpu" in line.lower()]
    assert not where, f"the (nvidia, amd) pair spelled out instead of GpuCounts: {where}"
