"""module_utils._core.group_watch with real processes: a group outlives neither its starter nor ansible-playbook."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from ansible_collections.flodl.cluster.plugins.module_utils._core import group_watch
from ansible_collections.flodl.cluster.plugins.module_utils._core.group_watch import GroupWatch, start_channel_watch

STARTER = textwrap.dedent(
    """\
    import subprocess, sys, time
    sys.path[:0] = {path!r}
    from ansible_collections.flodl.cluster.plugins.module_utils._core.group_watch import GroupWatch
    watch = GroupWatch(grace=1.0, watch_pid={watch_pid})
    watch.cleanup([["touch", {canary!r}]])
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    watch.add(proc.pid)
    print(proc.pid, flush=True)
    time.sleep(60)
    """
)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    # a zombie whose parent (the starter) is gone is reaped by init at once
    return Path(f"/proc/{pgid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def _wait_gone(pgid: int, seconds: float) -> float:
    start = time.monotonic()
    while _group_alive(pgid) and time.monotonic() - start < seconds:
        time.sleep(0.05)
    return time.monotonic() - start


def _starter(tmp_path: Path, watch_pid: int = 0) -> tuple[subprocess.Popen, int, Path]:
    canary = tmp_path / "cleaned"
    code = STARTER.format(path=sys.path, watch_pid=watch_pid, canary=str(canary))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    pgid = int(proc.stdout.readline())
    return proc, pgid, canary


def test_sigkill_of_the_starter_stops_the_group_then_runs_the_cleanup(tmp_path):
    proc, pgid, canary = _starter(tmp_path)
    assert _group_alive(pgid)
    proc.kill()
    proc.wait()
    assert _wait_gone(pgid, 5) < 3  # TERM at once; the grace (1 s) is not even needed by sleep
    deadline = time.monotonic() + 5
    while not canary.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert canary.exists()


def test_the_watched_pid_going_stops_the_group_while_the_starter_lives(tmp_path):
    playbook = subprocess.Popen(["sleep", "60"])
    proc, pgid, canary = _starter(tmp_path, watch_pid=playbook.pid)
    try:
        time.sleep(0.5)
        assert _group_alive(pgid)
        playbook.kill()  # left a zombie (not reaped yet): still counts as gone
        assert _wait_gone(pgid, 5) < 3
        playbook.wait()
    finally:
        proc.kill()
        proc.wait()


def test_done_leaves_the_group_alone_and_a_removed_group_is_not_signalled(tmp_path):
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        watch = GroupWatch(grace=0.5)
        watch.add(sleeper.pid)
        watch.add(other.pid)
        watch.remove(other.pid)
        watch.done()
        assert watch.proc.wait(timeout=5) == 0
        assert sleeper.poll() is None and other.poll() is None
        # The lifeline closing without "done" stops what is still registered, and only that.
        watch = GroupWatch(grace=0.5)
        watch.add(sleeper.pid)
        assert watch.proc.stdin is not None
        watch.proc.stdin.close()
        assert watch.proc.wait(timeout=5) == 1
        assert sleeper.wait(timeout=5) == -signal.SIGTERM
        assert other.poll() is None
    finally:
        for p in (sleeper, other):
            if p.poll() is None:
                p.kill()
            p.wait()


def test_a_group_ignoring_sigterm_gets_sigkill_after_the_grace(tmp_path):
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                                 "signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"],
                                start_new_session=True, stdout=subprocess.PIPE, text=True)
    assert stubborn.stdout is not None and stubborn.stdout.readline() == "ready\n"
    watch = GroupWatch(grace=1.0)
    watch.add(stubborn.pid)
    start = time.monotonic()
    assert watch.proc.stdin is not None
    watch.proc.stdin.close()
    assert stubborn.wait(timeout=10) == -signal.SIGKILL
    assert 0.9 <= time.monotonic() - start < 5


def test_the_watcher_survives_a_kill_of_the_starters_process_group_and_names_itself(tmp_path):
    watch = GroupWatch(grace=0.5)
    try:
        assert os.getsid(watch.proc.pid) == watch.proc.pid  # its own session: no group signal reaches it
        deadline = time.monotonic() + 5
        cmdline = [b""]
        while cmdline == [b""] and time.monotonic() < deadline:  # empty until its exec is done
            cmdline = Path(f"/proc/{watch.proc.pid}/cmdline").read_bytes().split(b"\0")
            time.sleep(0.01)
        assert group_watch.NAME.encode() in cmdline and len(b" ".join(cmdline)) < 600
    finally:
        watch.done()


def test_a_channel_whose_reader_closed_is_noticed():
    read_end, write_end = os.pipe()
    gone = threading.Event()
    stop = start_channel_watch(write_end, gone.set)
    try:
        assert not gone.wait(0.3)  # a live reader: nothing
        os.close(read_end)
        assert gone.wait(3)
    finally:
        stop.set()
        os.close(write_end)


def test_group_alive_counts_a_zombie_as_gone():
    """The watcher's check, as the launch step's stop calls it: a live group, its zombie leader, no group."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        assert group_watch.group_alive(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "no zombie"
            time.sleep(0.01)
        os.killpg(proc.pid, 0)  # the group still exists for the kernel (the unreaped leader) ...
        assert not group_watch.group_alive(proc.pid)  # ... but nothing of it runs
    finally:
        proc.kill()
        proc.wait()
    assert not group_watch.group_alive(proc.pid)


def test_group_alive_finds_a_member_that_outlives_its_leader():
    """The leader answers first when it runs; once it is a zombie, every process is looked at for the group's."""
    leader = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!"], start_new_session=True, stdout=subprocess.PIPE,
                              text=True)
    assert leader.stdout is not None
    member = int(leader.stdout.readline())
    try:
        deadline = time.monotonic() + 5
        while Path(f"/proc/{leader.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the leader did not end"
            time.sleep(0.01)
        assert group_watch.group_alive(leader.pid)  # its leader is a zombie, its member runs
        os.kill(member, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while group_watch.group_alive(leader.pid):
            assert time.monotonic() < deadline, "the member's end was not seen"
            time.sleep(0.01)
    finally:
        try:
            os.kill(member, signal.SIGKILL)
        except ProcessLookupError:
            pass
        leader.wait()


def test_a_held_group_outlives_its_starter_until_the_watched_process_goes(tmp_path):
    """walk_in: the launcher outlives the step that started it, and still not ansible-playbook."""
    playbook = subprocess.Popen(["sleep", "60"])  # stands for ansible-playbook
    group = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        watch = GroupWatch(grace=1.0, watch_pid=playbook.pid)
        watch.cleanup([["touch", str(tmp_path / "cleaned")]])
        watch.add(group.pid)
        watch.hold()  # the starter lets go: its lifeline closes
        time.sleep(1.0)
        assert _group_alive(group.pid) and watch.proc.poll() is None
        playbook.kill()
        playbook.wait()
        assert _wait_gone(group.pid, 10) < 10
        deadline = time.monotonic() + 10
        while not (tmp_path / "cleaned").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (tmp_path / "cleaned").exists()
    finally:
        for proc in (playbook, group):
            proc.kill()
            proc.wait()


def test_a_held_watcher_ends_with_its_groups(tmp_path):
    playbook = subprocess.Popen(["sleep", "60"])
    group = subprocess.Popen(["sleep", "0.5"], start_new_session=True)
    try:
        watch = GroupWatch(grace=1.0, watch_pid=playbook.pid)
        watch.cleanup([["touch", str(tmp_path / "cleaned")]])
        watch.add(group.pid)
        watch.hold()
        group.wait()
        assert watch.proc.wait(timeout=10) == 0 and not (tmp_path / "cleaned").exists()
        assert playbook.poll() is None
    finally:
        playbook.kill()
        playbook.wait()


def test_a_gated_group_runs_only_once_released(tmp_path):
    """Issue 38: a build started, then its starter killed before it told the watcher: nothing may run."""
    canary = tmp_path / "ran"
    cut = group_watch.start_group(["touch", str(canary)], str(tmp_path), dict(os.environ), subprocess.DEVNULL)
    cut.stdin.close()  # the starter died: its end of the gate closes without a word
    assert cut.wait(timeout=10) == 97 and not canary.exists()
    ok = group_watch.start_group(["touch", str(canary)], str(tmp_path), dict(os.environ), subprocess.DEVNULL)
    group_watch.release(ok)
    assert ok.wait(timeout=10) == 0 and canary.exists()
    assert os.getpgid(0) != ok.pid  # its own group, as before


def test_no_build_starts_once_the_watcher_fired(tmp_path):
    """Issue 38: after ansible-playbook is gone the watcher stops what it knows and exits; a build the step's
    threads would start after that is refused instead of running for its whole timeout."""
    import errno

    import pytest

    from ansible_collections.flodl.cluster.plugins.module_utils._prebuild import build_process

    playbook = subprocess.Popen(["sleep", "60"])
    watch = GroupWatch(grace=0.5, watch_pid=playbook.pid)
    assert watch.alive()
    playbook.kill()
    playbook.wait()
    watch.proc.wait(timeout=10)  # it fired and exited
    canary = tmp_path / "built"
    with open(tmp_path / "log", "wb") as log, pytest.raises(OSError) as exc:
        build_process._run_bounded(["touch", str(canary)], str(tmp_path), dict(os.environ), log, 30, watch)
    assert exc.value.errno == errno.ECANCELED and not canary.exists()
