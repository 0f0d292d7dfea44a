"""Every plugin and role of the installed collection documents itself; the sample fdl project works."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO_ROOT, run_ansible

MODULES = sorted(p.stem for p in (REPO_ROOT / "plugins" / "modules").glob("*.py") if p.stem != "__init__")
ROLES = sorted(p.name for p in (REPO_ROOT / "roles").iterdir() if (p / "meta" / "argument_specs.yml").exists())
SAMPLE_PROJECT = REPO_ROOT / "examples" / "fdl-project"


def test_every_phase_has_a_module_and_role() -> None:
    # Guards the parametrisation below against an empty glob.
    assert {"topology", "preflight_check", "cargo_prebuild", "launch_env", "run_launcher", "orphan_cleanup"} <= set(MODULES)
    assert ROLES == ["launch", "prebuild", "preflight"]


def _rendered(collection, kind: str, names: list[str]) -> dict[str, str]:
    """One ``ansible-doc -t <kind>`` run for all ``names`` (each costs a second of start-up): each one's text."""
    proc = run_ansible(collection, ["ansible-doc", "-t", kind, *(f"flodl.cluster.{n}" for n in names)])
    assert proc.returncode == 0, proc.stderr
    # Each one's text starts with "> MODULE flodl.cluster.<name> (<path>)" ("> ROLE: *flodl.cluster.<name>*").
    parts = re.split(r"^(?=> )", proc.stdout, flags=re.M)
    found = {n: p for n in names for p in parts if re.match(rf"> \S+ \W*flodl\.cluster\.{n}\b", p)}
    assert sorted(found) == sorted(names), proc.stdout[:2000]
    return found


@pytest.fixture(scope="module")
def module_docs(installed_collection) -> dict[str, str]:
    return _rendered(installed_collection, "module", MODULES)


@pytest.fixture(scope="module")
def role_docs(installed_collection) -> dict[str, str]:
    return _rendered(installed_collection, "role", ROLES)


@pytest.mark.parametrize("name", MODULES)
def test_module_doc_renders(module_docs, name: str) -> None:
    text = module_docs[name]
    assert f"flodl.cluster.{name}" in text
    # DOCUMENTATION, EXAMPLES and RETURN all rendered.
    assert "AUTHOR" in text
    assert "EXAMPLES" in text
    assert "RETURN VALUES" in text


def test_filter_doc_renders(installed_collection) -> None:
    proc = run_ansible(installed_collection, ["ansible-doc", "-t", "filter", "flodl.cluster.hex_to_text"])
    assert proc.returncode == 0, proc.stderr
    assert "hex_to_text" in proc.stdout and "EXAMPLES" in proc.stdout


def test_inventory_doc_renders(installed_collection) -> None:
    proc = run_ansible(installed_collection, ["ansible-doc", "-t", "inventory", "flodl.cluster.fdl_cluster"])
    assert proc.returncode == 0, proc.stderr
    assert "project_dir" in proc.stdout


@pytest.mark.parametrize("role", ROLES)
def test_role_argument_spec_renders(role_docs, role: str) -> None:
    text = role_docs[role]
    assert f"flodl.cluster.{role}" in text
    assert re.search(r"ENTRY POINT: \*?main\*?", text)
    assert "Options (= indicates it is required)" in text


def test_playbooks_are_installed(installed_collection) -> None:
    root = Path(installed_collection.collections_path) / "ansible_collections" / "flodl" / "cluster" / "playbooks"
    assert sorted(p.stem for p in root.glob("*.yml")) == ["cluster_train", "launch", "prebuild", "preflight", "status", "teardown"]


def test_sample_fdl_project_graph_without_a_warning(installed_collection) -> None:
    # docs/inventory.md's quick start, run in the sample project with Ansible's default settings (no
    # ansible.cfg there): the workers in file order, one group per libtorch variant, and nothing on stderr,
    # not even a warning from Ansible's own dependencies.
    proc = run_ansible(installed_collection, ["ansible-inventory", "-i", "cluster.fdl_cluster.yml", "--graph"],
                       cwd=SAMPLE_PROJECT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "@all:",
        "  |--@ungrouped:",
        "  |--@flodl_workers:",
        "  |  |--gpu-a",
        "  |  |--gpu-b",
        "  |  |--gpu-c",
        "  |--@arch_precompiled_cu128:",
        "  |  |--gpu-a",
        "  |--@arch_precompiled_cu126_pt27:",
        "  |  |--gpu-b",
        "  |--@arch_precompiled_rocm63:",
        "  |  |--gpu-c",
    ]
    assert proc.stderr == "", proc.stderr
