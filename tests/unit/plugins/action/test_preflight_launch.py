"""flodl.cluster.preflight_check with a launch to follow (plugin_utils._launch.preflight_launch), through a stand-in ssh.

The stand-in ``ssh`` (conftest ``ssh_log``) runs each probe with /bin/sh on this machine, so the probes, the
run-lock check added to them and the lock taken here all run for real. The recorded run is topology's
``three_workers`` (ctl is this machine; gpu-b and gpu-c are reached over the stand-in), with its paths moved
under this test's directory.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._probe.live_ranks import MARK_RUNNING
from ansible_collections.flodl.cluster.plugins.module_utils._run import runlock
from ansible_collections.flodl.cluster.plugins.module_utils._run.prebuild_layout import binary_subpath
from ansible_collections.flodl.cluster.plugins.plugin_utils._host import launch_host as lhio
from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import sshreuse_io

from .conftest import CONTROLLER, load_case

ACTION = "preflight_check"
ALL_PHASES = ["preflight", "prebuild", "launch"]


@pytest.fixture
def run_with_launch(run_as, tmp_path, ssh_log):
    """``(case, project, run)``: the three workers' run on this machine's paths; ``run(**args)`` its preflight step.
    The masters' directories the passed steps kept are removed after the test."""
    loaded = load_case("topology", "three_workers", tmp_path)
    project, data = tmp_path / "proj", tmp_path / "data"
    project.mkdir()
    data.mkdir()
    shared = {"flodl_path": str(project), "flodl_controller_path": str(project), "flodl_data_path": str(data),
              "flodl_controller_data_path": str(data), "flodl_local_devices": [0]}
    loaded.task_vars.update(shared)
    for host_vars in loaded.task_vars["hostvars"].values():
        host_vars.update(shared)

    results = []

    def run(**args):
        loaded.args = {"phases": ALL_PHASES, **args}
        results.append(run_as(ACTION, loaded))
        return results[-1]

    yield loaded, project, run
    for result in results:  # the masters' directory a passed step keeps for the launch
        sshreuse_io.close_masters(result.get(sshreuse_io.RESULT_KEY))


def _probes(ssh_log):
    return [line for line in ssh_log.read_text(encoding="utf-8").splitlines() if "__FLODL_END__" in line]


def test_a_run_with_a_launch_takes_the_lock_checks_for_live_ranks_and_keeps_the_masters(run_with_launch, ssh_log):
    _loaded, project, run = run_with_launch
    result = run()
    assert not result.get("failed"), result
    assert {e["status"] for e in result["per_host"].values()} == {"ok"}, result["per_host"]
    assert (project / runlock.LOCK_FILE_REL).is_file()  # taken here, for this ansible-playbook run
    probes = _probes(ssh_log)
    assert len(probes) == 2 and all(MARK_RUNNING in p for p in probes), probes  # gpu-b and gpu-c
    control_dir = result[sshreuse_io.RESULT_KEY]  # the launcher's fan-out reuses the probes' masters
    assert all(f"ControlPath={control_dir}/" in p for p in probes), probes
    assert os.path.isdir(control_dir) and lhio.RESULT_KEY not in result  # no launch host


def test_a_live_rank_of_this_project_on_a_worker_fails_that_worker(run_with_launch, ssh_log):
    loaded, project, run = run_with_launch
    host_vars = loaded.task_vars["hostvars"]["gpu-c"]
    binary = project / binary_subpath("gpu-c", host_vars["flodl_arch"], loaded.task_vars["flodl_cmd"])
    binary.parent.mkdir(parents=True)
    shutil.copy("/bin/sleep", binary)
    live = subprocess.Popen([str(binary), "30"])
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # its /proc entry names the copied binary once its exec is done
            try:
                if os.readlink(f"/proc/{live.pid}/exe") == str(binary):
                    break
            except OSError:
                pass
            time.sleep(0.01)
        result = run()
    finally:
        live.kill()
        live.wait()
    assert result["per_host"]["gpu-c"]["status"] == "failed", result["per_host"]
    assert f"another run of project {project}" in result["per_host"]["gpu-c"]["msg"]
    assert result["per_host"]["gpu-b"]["status"] == "ok"
    # The run stops at this preflight: the masters are closed, none is handed to a launch.
    assert sshreuse_io.RESULT_KEY not in result


def test_a_launch_host_outside_the_inventory_fails_every_worker_by_name(run_with_launch, ssh_log):
    loaded, _project, run = run_with_launch
    loaded.task_vars["flodl_launch_host"] = "nohost"
    result = run()
    assert not result.get("failed") and result["refused"] is True, result
    why = "controller: flodl_launch_host 'nohost' is not an inventory host"
    assert any(why in p for p in result["problems"]), result["problems"]
    assert {h: e["status"] for h, e in result["per_host"].items()} == dict.fromkeys(result["per_host"], "failed")
    assert all(why in e["msg"] for e in result["per_host"].values())
    assert not ssh_log.exists()  # refused before any probe


def test_a_project_missing_where_the_launch_runs_is_refused_before_contact(run_with_launch, ssh_log, tmp_path):
    """Issue 38: with the launch in an execution-environment container the project was not mounted there;
    preflight passed and the launch failed with rc 127. Now refused before any probe, naming the fix."""
    loaded, _project, run = run_with_launch
    missing = tmp_path / "not-mounted"
    loaded.task_vars["flodl_project_dir"] = str(missing)
    result = run()
    assert result["refused"] is True, result
    why = f"controller: the project directory {missing} does not exist on this machine, where the launch runs"
    assert any(why in p for p in result["problems"]), result["problems"]
    assert all(why in e["msg"] for e in result["per_host"].values())
    assert not ssh_log.exists() and not missing.exists()  # nothing probed, nothing created


def test_a_live_run_holding_the_lock_here_refuses_before_contact(run_with_launch, ssh_log, monkeypatch):
    _loaded, project, run = run_with_launch
    assert not run().get("failed")
    probes_before = len(_probes(ssh_log))
    # Another ansible-playbook run of the same project (another holder process), while the first one lives.
    monkeypatch.setattr(os, "getppid", os.getpid)
    result = run()
    assert not result.get("failed") and result["refused"] is True, result
    assert "the run lock was not taken; nothing was started" in result["msg"], result
    for found in result["per_host"].values():  # every worker fails in its own report, none in the step's
        assert found["status"] == "failed" and found["msg"].startswith("the run lock was not taken"), found
        assert f"another run of project {project} is live" in found["msg"]
    assert len(_probes(ssh_log)) == probes_before  # no worker was probed


def test_check_mode_takes_no_lock(run_with_launch, ssh_log):
    loaded, project, run = run_with_launch
    loaded.check_mode = True
    result = run()
    assert not result.get("failed"), result
    assert not (project / runlock.LOCK_FILE_REL).exists()


def test_with_a_launch_host_its_session_answers_for_the_controller(run_with_launch, ssh_log):
    loaded, _project, run = run_with_launch
    # The session there answers and ends: without the run lock no holder keeps it open past this test.
    loaded.task_vars.update(flodl_launch_host="gpu-b", flodl_run_lock=False)
    result = run()
    assert not result.get("failed"), result
    assert result[lhio.RESULT_KEY]["host"] == "gpu-b"
    assert result[lhio.RESULT_KEY]["identity"] == result["controller_identity"] == CONTROLLER  # read there
    assert result["controller"]["launch_host"] == "gpu-b"
    # The launcher runs there: no masters are kept here for it. With the run lock off, no probe asks for live ranks.
    assert sshreuse_io.RESULT_KEY not in result
    assert not any(MARK_RUNNING in p for p in _probes(ssh_log))
