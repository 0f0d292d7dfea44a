"""plugin_utils._host.launch_host and lock_holder: the session held while the play lives, its answers turned into the run."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.model import cluster_model
from ansible_collections.flodl.cluster.plugins.module_utils._probe import launch_host as lh
from ansible_collections.flodl.cluster.plugins.plugin_utils._host import launch_host as lhio
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc import lock_holder
from ansible_collections.flodl.cluster.plugins.plugin_utils._preflight import preflight_sweep as sweep
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import RunContext

END = lh.MARK_END


def _holder(playbook_pid: int, script: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-I", "-S", lock_holder.__file__, str(playbook_pid), END, "sh", "-c",
                             script], stdout=subprocess.PIPE, start_new_session=True)


def test_the_holder_answers_at_the_sentinel_and_closes_the_session_when_the_play_ends(tmp_path):
    released = tmp_path / "released"
    playbook = subprocess.Popen(["sleep", "30"])
    holder = _holder(playbook.pid, f"echo answer; echo {END}; echo after; cat >/dev/null; touch {released}")
    try:
        assert holder.stdout.read() == f"answer\n{END}\n".encode()  # its stdout ends at the sentinel
        time.sleep(1.0)
        assert holder.poll() is None and not released.exists(), "the session ended while the play lived"
        playbook.kill()
        playbook.wait()
        assert holder.wait(timeout=10) == 0
        assert released.exists()
    finally:
        for proc in (playbook, holder):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_a_session_that_ends_by_itself_ends_the_holder():
    holder = _holder(os.getpid(), "echo nothing-held; exit 3")
    assert holder.stdout.read() == b"nothing-held\n"
    assert holder.wait(timeout=10) == 3


def test_strict_host_key_checking_comes_after_the_hosts_own_options():
    assert lhio.strict_ssh({"user": "u", "options": ["StrictHostKeyChecking=accept-new"]})["options"] == [
        "StrictHostKeyChecking=accept-new", lhio.STRICT]  # ssh keeps the first value: an explicit choice wins
    assert lhio.strict_ssh({})["options"] == ["StrictHostKeyChecking=yes"]


def test_the_launch_step_takes_hostname_and_gpus_only_from_a_session_of_its_host():
    preflight = {"launch_host": {"host": "ctl", "identity": "ctl-box", "gpus": {"nvidia": 2, "amd": 0}}}
    assert lhio.launch_host_facts(preflight, "ctl") == ("ctl-box", (2, 0))
    assert lhio.launch_host_facts(preflight, "other") == ("", None)
    assert lhio.launch_host_facts(None, "ctl") == ("", None)
    assert lhio.launch_host_facts({"launch_host": {"host": "ctl", "identity": 5, "gpus": "x"}}, "ctl") == ("", None)


def _ctx(data_path: str | None) -> RunContext:
    controller = {"host": "10.0.0.1", "path": "/opt/proj", **({"data_path": data_path} if data_path else {})}
    return RunContext(cluster=cluster_model({"controller": controller, "workers": []}), controller_identity="pod-1", prebuild=False,
                      net_timeout_scale=None, cmd="train", cmd_dir="", fdl_env=None, build_host="localhost",
                      launch_command=None, project_dir="/opt/proj")


def _result(stdout: str, errors=(), warnings=()) -> lhio.SessionResult:
    return lhio.SessionResult("ctl", lh.parse_session(stdout), {}, list(errors), list(warnings), False)


def test_the_controllers_checks_are_the_launch_hosts_not_this_machines():
    # /nonexistent is absent here; the launch host said it is there: no data-path finding, named after it.
    found = _result(f"{lh.MARK_ID}=ctl-box\n__FLODL_DP_DIR__=1\n__FLODL_DP_READ__=1\n{END}\n")
    report = sweep.controller_report(_ctx("/nonexistent/data"), found)
    assert (report["host"], report["status"], report["data_path"]["state"]) == ("ctl-box", "ok", "ok")
    assert report["launch_host"] == "ctl" and report["errors"] == [] and report["warnings"] == []
    refused = _result(f"{lh.MARK_ID}=ctl-box\n__FLODL_DP_DIR__=1\n__FLODL_DP_READ__=1\n{END}\n",
                      errors=["flodl run lock: another run"], warnings=["run lock ...: taken over"])
    report = sweep.controller_report(_ctx("/nonexistent/data"), refused)
    assert report["status"] == "error" and report["errors"] == ["flodl run lock: another run"]
    assert report["warnings"] == ["run lock ...: taken over"]
    silent = _result("", errors=["launch host ctl: ssh host-key verification failed"])
    report = sweep.controller_report(_ctx("/nonexistent/data"), silent)
    assert report["data_path"]["state"] == "unknown" and report["status"] == "error"
