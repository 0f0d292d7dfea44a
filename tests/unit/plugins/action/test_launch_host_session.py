"""The launch host's session for real (plugin_utils._host.launch_host, runlock_io), through a stand-in ssh.

The stand-in ``ssh`` (conftest ``ssh_log``) runs the remote command with /bin/sh here, so the
session script, its run lock (under this test's project) and its reach check of the workers all run
for real; a variable makes it fail as ssh fails, or hang. Every session is stopped by its group's id.
The recorded case is preflight's ``controller_only``; the launch host is its inventory host gpu-b
(alice@192.0.2.12, which nothing reaches).
"""
from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._run import runlock
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_launch import RemoteLaunchError
from ansible_collections.flodl.cluster.plugins.plugin_utils._host import launch_host as lhio
from ansible_collections.flodl.cluster.plugins.plugin_utils._host import runlock_io
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import read_run

from .conftest import CONTROLLER, make_action

ACTION = "preflight_check"


@pytest.fixture
def sessions():
    started: list[lhio.Session] = []
    yield started.append
    for session in started:  # the holder would keep the lock while this test process lives
        try:
            os.killpg(session.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        session.proc.wait()


@pytest.fixture
def setup(case, tmp_path):
    loaded = case("controller_only")
    project = tmp_path / "proj"
    project.mkdir()
    loaded.task_vars.update(flodl_controller_path=str(project), flodl_launch_host="gpu-b",
                            ansible_play_hosts_all=["ctl", "gpu-b", "gpu-c"])
    action = make_action(ACTION, loaded)
    return loaded, action, project


def _lock(action, loaded, project) -> tuple[bool, str | None]:
    """The lock step as an action takes it, with the run it read (its knobs: flodl_run_lock, its ttl)."""
    ctx = read_run(action, loaded.task_vars, ["launch"], connections=False)
    return runlock_io.lock_for_action(action, loaded.task_vars, ctx, str(project))


def open_session(setup, sessions, **kw: Any) -> lhio.Session:
    loaded, action, _project = setup
    ctx = read_run(action, loaded.task_vars, ["launch"], connections=False)
    session = lhio.start(action, loaded.task_vars, ctx, **kw)
    assert session is not None
    sessions(session)
    return session


def test_the_session_takes_the_lock_there_checks_the_workers_reach_and_answers(setup, sessions, ssh_log):
    _loaded, _action, project = setup
    session = open_session(setup, sessions, lock=True, reach=True, gpus=True)
    found = lhio.finish(session, str(project), 10.0)
    assert found.errors == [] and found.warnings == [] and found.host == "gpu-b"
    assert found.facts.identity == CONTROLLER  # FLODL_HOST_NAME, read there and found.facts.lock_state == "taken"
    assert set(found.reach) == {"gpu-c"} and found.reach["gpu-c"][0] == 0  # not the launch host itself
    assert (project / runlock.LOCK_FILE_REL).is_file()  # held while the holder (this run) lives
    fields = lhio.result_fields(found)
    assert fields["host"] == "gpu-b" and fields["identity"] == found.facts.identity
    first = ssh_log.read_text(encoding="utf-8").splitlines()[0]
    assert "-l alice" in first and "StrictHostKeyChecking=yes" in first and "192.0.2.12" in first


def test_a_live_run_holding_the_lock_there_refuses_this_one(setup, sessions, ssh_log, monkeypatch):
    _loaded, _action, project = setup
    first = open_session(setup, sessions, lock=True, reach=False)
    assert lhio.finish(first, str(project), 10.0).errors == []
    monkeypatch.setattr(lhio, "this_run_id", lambda: "0123456789abcdef")  # a second ansible-playbook run
    second = lhio.finish(open_session(setup, sessions, lock=True, reach=False), str(project), 10.0)
    assert len(second.errors) == 1 and f"flodl run lock: another run of project {project} is live" in second.errors[0]


def test_a_lock_left_by_a_killed_session_is_taken_over_with_a_warning(setup, sessions, ssh_log, monkeypatch):
    _loaded, _action, project = setup
    first = open_session(setup, sessions, lock=True, reach=False)
    assert lhio.finish(first, str(project), 10.0).errors == []
    os.killpg(first.proc.pid, signal.SIGKILL)  # no release: the lock stays, its holder gone
    first.proc.wait()
    held, _problem = runlock.parse_lock((project / runlock.LOCK_FILE_REL).read_bytes())
    assert held is not None
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{held.pid}") and time.monotonic() < deadline:
        time.sleep(0.05)  # the killed shell is a zombie, alive to kill -0, until PID 1 reaps it
    monkeypatch.setattr(lhio, "this_run_id", lambda: "0123456789abcdef")
    second = lhio.finish(open_session(setup, sessions, lock=True, reach=False), str(project), 10.0)
    assert second.errors == [] and len(second.warnings) == 1
    assert second.warnings[0].startswith(f"run lock gpu-b:{project}/") and "taken over for this run" in second.warnings[0]


@pytest.mark.parametrize("mode, words", [
    ("down", "launch host gpu-b: could not open its session (ssh: connect to host 192.0.2.12 port 22: No route to host)"),
    ("hostkey", "launch host gpu-b: ssh host-key verification failed: no host key for 192.0.2.12 is in known_hosts"),
])
def test_a_session_that_fails_says_why_and_how_to_fix(setup, sessions, ssh_log, monkeypatch, mode, words):
    monkeypatch.setenv("FAKE_SSH", mode)
    _loaded, _action, project = setup
    found = lhio.finish(open_session(setup, sessions, lock=True, reach=False), str(project), 10.0)
    assert len(found.errors) == 1 and found.errors[0].startswith(words), found.errors


def test_a_session_that_never_answers_is_stopped_at_its_deadline(setup, sessions, ssh_log, monkeypatch):
    monkeypatch.setenv("FAKE_SSH", "hang")
    _loaded, _action, project = setup
    found = lhio.finish(open_session(setup, sessions, lock=False, reach=False), str(project), 0.3)
    assert "could not open its session (no answer within 0.3s)" in found.errors[0]


def test_a_launch_host_outside_the_inventory_is_refused_by_name(setup, ssh_log):
    loaded, action, _project = setup
    loaded.task_vars["flodl_launch_host"] = "nohost"
    ctx = read_run(action, loaded.task_vars, ["launch"], connections=False)
    with pytest.raises(RemoteLaunchError) as raised:
        lhio.start(action, loaded.task_vars, ctx, lock=False)
    assert "flodl_launch_host 'nohost' is not an inventory host" in str(raised.value)
    assert not ssh_log.exists()


def test_the_lock_step_of_an_action_takes_it_on_the_launch_host(setup, sessions, ssh_log, monkeypatch):
    loaded, action, project = setup
    started: list[lhio.Session] = []
    real_start = lhio.start
    monkeypatch.setattr(lhio, "start", lambda *a, **kw: started.append(real_start(*a, **kw)) or started[-1])
    try:
        assert _lock(action, loaded, project) == (True, None)
    finally:
        for session in started:
            sessions(session)
    assert (project / runlock.LOCK_FILE_REL).is_file()


def test_the_lock_step_here_takes_the_local_lock_or_says_why_not(setup, tmp_path, ssh_log, leases):
    loaded, action, project = setup
    loaded.task_vars["flodl_launch_host"] = "localhost"
    loaded.task_vars["flodl_run_lock_ttl"] = "12"  # a survey's answer is text
    assert _lock(action, loaded, project) == (True, None)
    held, _problem = runlock.parse_lock((project / runlock.LOCK_FILE_REL).read_bytes())
    # Keyed by the controller identity the whole run uses (FLODL_HOST_NAME), renewed by a holder of its own.
    assert (held.controller_host, held.ttl, held.pid, held.run_id) == (CONTROLLER, 12, os.getppid(), lhio.this_run_id())
    assert leases == [(str(project / runlock.LOCK_FILE_REL), held.run_id, os.getppid(), 12)]
    assert _lock(action, loaded, project) == (True, None)  # the same run
    assert len(leases) == 1
    outside = tmp_path / "outside"
    outside.mkdir()
    other = tmp_path / "other"
    other.mkdir()
    (other / "target").symlink_to(outside)
    taken, why = _lock(action, loaded, other)
    assert taken is False and why.startswith("controller: run lock: ") and list(outside.iterdir()) == []
    loaded.task_vars["flodl_run_lock"] = False
    assert _lock(action, loaded, other) == (False, None)
    assert not ssh_log.exists()
