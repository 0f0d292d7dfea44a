"""The lock taken on this machine (runlock_io.take_lock) and its lease holder (lock_holder.keep_lease), for real."""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._run import runlock as rl
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc import lock_holder
from ansible_collections.flodl.cluster.plugins.plugin_utils._host import runlock_io


RUN_A, RUN_B = "0123456789abcdef", "fedcba9876543210"


def _lock(project) -> str:
    return os.path.join(str(project), rl.LOCK_FILE_REL)


def _read(project) -> dict:
    with open(_lock(project), encoding="utf-8") as fh:
        return json.load(fh)


def _age(project, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(_lock(project), (then, then))


@pytest.fixture
def sleeper():
    """A stand-in ansible-playbook: a live process of this pid namespace."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


def test_the_record_names_the_controller_its_namespace_and_lease(tmp_path, sleeper):
    assert runlock_io.take_lock(str(tmp_path), "ctl-a", sleeper.pid, run_id=RUN_A, ttl=30) == (None, [], True)
    body = _read(tmp_path)
    assert (body["controller_host"], body["pid"], body["run_id"], body["ttl"]) == ("ctl-a", sleeper.pid, RUN_A, 30)
    assert body["space"] == runlock_io.pid_space() and body["pid_start"] == lock_holder.process_start(sleeper.pid)
    # The same run again (the launch step after cluster_train's preflight): let through, nothing rewritten.
    assert runlock_io.take_lock(str(tmp_path), "ctl-a", sleeper.pid, run_id=RUN_A) == (None, [], False)


def test_two_live_runs_from_two_controllers_refuse_each_other_naming_both(tmp_path, sleeper):
    runlock_io.take_lock(str(tmp_path), "ctl-a", sleeper.pid, run_id=RUN_A)
    refusal, warnings, written = runlock_io.take_lock(str(tmp_path), "ctl-b", os.getpid(), run_id=RUN_B)
    assert not warnings and not written
    assert f"live on controller ctl-a (run lock held by pid {sleeper.pid} of " in refusal
    assert f"this run (controller ctl-b, run id {RUN_B}) was not started" in refusal
    assert _read(tmp_path)["run_id"] == RUN_A


def test_a_dead_holder_of_this_controller_and_namespace_frees_the_lock_at_once(tmp_path):
    gone = subprocess.Popen(["true"])
    runlock_io.take_lock(str(tmp_path), "ctl-a", gone.pid, run_id=RUN_A)
    gone.wait()
    refusal, warnings, written = runlock_io.take_lock(str(tmp_path), "ctl-a", os.getpid(), run_id=RUN_B)
    assert refusal is None and written
    assert f"its process {gone.pid} on ctl-a is gone" in warnings[0]
    # Another controller identity cannot judge that pid (it may name another process there): the lease decides.
    os.unlink(_lock(tmp_path))
    runlock_io.take_lock(str(tmp_path), "ctl-a", gone.pid, run_id=RUN_A)
    refusal = runlock_io.take_lock(str(tmp_path), "ctl-b", os.getpid(), run_id=RUN_B)[0]
    assert f"live on controller ctl-a (run lock held by pid {gone.pid} of " in refusal


def test_a_lapsed_lease_is_taken_over_by_any_controller(tmp_path, sleeper):
    runlock_io.take_lock(str(tmp_path), "ctl-a", sleeper.pid, run_id=RUN_A, ttl=30)
    _age(tmp_path, 25)
    assert runlock_io.take_lock(str(tmp_path), "ctl-b", os.getpid(), run_id=RUN_B)[0] is not None
    _age(tmp_path, 35)
    refusal, warnings, written = runlock_io.take_lock(str(tmp_path), "ctl-b", os.getpid(), run_id=RUN_B)
    assert refusal is None and written
    assert "s ago, over its 30 s: the run on ctl-a ended without releasing it (killed, or cut off)" in warnings[0]
    assert _read(tmp_path)["controller_host"] == "ctl-b"


def test_a_lock_from_the_future_counts_as_live(tmp_path, sleeper):
    """Only the file system's clock is compared; a stamp ahead of it (its clock stepped back) is never lapsed."""
    runlock_io.take_lock(str(tmp_path), "ctl-a", sleeper.pid, run_id=RUN_A, ttl=30)
    _age(tmp_path, -3600)
    assert runlock_io.take_lock(str(tmp_path), "ctl-b", os.getpid(), run_id=RUN_B)[0] is not None


def test_the_clock_read_leaves_nothing_behind(tmp_path):
    before = time.time()
    assert abs(runlock_io.fs_now(str(tmp_path)) - before) < 5
    assert os.listdir(tmp_path) == []


@pytest.fixture
def fast(monkeypatch):
    monkeypatch.setattr(lock_holder, "POLL_SECONDS", 0.02)


def _keep(playbook: subprocess.Popen, path: str, run_id: str = RUN_A) -> tuple[threading.Thread, list[int]]:
    rc: list[int] = []
    start = lock_holder.process_start(playbook.pid)
    thread = threading.Thread(target=lambda: rc.append(lock_holder.keep_lease(playbook.pid, start, path, run_id, 0.1)))
    thread.start()
    return thread, rc


def test_the_holder_renews_while_the_playbook_lives_then_releases(tmp_path, sleeper, fast):
    runlock_io.take_lock(str(tmp_path), "ctl-a", sleeper.pid, run_id=RUN_A)
    _age(tmp_path, 100)
    thread, rc = _keep(sleeper, _lock(tmp_path))
    deadline = time.monotonic() + 5
    while os.stat(_lock(tmp_path)).st_mtime < time.time() - 50 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.stat(_lock(tmp_path)).st_mtime >= time.time() - 50, "not renewed"
    sleeper.kill()
    sleeper.wait()
    thread.join(timeout=5)
    assert rc == [0] and not os.path.exists(_lock(tmp_path))


def test_the_holder_never_renews_nor_removes_another_runs_lock(tmp_path, sleeper, fast):
    runlock_io.take_lock(str(tmp_path), "ctl-b", sleeper.pid, run_id=RUN_B)  # taken over meanwhile
    _age(tmp_path, 100)
    thread, rc = _keep(sleeper, _lock(tmp_path))
    thread.join(timeout=5)
    assert rc == [1]
    assert _read(tmp_path)["run_id"] == RUN_B and os.stat(_lock(tmp_path)).st_mtime < time.time() - 50
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert lock_holder.keep_lease(gone.pid, "1", _lock(tmp_path), RUN_A, 0.1) == 0  # its playbook already gone
    assert _read(tmp_path)["run_id"] == RUN_B


def test_the_holder_script_runs_alone_and_releases_when_the_playbook_ends(tmp_path, sleeper):
    runlock_io.take_lock(str(tmp_path), "ctl-a", sleeper.pid, run_id=RUN_A, ttl=6)
    runlock_io.keep_lease(_lock(tmp_path), RUN_A, sleeper.pid, 6)
    time.sleep(0.5)
    assert os.path.exists(_lock(tmp_path))
    sleeper.kill()
    sleeper.wait()
    deadline = time.monotonic() + 10
    while os.path.exists(_lock(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(_lock(tmp_path))


@pytest.mark.parametrize("value, ttl", [(None, 60), ("", 60), ("12", 12), (12.7, 12), (4, 60), (10**9, 86400)])
def test_the_ttl_read_from_the_run(value, ttl):
    from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import run_lock_ttl

    assert run_lock_ttl({} if value is None else {"flodl_run_lock_ttl": value}, None) == ttl
