"""walk_in with a worker on a non-ssh Ansible connection: a Docker container reached by community.docker.docker.

Two namespace ssh hosts and one container worker ``d1`` (host networking, so its agent dials the launcher's window
on the controller's bridge address; the shared project mounted at the same path, so its prebuilt binary is there).
flodl's ssh never reaches ``d1``: the run reader accepts it in walk_in, preflight skips its ssh probe and says so,
and its agent is started over ``docker exec``. Every rank runs, every worker is ok in PLAY RECAP, and nothing of
the run is left in the container, on the hosts or here.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / ".collections"))

from ci_policy import need  # noqa: E402
from test_walk_in import _launchers, copy_project  # noqa: E402

DOCKER_CONNECTION = "community.docker.docker"


def _docker_collection_root() -> str | None:
    """The collections root holding community.docker, or None. The 2.19 venv has it from the ``ansible`` package
    scripts/bootstrap.sh installs there; the 2.21 line uses that copy too (a collection is plain files, and the
    connection plugin supports both lines). The tests' ansible scans no system path, so the root is added beside
    the installed flodl.cluster, after it."""
    import ansible

    here = Path(ansible.__file__).resolve().parent.parent
    siblings = sorted(Path(sys.prefix).parent.glob("ansible-2.19/lib/python3*/site-packages"))
    for root in (here, *map(Path, sys.path), *siblings):
        if (root / "ansible_collections" / "community" / "docker" / "plugins" / "connection" / "docker.py").is_file():
            return str(root)
    return None


def _container_processes(cid: str) -> list[str]:
    """Every process in the container but its init (``--init``) and main process (``sleep infinity``), as
    ``pid args`` lines (read from /proc: no ps needed); this listing's own shell left out."""
    listed = subprocess.run(
        ["docker", "exec", cid, "sh", "-c",
         'for p in /proc/[0-9]*; do a=$(tr "\\0" " " < "$p/cmdline" 2>/dev/null); '
         '[ -n "$a" ] && echo "${p#/proc/} $a"; done'],
        capture_output=True, text=True, check=False, timeout=60)
    assert listed.returncode == 0, listed.stderr
    return [ln for ln in listed.stdout.splitlines() if ln.split(" ", 1)[0] != "1" and "/proc/" not in ln
            and not ln.split(" ", 1)[1].startswith(("sh -c", "tr ", "sleep infinity"))]


def test_walk_in_runs_a_docker_container_worker_over_its_ansible_connection(
        installed_collection, docker_engine, netns_cluster_factory, netns_shared_dir, tmp_path):
    from conftest import run_ansible
    from docker_engine import BUILDER_IMAGE
    from play_output import failed_in_recap, recap, task_results
    from test_launch import PLAYBOOKS, project_vars, rank_processes, worker_vars

    docker_collection = _docker_collection_root()
    need(docker_collection is not None,
         f"the {DOCKER_CONNECTION} connection plugin is not installed for this ansible (scripts/bootstrap.sh "
         "installs the `ansible` package, which carries community.docker, in the 2.19 venv)")
    cluster = netns_cluster_factory(["h1", "h2"])
    project = copy_project(netns_shared_dir / "proj")
    started = subprocess.run(
        ["docker", "run", "-d", "--init", "--network", "host", "-v", f"{netns_shared_dir}:{netns_shared_dir}",
         "--entrypoint", "sleep", BUILDER_IMAGE, "infinity"],
        capture_output=True, text=True, check=False, timeout=300)
    assert started.returncode == 0, started.stderr
    cid = started.stdout.strip()
    try:
        host_vars = worker_vars(project, {"h1": "precompiled/cu128", "h2": "precompiled/cu128"},
                                {"h1": [0], "h2": [0, 1]})
        inventory = cluster.inventory(project_vars(project, cluster), host_vars)
        inventory["all"]["children"]["flodl_workers"]["hosts"]["d1"] = {
            "flodl_path": str(project), "flodl_arch": "precompiled/cu128", "flodl_local_devices": [0],
            "flodl_nccl_socket_ifname": "lo", "ansible_connection": DOCKER_CONNECTION, "ansible_host": cid}
        inv = tmp_path / "inv.json"
        inv.write_text(json.dumps(inventory, indent=2) + "\n")
        proc = run_ansible(installed_collection, ["ansible-playbook", "-i", str(inv), f"{PLAYBOOKS}.cluster_train",
                                                  "-e", "flodl_launch_mode=walk_in"], timeout=900,
                           env={"ANSIBLE_COLLECTIONS_PATH":
                                f"{installed_collection.collections_path}:{docker_collection}"})
        out = proc.stdout
        assert proc.returncode == 0, out + proc.stderr
        assert "join window open" in out and "target ranks reached: 4 rank(s)" in out, out
        for host in ("h1", "h2", "d1"):
            assert f'host "{host}" joined with ranks [' in out, out
        # Preflight said why d1 had no ssh probe, and did not count it against the run.
        assert "probe skipped: reached by Ansible's community.docker.docker connection, not ssh" in out, out
        reported = task_results(out, "Launch | Result of this worker")
        assert reported == {"h1": "changed", "h2": "changed", "d1": "changed"}, reported
        assert failed_in_recap(out) == [] and sorted(recap(out)) == ["d1", "h1", "h2"], out
        # The spec d1's agent presented is the one rendered for it, dialling this run's window.
        spec = json.loads(bytes.fromhex((project / "target/cluster/standin/agents/d1.hex").read_text()))
        assert spec["host"] == "d1" and spec["controller_host"] == cluster.controller_ip
        # Nothing of the run is left: in the container, on the hosts, here.
        marker = f"{project}/target/cluster/"
        deadline = time.monotonic() + 30
        while (rank_processes(marker) or _container_processes(cid)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _container_processes(cid) == []
        for host in ("h1", "h2"):
            listed = cluster.ssh(host, "ps -eo pid,args")
            assert listed.returncode == 0 and marker not in listed.stdout, (host, listed.stdout)
        assert rank_processes(marker) == [] and _launchers(project) == []
    finally:
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True, check=False, timeout=120)
    assert subprocess.run(["docker", "inspect", cid], capture_output=True, check=False).returncode != 0
