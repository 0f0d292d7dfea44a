"""Explicit modes (issue 35, item 3): under ``umask 000`` nothing a run writes is group- or world-writable.

A real ``cluster_train`` (native cargo builds of the demo project for two variants, the stand-in launcher
on three namespace hosts), then a detached ``launch`` and its ``status``, all from an ansible-playbook
process started with umask 000 (the builds and the launch inherit it unless the collection sets its own).
Then every file and directory under the project's ``target/`` (build dirs, binaries, envelope, run lock,
launch logs, detached run records) and under an explicit ``flodl_launch_log_dir`` is walked.
"""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from conftest import run_ansible
from test_launch import TWO_VARIANTS, copy_project, project_vars, worker_vars

PLAYBOOKS = "flodl.cluster"


def _under_umask_000(installed_collection, argv: list[str]):
    old = os.umask(0)  # inherited by ansible-playbook, its workers, the builds and the launch
    try:
        return run_ansible(installed_collection, argv)
    finally:
        os.umask(old)


def _walk(root: Path) -> dict[str, int]:
    """Every path under ``root`` (itself included), links not followed: its permission bits."""
    found = {str(root): stat.S_IMODE(os.lstat(root).st_mode)}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            st = os.lstat(path)
            if not stat.S_ISLNK(st.st_mode):
                found[path] = stat.S_IMODE(st.st_mode)
    return found


def test_under_umask_000_nothing_the_run_writes_is_group_or_world_writable(installed_collection, cluster3,
                                                                           netns_shared_dir, tmp_path):
    cluster = cluster3
    project = copy_project(netns_shared_dir / "proj")
    assert not (project / "target").exists()
    inv = cluster.write_inventory(tmp_path / "inv.json", project_vars(project, cluster),
                                  worker_vars(project, TWO_VARIANTS, {"h1": [0], "h2": [0, 1], "h3": [0]}))
    log_root = netns_shared_dir / "joblogs"  # made by the run, parents included
    train = _under_umask_000(installed_collection, [
        "ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train",
        "-e", f"flodl_launch_log_dir={log_root}/flodl"])
    assert train.returncode == 0, train.stdout + train.stderr
    assert "[standin-launcher] h3: exited with status 0" in train.stdout

    # A detached launch into the default log directory, with its run record, then its status once it ended.
    start = _under_umask_000(installed_collection, [
        "ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.launch", "-e", "flodl_launch_detach=true"])
    assert start.returncode == 0, start.stdout + start.stderr
    run_id = re.search(r"detached run ([0-9a-f]{16}) started", start.stdout).group(1)
    status = _under_umask_000(installed_collection, [
        "ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.status", "-e", f"flodl_run_id={run_id}",
        "-e", "flodl_status_wait_seconds=90"])
    assert status.returncode == 0, status.stdout + status.stderr
    assert f"flodl run {run_id} on localhost: launcher ended, exit code 0" in status.stdout

    modes = {**_walk(project / "target"), **_walk(log_root)}
    cluster_dir = project / "target" / "cluster"
    # The run lock is gone by now (a run removes its own lease, issue 38): its mode is unit-tested
    # (test_project_dirs.py).
    assert not (cluster_dir / "run.lock").exists()
    written = [cluster_dir / "prebuild-envelope.json",
               cluster_dir / "runs" / f"{run_id}.json", *(cluster_dir / "logs").glob("launch-*.log"),
               *(log_root / "flodl").glob("launch-*.log"), *cluster_dir.glob("h*/*/prebuild.log")]
    assert len(written) == 6 and all(str(p) in modes for p in written), sorted(modes)
    loose = {path: oct(mode) for path, mode in modes.items() if mode & 0o022}
    assert loose == {}, f"{len(loose)} of {len(modes)} paths are group- or world-writable: {loose}"
    binaries = {h: modes[str(cluster_dir / h / slug / "release" / "train")]
                for h, slug in (("h1", "precompiled-cu128"), ("h2", "precompiled-cu128"), ("h3", "precompiled-rocm63"))}
    assert binaries == {"h1": 0o755, "h2": 0o755, "h3": 0o755}
    assert modes[str(cluster_dir / "runs")] == 0o750 and modes[str(log_root / "flodl")] == 0o750
    assert modes[str(log_root)] == 0o755
