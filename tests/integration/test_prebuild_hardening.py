"""cargo_prebuild, hardened: a planted log symlink is refused, a hanging build is killed at its timeout.

Drives the installed collection's ``flodl.cluster.cargo_prebuild`` module from a one-task playbook
with real cargo on a tiny zero-dependency crate made here.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from conftest import need, run_ansible
from play_output import RECORD_MARK, recorded

CARGO = shutil.which("cargo") or "/root/.cargo/bin/cargo"

PLAYBOOK = """\
- name: One cargo_prebuild call
  hosts: localhost
  gather_facts: false
  vars:
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  tasks:
    - name: Build
      block:
        - name: Build the binaries
          flodl.cluster.cargo_prebuild:
            project_root: "{{ project }}"
            cmd: train
            dedupe: false
            build_timeout: "{{ build_timeout }}"
            env: "{{ build_env }}"
            workers: "{{ workers }}"
          register: build
      always:
        - name: Keep the result
          ansible.builtin.debug:
            msg: '""" + RECORD_MARK + """ {{ build | to_json | b64encode }}'
"""

BUILD_RS = """\
fn main() {
    if let Ok(path) = std::env::var("FLODL_TEST_PIDFILE") {
        std::fs::write(path, std::process::id().to_string()).unwrap();
        std::thread::sleep(std::time::Duration::from_secs(600));
    }
}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    need(Path(CARGO).exists(), f"cargo not found ({CARGO})")
    proj = tmp_path / "proj"
    (proj / "src").mkdir(parents=True)
    (proj / "libtorch" / "precompiled" / "cpu" / "lib").mkdir(parents=True)
    (proj / "Cargo.toml").write_text(
        '[package]\nname = "train"\nversion = "0.1.0"\nedition = "2021"\nbuild = "build.rs"\n'
    )
    (proj / "build.rs").write_text(BUILD_RS)
    (proj / "src" / "main.rs").write_text('fn main() { println!("ok"); }\n')
    return proj


def _run(collection, tmp_path: Path, project: Path, *, hosts: list[str], timeout: float, env: dict[str, str]):
    play = tmp_path / "play.yml"
    play.write_text(PLAYBOOK)
    extra = {
        "project": str(project),
        "build_timeout": timeout,
        "build_env": env,
        "workers": [{"host": h, "path": str(project), "arch": "precompiled/cpu"} for h in hosts],
    }
    (tmp_path / "vars.json").write_text(json.dumps(extra))
    start = time.monotonic()
    proc = run_ansible(collection, ["ansible-playbook", "-i", "localhost,", "-c", "local", str(play),
                                    "-e", f"@{tmp_path / 'vars.json'}"], cwd=tmp_path, timeout=600)
    return proc, recorded(proc.stdout), time.monotonic() - start


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().split(") ", 1)[1].startswith("Z")
    except FileNotFoundError:
        return True


def test_planted_log_symlink_is_refused_and_a_hanging_build_times_out(installed_collection, tmp_path, project):
    # A root-only file another user of the project would like root to overwrite.
    victim = tmp_path / "shadow"
    victim.write_text("root only\n")
    os.chmod(victim, 0o600)
    h1_target = project / "target" / "cluster" / "h1" / "precompiled-cpu"
    h1_target.mkdir(parents=True)
    (h1_target / "prebuild.log").symlink_to(victim)
    pidfile = tmp_path / "build-script.pid"

    proc, result, seconds = _run(installed_collection, tmp_path, project, hosts=["h1", "h2"], timeout=20,
                                 env={"FLODL_TEST_PIDFILE": str(pidfile)})

    assert proc.returncode != 0
    assert result["failed_hosts"] == ["h1", "h2"]
    msg = result["msg"]
    # h1: refused before anything ran, the link's target untouched.
    assert f"{h1_target / 'prebuild.log'} is a symbolic link; refusing to write through it" in msg
    assert victim.read_text() == "root only\n"
    assert (victim.stat().st_mode & 0o777) == 0o600
    assert os.path.islink(h1_target / "prebuild.log")
    # h2: its build script hung; killed at 20 s (+10 s grace at most), reported like any build failure.
    assert "build timed out after 20 s" in msg
    h2 = result["hosts"]["h2"]
    assert h2["status"] == "failed" and h2["rc"] is None
    assert 19 <= h2["seconds"] < 35, h2["seconds"]
    assert seconds < 120
    # The whole process group went, including the sleeping build script (not just sh).
    pid = int(pidfile.read_text())
    assert _gone(pid), f"build script {pid} still running"
    # Its log exists, is not world-readable and records the timeout.
    log = project / "target" / "cluster" / "h2" / "precompiled-cpu" / "prebuild.log"
    assert (log.stat().st_mode & 0o007) == 0
    assert "build timed out after 20 s" in log.read_text()


def test_a_normal_build_still_succeeds_with_a_private_log(installed_collection, tmp_path, project):
    proc, result, dummy = _run(installed_collection, tmp_path, project, hosts=["h1"], timeout=600, env={})
    assert proc.returncode == 0, proc.stdout
    assert result["hosts"]["h1"]["status"] == "built"
    log = project / "target" / "cluster" / "h1" / "precompiled-cpu" / "prebuild.log"
    assert (log.stat().st_mode & 0o777) == 0o640
    envelope = project / "target" / "cluster" / "prebuild-envelope.json"
    assert json.loads(envelope.read_text())["h1"]["bin"] == "target/cluster/h1/precompiled-cpu/release/train"
    assert [p.name for p in envelope.parent.iterdir() if p.name.startswith(".")] == []
