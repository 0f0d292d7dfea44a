"""cluster_train validates every worker once against the union of its three roles' argument specs (issue 12)."""
from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[4]
KEEP = ("type", "required", "choices", "elements", "default", "options", "no_log", "aliases")


def _strip(spec: dict) -> dict:
    out = {k: v for k, v in spec.items() if k in KEEP}
    if "options" in out:
        out["options"] = {k: _strip(v) for k, v in out["options"].items()}
    return out


def _union() -> dict:
    union: dict = {}
    for role in ("preflight", "prebuild", "launch"):
        options = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())[
            "argument_specs"]["main"]["options"]
        for name, spec in options.items():
            if name in union:
                if spec.get("required"):  # cluster_train runs every role: required by one is required
                    union[name]["required"] = True
                continue
            union[name] = _strip(spec)
    return union


def test_the_one_validation_task_is_the_union_of_the_roles_specs_and_the_roles_skip_theirs():
    play = yaml.safe_load((REPO / "playbooks" / "cluster_train.yml").read_text())[0]
    first = play["tasks"][0]
    assert first["ansible.builtin.validate_argument_spec"]["argument_spec"] == _union()
    imports = [t for t in play["tasks"] if "ansible.builtin.import_role" in t]
    assert [t["ansible.builtin.import_role"]["name"] for t in imports] == [
        "flodl.cluster.preflight", "flodl.cluster.prebuild", "flodl.cluster.launch"]
    assert all(t["ansible.builtin.import_role"]["rolespec_validate"] is False for t in imports)
