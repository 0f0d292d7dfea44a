"""No rank outlives its job when the launcher runs on flodl_launch_host (issue 18, item 2).

The job runs the way AWX runs it: ``ansible_runner.run()`` inside a job pod (tests/harness/pod.py:
its own network namespace the workers cannot reach, no shared project mount, an ssh-agent holding
the machine credential's key). h1 is the launch host and also a worker. The launcher is a stand-in
that does **no cleanup of its own**: it starts one rank per worker over ssh, detached from the ssh
session (``setsid``), and never stops them. The job then dies three ways during the launch:

- ansible-runner's cancel callback (what an AWX cancel ends in);
- SIGTERM to the job's main process (ansible-runner's own signal handling);
- SIGKILL of the pod's whole process tree (a pod deleted, an OOM kill): nothing of the job runs
  any more, so only the launch host's wrapper can clean up.

After each, no process of the run (wrapper, launcher, the cleanup plan and its ssh masters,
ranks) may be left on any host within the grace period plus 5 s. The keys: either on the launch
host (the inventory's key path exists there, not in the pod), or the job's agent forwarded to it
(``flodl_launch_forward_agent``: the agent dies with the pod, the wrapper's masters do not).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from awx_job_dir import job_dir
from conftest import need
from netns_cluster import Cluster, HostSpec, require_root
from pod import Pod
from test_launch import copy_project, project_vars, rank_processes, worker_vars

WORKERS = ("h1", "h2", "h3")
ARCH = {h: "precompiled/cu128" for h in WORKERS}
GRACE = 3
BUDGET = GRACE + 5

# Starts one rank per worker over ssh, detached from the ssh session, and never stops anything.
LAUNCHER = r"""
import binascii, json, os, subprocess, time
topo = json.loads(binascii.unhexlify(os.environ["FLODL_INTERNAL_FULL_CLUSTER_JSON"]))
bins = json.load(open("ranks.json"))
q = lambda s: "'" + s.replace("'", "'\\''") + "'"
procs = []
for w in topo["workers"]:
    ssh = w.get("ssh") or {}
    argv = ["ssh"] + [x for o in ssh.get("options") or [] for x in ("-o", o)]
    argv += ["-T", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no"]
    user = ssh.get("user") or os.environ.get("FLODL_INTERNAL_HOST_USER", "")
    argv += ["-l", user] if user else []
    argv += ["-i", ssh["identity_file"]] if ssh.get("identity_file") else []
    rank = "setsid " + q(bins[w["host"]]) + " 300 </dev/null >/dev/null 2>&1 &"
    procs.append(subprocess.Popen(argv + ["--", ssh.get("target") or w["host"], rank]))
print("nocleanup-launcher: started", [p.wait() for p in procs], flush=True)
while True:
    time.sleep(1)
"""

DRIVER = r"""
import json, os, sys
import ansible_runner
pdd, flag = sys.argv[1], sys.argv[2]
kw = {"cancel_callback": lambda: os.path.exists(flag)} if flag != "-" else {}
r = ansible_runner.run(private_data_dir=pdd, playbook="train.yml", quiet=True, **kw)
print(json.dumps({"status": r.status, "rc": r.rc}), flush=True)
"""


def _runner_present() -> None:
    try:
        import ansible_runner  # noqa: F401, PLC0415
    except ImportError:
        need(False, f"ansible-runner is not installed in {sys.prefix}: run scripts/bootstrap.sh")


@pytest.fixture(scope="module")
def world(installed_collection, tmp_path_factory):
    """One cluster for the module: h1-h3, the project with its "binaries" (copies of sleep) on the share."""
    reason = require_root()
    need(reason is None, reason or "")
    _runner_present()
    base = tmp_path_factory.mktemp("kill")
    cluster = Cluster([HostSpec(h) for h in WORKERS], base / "cluster")
    cluster.up()
    try:
        shared = cluster.shared_root()
        project = copy_project(shared / "proj")
        (project / "nocleanup_launcher.py").write_text(LAUNCHER)
        sys.path.insert(0, str(installed_collection.collections_path))
        from ansible_collections.flodl.cluster.plugins.module_utils._run.prebuild_layout import binary_subpath  # noqa: PLC0415

        bins = {h: f"{project}/{binary_subpath(h, ARCH[h], 'train')}" for h in WORKERS}
        for path in bins.values():
            os.makedirs(os.path.dirname(path))
            shutil.copy("/bin/sleep", path)
        (project / "ranks.json").write_text(json.dumps(bins))
        key = shared / "keys" / "id"
        key.parent.mkdir(mode=0o700)
        shutil.copy(cluster.key_path, key)
        os.chmod(key, 0o600)
        yield {"cluster": cluster, "shared": shared, "project": project, "key": key, "base": base,
               "collection": installed_collection}
    finally:
        cluster.down()


def _pdd(world: dict, name: str, *, forward_agent: bool) -> Path:
    cluster, project = world["cluster"], world["project"]
    pdd = job_dir(world["base"] / name, world["collection"], world["base"] / name / "ansible-local")
    hv = worker_vars(project, ARCH, {h: [0] for h in WORKERS})
    for h in WORKERS:
        # No IdentitiesOnly: the job's key is in its agent (AWX loads the machine credential there).
        hv[h]["ansible_ssh_common_args"] = "-o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o LogLevel=ERROR"
        # Keys on the launch host: a path on the share (absent in the pod). Forwarded: the pod's own key
        # path, absent on h1 (its /tmp is private), so only the forwarded agent gets the launcher in.
        hv[h]["ansible_ssh_private_key_file"] = str(cluster.key_path if forward_agent else world["key"])
    cluster.write_inventory(pdd / "inventory" / "hosts.json",
                            project_vars(project, cluster, flodl_launch_command="python3 nocleanup_launcher.py"), hv)
    survey = {"flodl_cmd": "train", "flodl_prebuild": "false", "flodl_launch_host": "h1",
              "flodl_launch_grace_seconds": str(GRACE), "flodl_launch_forward_agent": str(forward_agent).lower()}
    (pdd / "env" / "extravars").write_text(json.dumps(survey))
    (pdd / "driver.py").write_text(DRIVER)
    return pdd


def _host_netns(cluster: Cluster) -> dict[str, str]:
    return {os.readlink(f"/proc/{h.init_pid}/ns/net"): h.name for h in cluster.hosts}


def _left(world: dict) -> dict[str, list[str]]:
    """Processes of the run on the cluster's hosts, by kind: ``<kind>@<host>`` -> command lines."""
    project, where = str(world["project"]), _host_netns(world["cluster"])
    found: dict[str, list[str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            host = where.get(os.readlink(f"/proc/{entry}/ns/net"))
            raw = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if host is None or state in ("Z", "X") or not raw:
            continue
        argv = raw.rstrip(b"\0").decode("utf-8", "replace").split("\0")
        line = " ".join(argv)
        if argv[0].startswith(f"{project}/target/cluster/"):
            kind = "rank"
        elif "__FLODL_ENV_END__" in line:
            kind = "wrapper"  # the wrapper's shell and its watcher (their text names the launch command too)
        elif "nocleanup_launcher.py" in line:
            kind = "launcher"
        elif "flodl-launch." in line:
            kind = "plan"  # the wrapper's cleanup plan and its ssh masters
        else:
            continue
        found.setdefault(f"{kind}@{host}", []).append(line[:160])
    return found


def _ranks(world: dict) -> int:
    return len(rank_processes(f"{world['project']}/target/cluster/"))


def _run_and_stop(world: dict, name: str, how: str, *, forward_agent: bool) -> dict[str, Any]:
    """Run the job in a pod, stop it ``how`` once every rank runs; the seconds until nothing is left."""
    assert _ranks(world) == 0 and not _left(world), _left(world)
    pdd = _pdd(world, name, forward_agent=forward_agent)
    flag = pdd / "cancel"
    job = (f'eval "$(ssh-agent -s)" >/dev/null && ssh-add -q {world["cluster"].key_path} && '
           f'exec {sys.executable} {pdd / "driver.py"} {pdd} {flag if how == "cancel" else "-"}')
    log = open(pdd / "job.log", "w")  # noqa: SIM115
    start = time.monotonic()
    with Pod(world["cluster"], hide=[str(world["shared"])]) as pod:
        proc = pod.spawn(["sh", "-c", job], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 150
            while _ranks(world) < len(WORKERS):
                assert proc.poll() is None, (pdd / "job.log").read_text()[-4000:]
                assert time.monotonic() < deadline, "ranks never started:\n" + (pdd / "job.log").read_text()[-4000:]
                time.sleep(0.2)
            started = time.monotonic() - start
            time.sleep(0.5)  # the wrapper's masters open beside the launcher
            before = _left(world)
            stopped = time.monotonic()
            if how == "cancel":
                flag.write_text("")
            elif how == "sigterm":
                pod.terminate()
            else:
                pod.kill()
            gone, kinds_gone = None, {}
            left = _left(world)
            while time.monotonic() < stopped + BUDGET + 10:
                left = _left(world)
                now = time.monotonic() - stopped
                if os.environ.get("FLODL_KILL_DEBUG"):
                    print(f"{now:.1f} {sorted(left)}")
                for kind in ("rank", "launcher", "wrapper", "plan"):
                    if kind not in kinds_gone and not any(k.startswith(kind + "@") for k in left):
                        kinds_gone[kind] = round(now, 1)
                if not left:
                    gone = now
                    break
                time.sleep(0.2)
            proc.wait(timeout=60)
        finally:
            log.close()
            pod.kill()
    out = (pdd / "job.log").read_text()
    print(f"{name}: ranks up after {started:.1f}s; nothing left {gone if gone is None else round(gone, 1)}s "
          f"after the {how} (by kind: {kinds_gone}); before: {before}; left: {left}\n--- job\n{out[-3000:]}")
    if left:  # leave a clean cluster for the next test, whatever this one says
        _teardown(world, pdd)
    return {"gone": gone, "left": left, "out": out}


def _teardown(world: dict, pdd: Path) -> None:
    from conftest import run_ansible  # noqa: PLC0415

    run_ansible(world["collection"], ["ansible-playbook", "-i", str(pdd / "inventory" / "hosts.json"),
                                      "flodl.cluster.teardown"])
    deadline = time.monotonic() + 15
    while _left(world) and time.monotonic() < deadline:
        time.sleep(0.2)


@pytest.mark.parametrize("how,forward_agent", [
    ("cancel", False), ("sigterm", False), ("sigkill", False), ("sigkill", True),
], ids=["cancel-keys", "sigterm-keys", "sigkill-keys", "sigkill-agent"])
def test_nothing_of_the_run_outlives_the_job(world, how, forward_agent):
    res = _run_and_stop(world, f"{how}-{'agent' if forward_agent else 'keys'}", how, forward_agent=forward_agent)
    assert res["gone"] is not None and res["gone"] <= BUDGET, res["left"]
    if how == "cancel":
        assert '"status": "canceled"' in res["out"], res["out"][-2000:]
