"""docs/awx.md's ansible-navigator walk-through, run as written on the image the suite builds (issue 38).

The image is the documented other base (Debian 12, docs/awx.md "Another base"), built by scripts/ee-build.sh from
this checkout with ansible-builder. ansible-navigator starts the job in it from the project's directory (which it
mounts at the same path), on the machine's network, with the key and the verified host keys mounted read-only and
``EE_SSH_KNOWN_HOSTS`` naming them, ``ANSIBLE_HOST_KEY_CHECKING=True`` and the image's pull policy ``never``: the
flags of the doc's console block. The checkout stays clean (``git status``).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from ci_policy import need
from test_execution_environment import REPO_ROOT, WORKERS, _demo_on_hosts, _inventory, _known_hosts


def _navigator() -> str:
    found = Path(sys.executable).parent / "ansible-navigator"
    need(found.is_file(), f"ansible-navigator is not installed in {sys.prefix}: run scripts/bootstrap.sh")
    return str(found)


def _git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain"], cwd=REPO_ROOT, capture_output=True, text=True,
                          check=True).stdout


def test_the_doc_walk_through_runs_cluster_train_through_ansible_navigator(
        ee_image, netns_cluster_factory, netns_shared_dir, tmp_path):
    navigator = _navigator()
    status_before = _git_status()
    shared = netns_shared_dir
    project, toolchain, cluster = _demo_on_hosts(shared, netns_cluster_factory)
    inventory = _inventory(cluster, project, shared, toolchain)
    for host in inventory["all"]["children"]["flodl_workers"]["hosts"].values():
        host["ansible_ssh_private_key_file"] = "/keys/flodl_key"  # --private-key names it too, as the doc does
    (project / "inventory.json").write_text(json.dumps(inventory))
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "known_hosts").write_text(_known_hosts(cluster))
    shutil.copy(cluster.key_path, keys / "flodl_key")
    (keys / "flodl_key").chmod(0o600)
    survey = {"flodl_cmd": "train", "flodl_launch_command": "python3 standin_launcher.py --epochs 3",
              "flodl_launch_grace_seconds": "5"}

    proc = subprocess.run(
        [navigator, "run", "flodl.cluster.cluster_train", "-i", "inventory.json", "-m", "stdout",
         "--eei", ee_image, "--pp", "never", "--ce", "docker", "--co=--network=host",
         "--eev", f"{keys / 'flodl_key'}:/keys/flodl_key:ro", "--private-key", "/keys/flodl_key",
         "--eev", f"{keys / 'known_hosts'}:/keys/known_hosts:ro", "--senv", "EE_SSH_KNOWN_HOSTS=/keys/known_hosts",
         "--senv", "ANSIBLE_HOST_KEY_CHECKING=True",
         # The project is on the shared filesystem: the hosts and the container see it at the same path.
         "--eev", f"{shared}:{shared}",
         "--pae", "false", "--lf", str(tmp_path / "navigator.log"), "-e", json.dumps(survey)],
        cwd=project, capture_output=True, text=True, timeout=900, check=False)
    print(f"rc={proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}")  # shown on failure

    assert proc.returncode == 0, proc.stdout[-3000:]
    recap = proc.stdout.rsplit("PLAY RECAP", 1)[-1]
    for host in WORKERS:
        assert f"{host} " in recap and "failed=0" in recap.split(f"{host} ", 1)[1].splitlines()[0], recap
    logs = sorted(project.glob("target/cluster/logs/launch-*.log"))
    assert logs, "no launch log in the project: the launch did not run in the container's view of it"
    log = logs[-1].read_text()
    for host in WORKERS:
        assert f"[{host}] step 3 loss" in log and f"[standin-launcher] {host}: exited with status 0" in log, host
    # The walk-through leaves the collection's checkout as it found it.
    assert _git_status() == status_before
