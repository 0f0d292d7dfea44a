"""Walk-in agents on namespace hosts, as step 1 of the walk_in launch mode (issue 37).

The stand-in launcher (examples/demo) gets the window topology flodl.cluster renders; each host's agent
is started by the rendered start script over a real ssh session, its spec and environment on stdin, as
Ansible's connection will carry them. The stand-in records the spec each admitted agent presented: the
bytes are the ones rendered. A rank that fails is named by host, rank and code in the launcher's output,
and its agent says DEGRADED and exits 0 (upstream's verdicts, E13).
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / ".collections"))

from ansible_collections.flodl.cluster.plugins.module_utils import walk_in as wi  # noqa: E402
from ansible_collections.flodl.cluster.plugins.module_utils.hexcodec import hex_encode  # noqa: E402
from ansible_collections.flodl.cluster.plugins.module_utils.serde_json_text import serde_pretty  # noqa: E402
from test_launch import copy_project  # noqa: E402

RUN_ID = "0123456789abcdef"


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def test_agents_started_by_the_rendered_script_join_the_window_with_the_rendered_bytes(
        netns_cluster_factory, netns_shared_dir):
    from netns_cluster import HostSpec

    cluster = netns_cluster_factory([HostSpec("h1"), HostSpec("h2")])
    project = copy_project(netns_shared_dir / "proj")
    target = project / "target" / "cluster" / "all" / "precompiled-cu128"
    build = subprocess.run(["cargo", "build", "--release", "--bin", "train"], cwd=project, capture_output=True,
                           text=True, check=False, env={**os.environ, "CARGO_TARGET_DIR": str(target)})
    assert build.returncode == 0, build.stderr
    port = _free_port(cluster.controller_ip)
    token = wi.new_token()
    shipped = {"controller": {"host": cluster.controller_ip, "port": port, "path": str(project)},
               "workers": [{"host": "h1", "ranks": [0, 1], "local_devices": [0, 1], "nccl_socket_ifname": "eth0",
                            "path": str(project)},
                           {"host": "h2", "ranks": [2], "local_devices": [0], "nccl_socket_ifname": "eth0",
                            "path": str(project), "env": {"FLODL_DEMO_FAIL_HOST": "h2:7"}}],
               "env": {"FLODL_DEMO_STEP_MS": "20"}}
    topology = wi.window_topology(shipped, token)
    launcher = subprocess.Popen([sys.executable, "standin_launcher.py"], cwd=project, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env={**os.environ, "FLODL_INTERNAL_FULL_CLUSTER_JSON": hex_encode(serde_pretty(topology))})
    try:
        first = launcher.stdout.readline()
        assert "join window open" in first, first
        entry = {"bin": str(target / "release" / "train"), "ld_library_path": ""}
        pids, specs = {}, {}
        for worker in shipped["workers"]:
            spec = wi.agent_spec(worker, topology["controller"], token)
            launch = wi.agent_launch(worker, entry, spec, shipped["env"], {})
            specs[worker["host"]] = launch.env["FLODL_INTERNAL_AGENT_JSON"]
            argv = [a for a in cluster.ssh_argv(worker["host"], wi.start_script(launch, wi.agent_log(RUN_ID), 60))
                    if a != "-n"]  # the environment travels on stdin
            started = subprocess.run(argv, input=wi.start_stdin(launch), capture_output=True, timeout=30, check=False)
            pid = wi.parse_start(started.stdout.decode())
            assert isinstance(pid, int), started
            pids[worker["host"]] = pid
        out, _ = launcher.communicate(timeout=60)
        assert launcher.returncode == 7, out
        assert 'host "h2" reports rank ' in out and "exited with code 7" in out
        assert "target ranks reached: 3 rank(s)" in out
        for host, hexed in specs.items():
            recorded = (project / "target/cluster/standin/agents" / f"{host}.hex").read_text()
            assert recorded == hexed  # the bytes the agent was given, whole
        collected = {}
        for host, pid in pids.items():
            res = subprocess.run(cluster.ssh_argv(host, wi.collect_script(pid, wi.agent_log(RUN_ID), 50)),
                                 capture_output=True, text=True, timeout=30, check=False)
            collected[host] = wi.parse_collect(res.stdout)
        # Upstream's verdicts: both agents exit 0; h2's says DEGRADED, and its rank's lines are on its stdout.
        assert collected["h1"][0] == 0 and "agent: h1 finished" in collected["h1"][1]
        assert collected["h2"][0] == 0 and "agent: h2 finished DEGRADED" in collected["h2"][1]
        assert any(line.startswith("[h2:0:r") and "failing on purpose" in line for line in collected["h2"][1])
        # Collected: nothing of the agents is left on the hosts.
        for host, pid in pids.items():
            assert cluster.ssh(host, f"pgrep -s {pid}").returncode != 0
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
