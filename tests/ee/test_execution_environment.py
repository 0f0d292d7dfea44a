"""A cluster_train job inside the execution environment image, as AWX runs one (issue 18, item 4).

ansible-runner's process isolation starts the job in the image (``docker run`` of the EE, the
private data dir mounted at /runner, as AWX's execution nodes do): the collection comes from the
image (installed there from its tarball), ansible-core and OpenSSH's client too. The machine
credential is ``env/ssh_key`` (ansible-runner loads it into an ssh-agent in the container) and the
host keys are checked strictly against a known_hosts file named by ``EE_SSH_KNOWN_HOSTS``, as the
"flodl known_hosts" credential of examples/awx/ does.

The EE has no cargo (docs/awx.md §1): the builds run on ``flodl_build_host``, here the namespace
host h1, which gets the machine's Rust toolchain as hard links on the shared filesystem (its /root
is private). ``--network host`` puts the container on the machine's side of the cluster bridge, so
the job reaches the workers at their namespace addresses and nothing else.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from ci_policy import need
from play_output import runner_hosts

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
DEMO = REPO_ROOT / "examples" / "demo"
WORKERS = ("h1", "h2", "h3")
ARCH = {"h1": "precompiled/cu128", "h2": "precompiled/cu128", "h3": "precompiled/rocm63"}
CONNECTION = re.compile(r"Connection from (\S+) port")


def _runner():
    try:
        import ansible_runner  # noqa: PLC0415  (the tool under test; its absence is the CI policy's call)
    except ImportError:
        ansible_runner = None
    need(ansible_runner is not None, f"ansible-runner is not installed in {sys.prefix}: run scripts/bootstrap.sh")
    return ansible_runner


def _toolchain(shared: Path) -> Path:
    """The machine's Rust toolchain, where the namespace hosts see it.

    A rustup toolchain under /root (private on every host) is hard-linked (bin/, lib/) under ``shared``.
    """
    need(shutil.which("rustc") is not None, "rustc is needed to build the demo project on the build host")
    sysroot = Path(subprocess.run(["rustc", "--print", "sysroot"], capture_output=True, text=True,
                                  check=True).stdout.strip())
    if not sysroot.is_relative_to("/root"):
        return sysroot  # the hosts see it as it is: only /root and /tmp are private to them
    dest = shared / "toolchain"
    dest.mkdir()
    for part in ("bin", "lib"):
        subprocess.run(["cp", "-al", str(sysroot / part), str(dest / part)], check=True)
    return dest


def _known_hosts(cluster) -> str:
    """The hosts' real public keys, one line per address: what an admin collects (docs/awx.md §2)."""
    lines = []
    for host in cluster:
        key = (cluster.runtime_dir / host.name / "ssh_host_ed25519_key.pub").read_text().split()
        lines.append(f"{host.ip} {key[0]} {key[1]}")
    return "\n".join(lines) + "\n"


def _inventory(cluster, project: Path, shared: Path, toolchain: Path) -> dict[str, Any]:
    # No private key file and no host-key override: the key is the job's ssh-agent (env/ssh_key),
    # the host keys are checked against EE_SSH_KNOWN_HOSTS.
    workers = {
        h.name: {
            "ansible_host": h.ip, "ansible_user": cluster.login_user,
            "ansible_ssh_common_args": "-o LogLevel=ERROR -o ConnectTimeout=10",
            "flodl_path": str(project), "flodl_arch": ARCH[h.name], "flodl_local_devices": [0],
            "flodl_nccl_socket_ifname": "eth0",
        }
        for h in cluster
    }
    group = {
        "flodl_controller_host": cluster.controller_ip,
        "flodl_controller_path": str(project),
        "flodl_build_host": "h1",
        "flodl_prebuild_env": {"PATH": f"{toolchain}/bin:/usr/bin:/bin", "CARGO_HOME": f"{shared}/cargo-home"},
        "flodl_cluster_env": {"FLODL_DEMO_STEPS": "3", "FLODL_DEMO_STEP_MS": "50"},
    }
    return {"all": {"vars": group, "children": {"flodl_workers": {"hosts": workers}}}}


def _private_data_dir(tmp_path: Path, cluster, project: Path, shared: Path, toolchain: Path) -> Path:
    pdd = tmp_path / "pdd"
    for sub in ("project", "env", "inventory"):
        (pdd / sub).mkdir(parents=True)
    shutil.copy(REPO_ROOT / "examples" / "awx" / "project" / "train.yml", pdd / "project" / "train.yml")
    (pdd / "inventory" / "hosts.json").write_text(json.dumps(_inventory(cluster, project, shared, toolchain)))
    survey = {  # every answer a string, as AWX sends them
        "flodl_cmd": "train", "flodl_prebuild": "true", "flodl_net_timeout_scale": "", "flodl_fdl_env": "",
        "flodl_launch_command": "python3 standin_launcher.py --epochs 3", "flodl_launch_grace_seconds": "5",
    }
    (pdd / "env" / "extravars").write_text(json.dumps(survey))
    (pdd / "env" / "ssh_key").write_text(cluster.key_path.read_text())
    (pdd / "known_hosts").write_text(_known_hosts(cluster))
    envvars = {
        "EE_SSH_KNOWN_HOSTS": "/runner/known_hosts",  # the private data dir, as mounted in the container
        "ANSIBLE_HOST_KEY_CHECKING": "True",  # ansible-runner turns it off otherwise (docs/awx.md §2)
        "ANSIBLE_REMOTE_TEMP": "/tmp/.ansible-remote",
        "ANSIBLE_NOCOLOR": "1",
        "PYTHONUNBUFFERED": "1",
    }
    (pdd / "env" / "envvars").write_text(json.dumps(envvars))
    return pdd


def _demo_on_hosts(shared: Path, cluster_factory):
    """The demo project on the shared mount, the build toolchain beside it, and the namespace workers."""
    project = shared / "proj"
    shutil.copytree(DEMO, project, ignore=shutil.ignore_patterns("target"))
    return project, _toolchain(shared), cluster_factory(list(WORKERS), shared_root=shared)


def test_cluster_train_job_in_the_ee_image(ee_image, netns_cluster_factory, netns_shared_dir, tmp_path):
    ansible_runner = _runner()
    shared = netns_shared_dir
    project, toolchain, cluster = _demo_on_hosts(shared, netns_cluster_factory)
    pdd = _private_data_dir(tmp_path, cluster, project, shared, toolchain)

    r = ansible_runner.run(
        private_data_dir=str(pdd), playbook="train.yml", quiet=True,
        process_isolation=True, process_isolation_executable="docker", container_image=ee_image,
        # The project lives on the shared filesystem, at the same path in the container as on the hosts.
        container_volume_mounts=[f"{shared}:{shared}"], container_options=["--network=host"],
    )
    stdout = r.stdout.read()
    print(f"status={r.status} rc={r.rc}\n--- stdout\n{stdout}")  # shown when the test fails

    # It ran in the image: the runner's command is a `docker run` of it, nothing of this machine's Ansible.
    command = json.loads((Path(r.config.artifact_dir) / "command").read_text())["command"]
    assert command[:2] == ["docker", "run"] and ee_image in command, command
    assert r.status == "successful" and r.rc == 0, r.status

    # The events AWX shows: every worker passed preflight, then its build and launch (cluster_train reports a
    # worker's build with its launch, one task per worker); nothing failed.
    for task in ("Preflight | Result of this worker", "Launch | Result of this worker"):
        assert runner_hosts(r, "runner_on_ok", task) == set(WORKERS), task
    launch_reports = [e["event_data"]["res"] for e in r.events if e.get("event") == "runner_on_ok"
                      and e["event_data"].get("task") == "Launch | Result of this worker"]
    assert len(launch_reports) == len(WORKERS) and all("prebuild" in res for res in launch_reports), launch_reports
    assert not [e for e in r.events if e.get("event") in ("runner_on_failed", "runner_on_unreachable")]
    assert not r.stats["failures"] and not r.stats["dark"]
    # ... and what AWX stores: one JSON file per event, the job's stdout.
    events_dir = Path(r.config.artifact_dir) / "job_events"
    assert len(list(events_dir.glob("*.json"))) == len(list(r.events))
    assert "PLAY RECAP" in (Path(r.config.artifact_dir) / "stdout").read_text()

    # The artifacts (set_stats): built on h1 for both variants, every rank trained and exited 0.
    stats = [e for e in r.events if e.get("event") == "playbook_on_stats"]
    art = stats[0]["event_data"]["artifact_data"]
    built = art["flodl_prebuild_result"]
    assert built["failed_hosts"] == [] and set(built["envelope"]) == set(WORKERS), built
    # Two variants, two builds, each with its full log next to its binary on the shared project.
    assert len(list(project.glob("target/cluster/*/*/prebuild.log"))) == 2
    launch = art["flodl_launch"]
    assert str(launch["rc"]) == "0", launch
    log = Path(launch["log_file"]).read_text()
    for host in WORKERS:
        assert f"[{host}] step 3 loss" in log, host
        assert f"[standin-launcher] {host}: exited with status 0" in log, host

    # Traffic stayed on the cluster bridge: every ssh login on a worker came from the controller's
    # bridge address (the container, on the machine's side) or from another namespace host.
    allowed = {cluster.controller_ip, *(h.ip for h in cluster)}
    for host in cluster:
        sources = set(CONNECTION.findall(host.log()))
        assert sources and sources <= allowed, (host.name, sources)
