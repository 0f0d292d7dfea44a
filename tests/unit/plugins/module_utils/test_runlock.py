"""Run lock: record round trip, a parser that trusts nothing, staleness, and the real probe snippet."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils import runlock as rl

REC = rl.LockRecord(run_id="0123abcd", controller_host="ctl", pid=4242, started=1000.5, project="/srv/proj",
                    user="alice")


# ------------------------------------------------------------ record and parser


def test_record_round_trip():
    text = REC.to_json()
    assert text == (
        '{"controller_host":"ctl","format":"flodl-run-lock/1","pid":4242,"project":"/srv/proj",'
        '"run_id":"0123abcd","started":1000.5,"user":"alice"}\n'
    )
    assert rl.parse_lock(text) == (REC, None)
    assert rl.parse_lock(text.encode()) == (REC, None)


def test_new_run_ids_differ():
    assert len({rl.new_run_id() for unused in range(20)}) == 20


def _with(**changes):
    body = json.loads(REC.to_json())
    body.update(changes)
    return json.dumps(body)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"x" * 5000, "5000 bytes, over the 4096-byte limit"),
        ("hunter2 not json", "(16 bytes) is not JSON"),
        (b"\xff\xfe", "is not JSON"),
        ("[1, 2]", "holds a JSON list, not an object"),
        (_with(format="other"), "not a flodl run lock"),
        (_with(pid=True), "pid is not a positive integer"),
        (_with(pid=0), "pid is not a positive integer"),
        (_with(pid="42"), "pid is not a positive integer"),
        (_with(started="yesterday"), "started is not a time"),
        (_with(started=-1), "started is not a time"),
        (_with(user=""), "user is not a non-empty string"),
        (_with(project=["x"]), "project is not a non-empty string"),
        (_with(run_id="a" * 2000), "run_id is not a non-empty string"),
        (_with(controller_host="ctl\x1b[2J"), "controller_host holds control characters"),
    ],
)
def test_parse_lock_refuses_what_it_cannot_trust(data, problem):
    record, why = rl.parse_lock(data)
    assert record is None and problem in why
    assert "hunter2" not in why


def test_parse_lock_accepts_an_integer_start():
    record, why = rl.parse_lock(_with(started=1000))
    assert why is None and record.started == 1000.0


# ------------------------------------------------------------ staleness


def test_own_lock_with_a_dead_pid_is_stale():
    assert rl.stale_reason(REC, this_host="ctl", now=2000, pid_alive=False) == "its process 4242 on ctl is gone"


def test_own_lock_with_a_live_pid_holds():
    assert rl.stale_reason(REC, this_host="ctl", now=2000, pid_alive=True, pid_started=999.0) is None
    assert rl.stale_reason(REC, this_host="ctl", now=2000, pid_alive=None) is None


def test_own_lock_with_a_reused_pid_is_stale():
    reason = rl.stale_reason(REC, this_host="ctl", now=2000, pid_alive=True, pid_started=1500.0)
    assert reason == "process 4242 on ctl is a newer process that reused the pid"


def test_other_controllers_lock_holds_until_max_age():
    assert rl.stale_reason(REC, this_host="other", now=1000.5 + 86400, pid_alive=None) is None
    assert rl.stale_reason(REC, this_host="other", now=1000.5 + 31 * 86400, pid_alive=None) == (
        "it was taken 31 days ago on ctl"
    )
    assert rl.stale_reason(REC, this_host="other", now=5000, pid_alive=None, max_age=100) is not None


# ------------------------------------------------------------ the probe snippet, run for real


def test_parse_running():
    assert rl.parse_running("noise\n__FLODL_RUNNING__=3\n") == 3
    assert rl.parse_running("__FLODL_RUNNING__=x\n") is None
    assert rl.parse_running("") is None


@pytest.mark.parametrize("bad", ["relative/train", "/a\nb", "/a\0b"])
def test_running_script_refuses_unsafe_paths(bad):
    with pytest.raises(ValueError):
        rl.running_script(bad)


def _count(binary: str) -> int | None:
    proc = subprocess.run(["sh", "-c", rl.running_script(binary)], capture_output=True, text=True, timeout=30,
                          check=False)
    return rl.parse_running(proc.stdout)


@pytest.fixture
def fake_rank(tmp_path):
    """A copy of sleep at a path with a quote, a space and awk/glob metacharacters in it."""
    directory = tmp_path / "it's a \"proj\" [x]*$HOME"
    directory.mkdir()
    binary = directory / "train"
    shutil.copy(shutil.which("sleep"), binary)
    procs = [subprocess.Popen([str(binary), "30"]) for unused in range(2)]
    time.sleep(0.2)
    yield str(binary), procs
    for p in procs:
        p.kill()
        p.wait()


def test_running_script_counts_processes_of_that_binary(fake_rank):
    binary, procs = fake_rank
    assert _count(binary) == 2
    # A prefix of the path, or a sibling, is another binary.
    assert _count(binary[:-1]) == 0
    assert _count(binary + "2") == 0
    procs[0].kill()
    procs[0].wait()
    assert _count(binary) == 1


def test_running_script_sees_a_binary_replaced_on_disk(fake_rank):
    binary, dummy = fake_rank
    os.unlink(binary)
    assert _count(binary) == 2


def test_running_script_ignores_its_own_command_line(tmp_path):
    # The probe's argv holds the path; only real executables count.
    assert _count(str(tmp_path / "train")) == 0


# ------------------------------------------------------------ the refusal


def test_refusal_names_hosts_lock_teardown_and_override():
    message = rl.refusal_message("/srv/proj", {"h2": 1, "h1": 2, "h3": 0}, REC, inventory_hint="inv.yml")
    assert message == (
        "flodl run lock: another run of project /srv/proj is live on h1 (2 processes of the rank binary); "
        "h2 (1 process of the rank binary); controller ctl (run lock held by pid 4242 of alice, run id 0123abcd). "
        "Starting now would kill it: the launcher's pre-spawn cleanup stops every process of the same binary. "
        "Stop the other run with `ansible-playbook flodl.cluster.teardown -i inv.yml` (or wait for it to end), "
        "or, to replace it on purpose, run again with `-e flodl_run_lock=false`."
    )


def test_live_hosts():
    assert rl.live_hosts({"b": 1, "a": 3, "c": 0, "d": None}) == ["a", "b"]
