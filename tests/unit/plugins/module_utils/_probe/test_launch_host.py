"""The launch host's session: the run lock taken, refused, recovered and released by the real sh script."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import time

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._probe import launch_host as lh
from ansible_collections.flodl.cluster.plugins.module_utils._run import runlock as rl

RUN_A, RUN_B = "0123456789abcdef", "fedcba9876543210"
HOSTILE = "p 'q\"$(touch pwned)`id`\\ $HOME;*"


def _open(project: str, run_id: str | None, gpus: bool = False, **kw) -> tuple[lh.SessionFacts, subprocess.Popen[str]]:
    """The session as the holder sees it: its output up to the end sentinel; its stdin still open."""
    env = kw.pop("env", None)
    script = lh.session_script(project, data_path=kw.pop("data_path", project), reach=None, gpus=gpus,
                               run_id=run_id, **kw)
    proc = subprocess.Popen(["sh", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=env)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.strip() == lh.MARK_END:
            break
    return lh.parse_session("".join(lines)), proc


def _close(proc: subprocess.Popen[str]) -> None:
    proc.stdin.close()  # ansible-playbook ended
    assert proc.wait(timeout=10) == 0


def _run(project: str, run_id: str | None, **kw) -> lh.SessionFacts:
    facts, proc = _open(project, run_id, **kw)
    _close(proc)
    return facts


def _lock(project) -> str:
    return os.path.join(str(project), rl.LOCK_FILE_REL)


@pytest.fixture
def project(tmp_path):
    path = tmp_path / HOSTILE
    path.mkdir()
    return str(path)


def test_the_lock_is_taken_held_and_released_by_its_session(project, tmp_path):
    facts, holder = _open(project, RUN_A, gpus=True)
    assert facts.lock_state == "taken" and facts.complete
    assert facts.gpus is not None  # "<nvidia> <amd>", zeros without GPUs
    record, problem = rl.parse_lock(open(_lock(project), "rb").read())
    assert problem is None and record is not None
    assert (record.run_id, record.project, record.pid) == (RUN_A, project, holder.pid)
    assert not (tmp_path / "pwned").exists() and not os.path.exists("pwned")
    # A second run is refused, naming the holder; the same run is let through.
    facts = _run(project, RUN_B)
    assert facts.lock_state == "held"
    error, warning = lh.lock_outcome("ctl", project, facts)
    assert warning is None
    assert f"run lock held by pid {holder.pid} of {record.user}, run id {RUN_A}" in error
    assert "-e flodl_run_lock=false" in error
    assert _run(project, RUN_A).lock_state == "ours"
    _close(holder)  # the session releases the lock
    assert not os.path.exists(_lock(project))
    assert _run(project, RUN_B).lock_state == "taken"
    assert not os.path.exists(_lock(project))


def _space() -> str:
    """This process's ``<boot id>:<pid namespace>``, as the session computes its own."""
    boot = open("/proc/sys/kernel/random/boot_id").read().strip()
    return f"{boot}:{os.stat('/proc/self/ns/pid').st_ino}"


def _plant(project: str, record: rl.LockRecord, age: float = 0.0) -> None:
    """A lock last renewed ``age`` seconds ago (its mtime moved back)."""
    os.makedirs(os.path.dirname(_lock(project)), exist_ok=True)
    with open(_lock(project), "w") as fh:
        fh.write(record.to_json())
    now = time.time()
    os.utime(_lock(project), (now - age, now - age))


def _hostname() -> str:
    return subprocess.run(["hostname"], capture_output=True, text=True, check=True).stdout.strip()


def test_a_lock_whose_holder_is_gone_is_taken_over_with_a_message(project):
    gone = subprocess.Popen(["true"])
    gone.wait()
    host = _hostname()
    _plant(project, rl.LockRecord(run_id=RUN_A, controller_host=host, pid=gone.pid, started=1.0, project=project,
                                  user="u", space=_space(), pid_start="12345"))
    facts, proc = _open(project, RUN_B)
    assert (facts.lock_state, facts.lock_why) == ("stale", "gone")
    error, warning = lh.lock_outcome("ctl", project, facts)
    assert error is None
    assert warning == (f"run lock ctl:{_lock(project)}: its holder, pid {gone.pid} on {host} (run id {RUN_A}), "
                       "is gone; the lock was taken over for this run")
    assert json.loads(open(_lock(project)).read())["run_id"] == RUN_B
    _close(proc)


@pytest.mark.parametrize("space", ["other-boot:1", None])
def test_a_pid_of_another_namespace_or_an_older_record_is_not_judged_here(project, space):
    """An execution-environment container's pid names another process (or none) here: only the lease counts."""
    _plant(project, rl.LockRecord(run_id=RUN_A, controller_host=_hostname(), pid=2**31 - 2, started=1.0,
                                  project=project, user="u", space=space, pid_start="12345" if space else None))
    facts = _run(project, RUN_B)
    assert facts.lock_state == "held" and facts.lock_age is not None and facts.lock_age <= 2


@pytest.mark.parametrize("age, ttl, state", [(30, 60, "held"), (100, 60, "stale"), (100, None, "stale"),
                                             (100, 300, "held"), (-3600, 60, "held")])
def test_another_controllers_lock_is_honoured_until_its_lease_lapses(project, age, ttl, state):
    other = rl.LockRecord(run_id=RUN_A, controller_host="elsewhere", pid=1, started=1.0, project=project, user="u",
                          ttl=ttl, space="b:1", pid_start="1")
    _plant(project, other, age)
    facts = _run(project, RUN_B)
    assert facts.lock_state == state
    error, warning = lh.lock_outcome("ctl", project, facts, this_run=rl.this_run_text("ctl", RUN_B, "pod-b"))
    if state == "held":
        assert warning is None
        assert (f"is live on controller elsewhere (run lock held by pid 1 of u, run id {RUN_A}, lease renewed "
                f"{max(0, facts.lock_age)} s ago, over once {ttl or 60} s pass without renewal); this run "
                f"(controller ctl, run id {RUN_B}, started from pod-b) was not started") in error
    else:
        assert error is None and facts.lock_why == "expired"
        assert warning == (f"run lock ctl:{_lock(project)}: the lease of its holder, pid 1 on elsewhere (run id "
                           f"{RUN_A}), lapsed: not renewed for {facts.lock_age} s, over its 60 s (that run was killed "
                           "or cut off); the lock was taken over for this run")


def test_the_session_renews_its_lease_and_records_the_controller_identity(project):
    env = {**os.environ, "FLODL_HOST_NAME": " ctl b "}
    facts, holder = _open(project, RUN_A, ttl=6, origin="pod-a", env=env)  # renewed every second
    assert facts.lock_state == "taken"
    record, problem = rl.parse_lock(open(_lock(project), "rb").read())
    assert problem is None
    assert (record.controller_host, record.origin, record.ttl, record.space) == ("ctl_b", "pod-a", 6, _space())
    assert record.pid_start == open(f"/proc/{holder.pid}/stat").read().rsplit(")", 1)[1].split()[19]
    old = time.time() - 100
    os.utime(_lock(project), (old, old))
    deadline = time.monotonic() + 10
    while os.stat(_lock(project)).st_mtime < time.time() - 5 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert os.stat(_lock(project)).st_mtime >= time.time() - 5, "the lease was not renewed"
    # Same identity and namespace, live pid: its own session's lock is held, not judged gone.
    assert _run(project, RUN_B, env=env).lock_state == "held"
    _close(holder)
    assert not os.path.exists(_lock(project))


def test_garbage_a_fifo_or_a_link_in_place_of_the_lock_is_replaced_not_read(project, tmp_path):
    os.makedirs(os.path.dirname(_lock(project)))
    with open(_lock(project), "w") as fh:
        fh.write('{"pid": 1, "hostile": "' + "x" * 5000 + '"}')
    facts = _run(project, RUN_B)
    assert facts.lock_state == "stale"
    assert "over the 4096-byte limit" in lh.lock_outcome("ctl", project, facts)[1]
    os.mkfifo(_lock(project))  # would block a reader forever
    assert _run(project, RUN_A).lock_state == "stale"
    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(victim, _lock(project))
    facts, proc = _open(project, RUN_B)
    assert facts.lock_state == "stale"
    assert victim.read_text() == "keep" and not os.path.islink(_lock(project))
    _close(proc)


def test_no_project_or_a_link_out_of_it_is_an_error_before_anything_is_written(tmp_path):
    facts = _run(str(tmp_path / "absent"), RUN_A)
    assert facts.lock_state == "noproject"
    error, _w = lh.lock_outcome("ctl", str(tmp_path / "absent"), facts)
    assert error.startswith("launch host ctl: the run lock was not taken: the project directory")
    project, outside = tmp_path / "proj", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (project / "target").symlink_to(outside)
    facts = _run(str(project), RUN_A)
    assert facts.lock_state == "outside"
    assert list(outside.iterdir()) == [outside / "cluster"] and not list((outside / "cluster").iterdir())


def test_no_lock_without_a_run_id_and_the_controller_checks_still_answer(project):
    facts = _run(project, None, data_path="/nonexistent/data")
    assert facts.lock_state is None
    assert (facts.dir_ok, facts.read_ok, facts.complete) == (False, False, True)
    assert facts.identity
    assert not os.path.exists(os.path.dirname(_lock(project)))


def test_identity_prefers_flodl_host_name_trimmed(project):
    facts = _run(project, None, env={**os.environ, "FLODL_HOST_NAME": "  ctl-box \t"})
    assert facts.identity == "ctl-box"


def test_parse_session_reads_exact_sentinels_only():
    facts = lh.parse_session("noise __FLODL_LOCK__=taken\n__FLODL_LOCK_OLD__=zz\n__FLODL_LH_GPUS__=x y\n"
                             "__FLODL_LH_ID__=a\x01b\n")
    assert (facts.lock_state, facts.old_lock, facts.gpus, facts.identity, facts.complete) == (
        None, None, None, None, False)
    assert lh.lock_outcome("ctl", "/p", facts)[0].endswith(
        "the lock step printed no answer (the session ended early). Without it a second job could start on the "
        "same hosts and kill this run's ranks.")


def test_release_removes_only_this_runs_lock(project):
    os.makedirs(os.path.dirname(_lock(project)))
    rec = rl.LockRecord(run_id=RUN_A, controller_host="h", pid=1, started=1.0, project=project, user="u")
    with open(_lock(project), "w") as fh:
        fh.write(rec.to_json())
    subprocess.run(["sh", "-c", rl.release_script(project, RUN_B)], check=True)
    assert os.path.exists(_lock(project))
    subprocess.run(["sh", "-c", rl.release_script(project, RUN_A)], check=True)
    assert not os.path.exists(_lock(project))
    subprocess.run(["sh", "-c", rl.release_script(project, RUN_A)], check=True)  # nothing there: no error
    with pytest.raises(ValueError):
        rl.release_script(project, "'; rm -rf /")


def test_playbook_run_id_is_one_per_process():
    assert rl.playbook_run_id("c", 10, "500") == rl.playbook_run_id("c", 10, "500")
    assert len({rl.playbook_run_id("c", 10, "500"), rl.playbook_run_id("c", 10, "501"),
                rl.playbook_run_id("d", 10, "500")}) == 3
    assert all(ch in "0123456789abcdef" for ch in rl.playbook_run_id("c", 1, "1"))


@pytest.mark.parametrize("kind, expected", [
    ("unknown", "no host key for 10.0.0.5 is in known_hosts and its check is strict"),
    ("changed", "the host key 10.0.0.5 presented differs from the one in known_hosts"),
    ("revoked", "the host key 10.0.0.5 presented is marked @revoked in known_hosts"),
    (None, "launch host ctl: could not open its session (Connection refused)"),
])
def test_a_failed_session_is_an_error_naming_the_host_and_the_fix(kind, expected):
    text = lh.reachable_problem("ctl", "10.0.0.5", kind, "Connection refused")
    assert expected in text
    assert "after every build" in text


def test_under_umask_000_the_launch_hosts_lock_and_its_directory_are_not_group_or_world_writable(project):
    old = os.umask(0)
    try:
        facts, holder = _open(project, RUN_A)
        assert facts.lock_state == "taken"
        modes = [stat.S_IMODE(os.lstat(os.path.join(project, rel)).st_mode)
                 for rel in ("target", "target/cluster", rl.LOCK_FILE_REL)]
        _close(holder)
    finally:
        os.umask(old)
    assert modes == [0o755, 0o755, 0o644]
