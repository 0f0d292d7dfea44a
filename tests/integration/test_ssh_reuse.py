"""One ssh handshake per worker per cluster_train run (issue 12, item 2), on real namespace hosts.

With ``flodl_ssh_reuse`` on (the default), the preflight probe leaves a master connection per worker
and the launcher's ssh (the stand-in's pre-spawn cleanup, its fan-out and its post-exit cleanup, as
flodl's launcher does, docs/launcher-contract.md §3f/§3g) rides it: each worker's sshd logs exactly
one accepted login for the whole run. With it off, every ssh pays its own handshake: the probe plus
the launcher's three. Either way no master process, socket or directory is left behind, also when the
run stops before the launch (a failed build) and for a detached launch, which makes its own connections.
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import uuid

import pytest
from conftest import REPO_ROOT, need, run_ansible
from netns_cluster import SHARED_BASE, Cluster, HostSpec, require_root

DEMO = REPO_ROOT / "examples" / "demo"
ARCH = {"h1": "precompiled/cu128", "h2": "precompiled/cu128", "h3": "precompiled/rocm63"}


def _project(dest: Path) -> Path:
    need(shutil.which("cargo") is not None, "cargo is needed to build the demo project")
    shutil.copytree(DEMO, dest, ignore=shutil.ignore_patterns("target"))
    os.chmod(dest, 0o755)
    return dest


def _inventory(cluster, project: Path, path: Path) -> Path:
    # The harness's own inventory sets a ControlPath (its user setting, which the collection never
    # overrides): leave it out so the run's own sharing applies.
    common = " ".join(f"-o {o}" for o in cluster.ssh_options)
    host_vars = {
        h: {"flodl_path": str(project), "flodl_arch": arch, "flodl_local_devices": [0],
            "flodl_nccl_socket_ifname": "eth0", "ansible_ssh_common_args": common}
        for h, arch in ARCH.items()
    }
    group = {
        "flodl_controller_host": cluster.controller_ip, "flodl_controller_path": str(project),
        "flodl_cmd": "train", "flodl_launch_command": "python3 standin_launcher.py",
        "flodl_cluster_env": {"FLODL_DEMO_STEPS": "1", "FLODL_DEMO_STEP_MS": "10"},
    }
    return cluster.write_inventory(path, group, host_vars)


def _logins(cluster) -> dict[str, int]:
    return {h.name: h.log().count("Accepted publickey") for h in cluster}


@pytest.fixture
def run_tmp():
    """A short TMPDIR of this test's own for the play: its control directory lands there, so runs of
    other tests (the other ansible-core line runs at the same time) cannot be mistaken for this one's."""
    path = tempfile.mkdtemp(prefix="flr-", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _play(installed_collection, argv: list[str], run_tmp: str):
    return run_ansible(installed_collection, argv, env={"TMPDIR": run_tmp})


def _our_dirs(run_tmp: str) -> set[str]:
    return set(glob.glob(os.path.join(run_tmp, "flodl-ssh-*")))


def _masters(run_tmp: str) -> list[str]:
    """ssh master processes of a run of ours (their argv names a ControlPath in the run's TMPDIR)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        # A ControlPersist master retitles itself "ssh: <socket> [mux]".
        if argv.startswith("ssh") and ("ControlPath=" in argv or "[mux]" in argv) \
                and f"{run_tmp}/flodl-ssh-" in argv:
            found.append(argv)
    return found


@pytest.fixture(scope="module")
def built(installed_collection, tmp_path_factory):
    """Three hosts and a project whose binaries a first cluster_train built, for the module's runs that leave both
    as they found them (each counts its own logins, in a TMPDIR of its own): the counted run is the no-op one an
    operator repeats. Yields (cluster, project, inventory)."""
    reason = require_root()
    need(reason is None, reason or "")
    state = tmp_path_factory.mktemp("ssh-reuse")
    SHARED_BASE.mkdir(parents=True, exist_ok=True)
    shared = SHARED_BASE / f"ssh-reuse-{uuid.uuid4().hex[:10]}"
    shared.mkdir(mode=0o755)
    cluster = Cluster([HostSpec(h) for h in ARCH], state / "cluster")
    try:
        cluster.up()
        project = _project(shared / "proj")
        inv = _inventory(cluster, project, state / "inv.json")
        first_tmp = tempfile.mkdtemp(prefix="flr-", dir="/tmp")
        try:
            first = _play(installed_collection, ["ansible-playbook", "-i", str(inv), "flodl.cluster.cluster_train"],
                          first_tmp)
        finally:
            shutil.rmtree(first_tmp, ignore_errors=True)
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr
        yield cluster, project, inv
    finally:
        cluster.down()
        shutil.rmtree(shared, ignore_errors=True)


@pytest.mark.parametrize("reuse, expected", [(True, 1), (False, 4)])
def test_one_login_per_worker_per_run_with_reuse(installed_collection, built, run_tmp, reuse, expected):
    cluster, dummy, inv = built
    argv = ["ansible-playbook", "-i", str(inv), "flodl.cluster.cluster_train"]
    before = _logins(cluster)
    # -v: the launch plan prints the decoded topology (without it, a summary)
    proc = _play(installed_collection, [*argv, "-v", "-e", f"flodl_ssh_reuse={str(reuse).lower()}"], run_tmp)
    assert proc.returncode == 0
    for host in ARCH:
        assert f"[standin-launcher] {host}: exited with status 0" in proc.stdout
        assert f"[{host}] step 1 loss" in proc.stdout
    after = _logins(cluster)
    # the probe, plus the launcher's pre-spawn cleanup, fan-out and post-exit cleanup (without reuse)
    assert {h: after[h] - before[h] for h in after} == {h: expected for h in ARCH}
    # The topology's workers get ControlPath only: the launcher's ssh rides the probe's master (issue 19).
    assert ("ControlPath=" in proc.stdout) is reuse
    assert (f"ControlPath={run_tmp}/flodl-ssh-" in proc.stdout) is reuse  # the run's sockets are in its TMPDIR
    assert '"ControlMaster=auto"' not in proc.stdout and '"ControlPersist=' not in proc.stdout
    assert not _our_dirs(run_tmp), "the run's control directory was left behind"
    assert not _masters(run_tmp), "an ssh master outlived the play"


def _gone(run_tmp: str, seconds: float = 10.0) -> bool:
    """No master process and no control directory of a run in ``run_tmp``."""
    deadline = time.monotonic() + seconds
    while _masters(run_tmp) or _our_dirs(run_tmp):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_masters_end_with_a_run_that_stops_before_the_launch(
        installed_collection, cluster3, netns_shared_dir, tmp_path, run_tmp):
    """A build that fails after the probe opened the masters: the launch step never runs to close them."""
    cluster = cluster3
    project = _project(netns_shared_dir / "proj")
    with open(project / "src" / "main.rs", "a") as fh:
        fh.write("\nfn broken( {\n")
    inv = _inventory(cluster, project, tmp_path / "inv.json")
    proc = _play(installed_collection, ["ansible-playbook", "-i", str(inv), "flodl.cluster.cluster_train"], run_tmp)
    assert proc.returncode != 0
    assert "flodl preflight (3 worker(s)" in proc.stdout and "flodl launch plan" not in proc.stdout
    assert _gone(run_tmp), f"an ssh master or control directory outlived the play: {_masters(run_tmp)}"


def test_a_detached_launch_makes_its_own_connections(installed_collection, built, run_tmp):
    """The masters end with the play; a detached launcher outlives it, so its fan-out must not ride them."""
    dummy, dummy, inv = built
    argv = ["ansible-playbook", "-i", str(inv), "flodl.cluster.cluster_train", "-v", "-e", "flodl_launch_detach=true"]
    proc = _play(installed_collection, argv, run_tmp)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ControlPath=" not in proc.stdout  # with -v the plan prints the topology's ssh options
    match = re.search(r"detached run [0-9a-f]{16} started on localhost \(pid \d+\).*?; log: (\S+)", proc.stdout)
    assert match, proc.stdout
    log = Path(match.group(1).rstrip('",'))
    deadline = time.monotonic() + 60
    while not all(f"[standin-launcher] {h}: exited with status 0" in (log.read_text() if log.exists() else "")
                  for h in ARCH):
        assert time.monotonic() < deadline, f"the detached run did not finish on every worker:\n{log.read_text()}"
        time.sleep(0.3)
    assert _gone(run_tmp)
