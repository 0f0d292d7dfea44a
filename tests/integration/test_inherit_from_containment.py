"""``inherit-from:`` outside the project: refused by ``ansible-inventory``, and not one byte of it shown.

Runs the installed collection's ``flodl.cluster.fdl_cluster`` inventory plugin through the real
``ansible-inventory --list`` (what an AWX inventory sync runs), with an overlay that points at a
controller file holding a fake private key.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_ansible

FAKE_KEY_LINES = [
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
    "QyNTUxOQAAACDflodlFAKEkeyFAKEkeyFAKEkeyFAKEkeyFAKEkeyQAAAJgAAAAAAAAAAAA",
    "-----END OPENSSH PRIVATE KEY-----",
]

BASE = "commands:\n  train:\n    cluster: true\n"


def _project(tmp_path: Path, overlay: str) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "fdl.yml").write_text(BASE)
    (proj / "fdl.cluster.yml").write_text(overlay)
    source = proj / "my.fdl_cluster.yml"
    source.write_text("plugin: flodl.cluster.fdl_cluster\n")
    return source


@pytest.mark.parametrize("how", ["absolute", "dotdot", "symlink"])
def test_outside_parent_is_refused_and_never_echoed(installed_collection, tmp_path, how):
    secret = tmp_path / "controller-home" / "id_ed25519"
    secret.parent.mkdir()
    # Parses as one YAML string: the case that used to be echoed in full.
    secret.write_text("\n".join(FAKE_KEY_LINES) + "\n")
    value = {"absolute": str(secret), "dotdot": "../controller-home/id_ed25519", "symlink": "shared.yml"}[how]
    source = _project(tmp_path, f"inherit-from: {value}\n")
    if how == "symlink":
        (source.parent / "shared.yml").symlink_to(secret)

    proc = run_ansible(installed_collection, ["ansible-inventory", "-i", str(source), "--list"],
                       cwd=source.parent, env={"ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "true"})

    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    for line in FAKE_KEY_LINES:
        for chunk in (line[i:i + 12] for i in range(0, len(line), 12)):
            assert chunk not in output, f"secret fragment {chunk!r} leaked"
    text = " ".join(output.split())
    assert f"inherit-from target `{secret}` is outside the project ({source.parent})" in text
    assert "so it was not read" in text
    assert str(source.parent / "fdl.cluster.yml") in text


def test_inside_parent_that_is_not_a_mapping_reports_type_and_size_only(installed_collection, tmp_path):
    source = _project(tmp_path, "inherit-from: notes.yml\n")
    notes = source.parent / "notes.yml"
    notes.write_text("\n".join(FAKE_KEY_LINES) + "\n")
    proc = run_ansible(installed_collection, ["ansible-inventory", "-i", str(source), "--list"],
                       cwd=source.parent, env={"ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "true"})
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert "BEGIN OPENSSH" not in output and "b3BlbnNzaC1r" not in output
    size = notes.stat().st_size
    assert f"inherit-from target `{notes}` ({size} bytes) is not a mapping at its top level" in " ".join(output.split())
