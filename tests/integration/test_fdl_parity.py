"""fdl-cli parity through the play, on exact bytes (issue 20; issue 17's checkout root).

- A ``run:`` command of an fdl project, launched in its compose service, gets fdl-cli's ``run:``
  argv (E11: no ``FDL_PROJECT_ROOT``, no ``cd``, nothing appended), and the controller's own worker
  keeps its declared ``ssh:`` block in both topology variables (E12). Read through the
  ``flodl.cluster.fdl_cluster`` inventory plugin and a real ``docker compose run``.
- With ``controller.path`` a different directory from the checkout, the native prebuild builds in the
  checkout and the launch runs there (fdl-cli's roots); a ``target`` link out of the checkout is refused.

No worker is contacted here (explicit device lists, prebuild off or local builds only).
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import textwrap
from pathlib import Path

import yaml

from conftest import run_ansible
from play_output import failed_in_recap

PLAYBOOKS = "flodl.cluster"
RUN_LINE = "env | sort > /workspace/rec.txt; printf '%s\\n' \"it's run\" > /workspace/said.txt"

RECORDER = textwrap.dedent(
    """\
    import json, os, sys
    with open(sys.argv[1], "w") as fh:
        json.dump({"env": dict(os.environ), "cwd": os.getcwd()}, fh)
    """
)


def fdl_project(project: Path, *, run_line: str, docker: str) -> Path:
    (project / "fdl.yml").write_text(yaml.safe_dump({
        "description": "parity project",
        "commands": {"train": {"run": run_line, "docker": docker, "cluster": True}},
    }, sort_keys=False))
    (project / "fdl.cluster.yml").write_text(yaml.safe_dump({"cluster": {
        "controller": {"host": "10.77.0.1", "path": str(project)},
        "workers": [
            {"host": "ctl-box", "local_devices": [0], "nccl_socket_ifname": "lo", "path": str(project),
             "ssh": {"identity_file": ".ssh/rel_key"}},
            {"host": "10.77.0.12", "local_devices": [0], "nccl_socket_ifname": "lo", "path": str(project),
             "ssh": {"identity_file": ".ssh/w_key"}},
        ],
    }}, sort_keys=False))
    source = project / "cluster.fdl_cluster.yml"
    source.write_text("plugin: flodl.cluster.fdl_cluster\n")
    return source


def test_a_run_command_launches_in_its_service_with_fdl_clis_argv(installed_collection, docker_engine,
                                                                  demo_project):
    project = demo_project()
    source = fdl_project(project, run_line=RUN_LINE, docker="dev")
    proc = run_ansible(installed_collection, [
        "ansible-playbook", "-i", str(source), f"{PLAYBOOKS}.launch", "-e", "flodl_prebuild=false"],
        cwd=project, env={"FLODL_HOST_NAME": "ctl-box"})
    assert proc.returncode == 0
    overlay = project / ".fdl-cluster-overlay.yml"
    expected = (f"docker compose -f docker-compose.yml -f {overlay} run --rm -e FLODL_TESTING_CLUSTER_JSON dev "
                "bash -c 'env | sort > /workspace/rec.txt; printf '\\''%s\\n'\\'' \"it'\\''s run\" > /workspace/said.txt'")
    assert shlex.split(expected)[-1] == RUN_LINE
    assert f"command : {expected}" in proc.stdout
    assert (project / "said.txt").read_text() == "it's run\n"  # the line reached bash exactly as written
    env = dict(line.split("=", 1) for line in (project / "rec.txt").read_text().splitlines() if "=" in line)
    assert "FDL_PROJECT_ROOT" not in env
    full = json.loads(bytes.fromhex(env["FLODL_INTERNAL_FULL_CLUSTER_JSON"]))
    testing = json.loads(bytes.fromhex(env["FLODL_TESTING_CLUSTER_JSON"]))
    # E12: the own worker's block stays, rewritten as the container sees the project (as for any worker) ...
    # (the remote worker also gets the launcher's connect bound; the own box is never reached over ssh)
    assert [w.get("ssh") for w in full["workers"]] == [
        {"identity_file": "/workspace/.ssh/rel_key"},
        {"identity_file": "/workspace/.ssh/w_key", "options": ["ConnectTimeout=10"]}]
    # ... and as declared in the testing JSON, as every worker there
    assert [w.get("ssh") for w in testing["workers"]] == [
        {"identity_file": ".ssh/rel_key"}, {"identity_file": ".ssh/w_key"}]
    assert env["FLODL_INTERNAL_FDL_CMD"] == "train"


def _split_roots(project: Path, tmp_path: Path) -> Path:
    """A controller.path that is another directory than the checkout, holding only the libtorch variants."""
    view = tmp_path / "controller-view"
    view.mkdir()
    shutil.copytree(project / "libtorch", view / "libtorch", symlinks=True)
    return view


def _inventory(tmp_path: Path, project: Path, view: Path) -> Path:
    workers = {
        "h0": {"flodl_host": "ctl", "flodl_path": str(project), "flodl_local_devices": [0],
               "flodl_nccl_socket_ifname": "lo"},
        "h1": {"flodl_path": str(project), "flodl_local_devices": [0], "flodl_nccl_socket_ifname": "lo",
               "flodl_arch": "precompiled/cu128"},
    }
    inventory = {"all": {
        "vars": {"flodl_controller_host": "127.0.0.1", "flodl_controller_path": str(view),
                 "flodl_project_dir": str(project), "flodl_cmd": "train",
                 "flodl_launch_command": f"python3 record.py {tmp_path / 'launch.json'}"},
        "children": {"flodl_workers": {"hosts": workers}},
    }}
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return path


PHASES = """\
- name: Prebuild and launch (the workers are not contacted)
  hosts: flodl_workers
  gather_facts: false
  tasks:
    - name: Prebuild
      ansible.builtin.import_role:
        name: flodl.cluster.prebuild
    - name: Launch
      ansible.builtin.import_role:
        name: flodl.cluster.launch
"""


def test_a_checkout_apart_from_controller_path_builds_and_launches_there(installed_collection, demo_project,
                                                                         tmp_path):
    project = demo_project()
    (project / "record.py").write_text(RECORDER)
    view = _split_roots(project, tmp_path)
    inventory = _inventory(tmp_path, project, view)
    play = tmp_path / "phases.yml"
    play.write_text(PHASES)
    proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inventory), str(play)],
                       env={"FLODL_HOST_NAME": "ctl"}, timeout=900)
    assert proc.returncode == 0 and failed_in_recap(proc.stdout) == []
    binary = project / "target/cluster/h1/precompiled-cu128/release/train"
    assert binary.is_file()
    assert not (view / "target").exists()  # nothing of the build lands under controller.path
    envelope = (project / "target/cluster/prebuild-envelope.json").read_text()
    launched = json.loads((tmp_path / "launch.json").read_text())
    assert launched["cwd"] == str(project)
    assert launched["env"]["FLODL_INTERNAL_PREBUILD_PER_HOST"] == envelope
    # the build's variant comes from controller.path, as fdl-cli takes it; the worker loads its own copy
    log = (project / "target/cluster/h1/precompiled-cu128/prebuild.log").read_text()
    assert f"# env: LIBTORCH_PATH={view}/libtorch/precompiled/cu128\n" in log
    assert json.loads(envelope)["h1"]["ld_library_path"] == f"{project}/libtorch/precompiled/cu128/lib"

    # a real link out of the checkout is still refused, and nothing is built through it
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(project / "target")
    os.symlink(outside, project / "target")
    again = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inventory), str(play)],
                        env={"FLODL_HOST_NAME": "ctl"}, timeout=900)
    assert again.returncode != 0
    assert "outside" in again.stdout
    assert not list(outside.rglob("train"))
