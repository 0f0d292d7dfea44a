"""Run lock: record round trip, a parser that trusts nothing, staleness, and the real probe snippet."""
from __future__ import annotations

import json

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.model import cluster_model
from ansible_collections.flodl.cluster.plugins.module_utils._run import runlock as rl

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


# ------------------------------------------------------------ staleness: the holder's pid, where it means something

SPACE = "boot-1:4026531836"
OURS = rl.LockRecord(run_id="0123abcd", controller_host="ctl", pid=4242, started=1000.5, project="/srv/proj",
                     user="alice", ttl=60, space=SPACE, pid_start="777")


def _stale(record=OURS, host="ctl", space=SPACE, age=1.0, start=None):
    return rl.stale_reason(record, this_host=host, this_space=space, lease_age=age, holder_start=start)


def test_a_dead_or_reused_holder_pid_in_the_same_namespace_frees_the_lock_at_once():
    assert _stale(start="") == "its process 4242 on ctl is gone"
    assert _stale(start="900") == "process 4242 on ctl is a newer process that reused the pid"
    assert _stale(start="777") is None


@pytest.mark.parametrize("host, space, record", [
    ("other", SPACE, OURS),  # another controller identity (FLODL_HOST_NAME differs, same machine or not)
    ("ctl", "boot-1:4026532999", OURS),  # an execution-environment container: its own pid namespace
    ("ctl", "boot-2:4026531836", OURS),  # the same namespace inode after a reboot
    ("ctl", None, OURS),  # this reader cannot tell its namespace
    ("ctl", SPACE, REC),  # a record of an earlier version: no namespace, no start time
])
def test_a_pid_from_another_controller_namespace_or_boot_is_never_judged(host, space, record):
    assert not rl.pid_checkable(record, host, space)
    assert _stale(record, host, space, start="") is None  # "no such pid here" says nothing: the lease decides


# ------------------------------------------------------------ staleness: the lease


@pytest.mark.parametrize("age, stale", [(0.0, False), (59.0, False), (60.0, False), (61.0, True), (-3600.0, False),
                                        (None, False)])
def test_the_lease_lapses_after_its_ttl_by_the_file_systems_clock(age, stale):
    reason = _stale(host="other", age=age)
    assert (reason is not None) is stale
    if stale:
        assert reason == ("its lease was last renewed 61 s ago, over its 60 s: the run on ctl ended without "
                          "releasing it (killed, or cut off)")


def test_the_holders_ttl_counts_and_an_old_record_gets_the_default():
    long_lease = rl.LockRecord(**{**OURS.__dict__, "ttl": 600})
    assert _stale(long_lease, host="other", age=300) is None  # a reader's shorter ttl never shortens it
    assert _stale(long_lease, host="other", age=601) is not None
    assert rl.DEFAULT_TTL == 60 and REC.lease == 60
    assert _stale(REC, host="other", age=61) is not None  # an earlier version's lock, never renewed


def test_a_live_holder_renews_well_inside_its_ttl():
    assert rl.renew_seconds(60) == 10 and rl.renew_seconds(5) == 1 and rl.renew_seconds(600) == 100


def test_lock_name_is_the_controller_identity_in_safe_characters():
    assert rl.lock_name(" ctl-b.lan ") == "ctl-b.lan"
    assert rl.lock_name("my box/1") == "my_box_1"
    assert rl.lock_name("") == "unknown-host"


def test_lease_fields_round_trip_and_are_checked():
    assert rl.parse_lock(OURS.to_json()) == (OURS, None)
    assert '"ttl":60' in OURS.to_json() and '"space":"boot-1:4026531836"' in OURS.to_json()
    body = json.loads(OURS.to_json())
    for key, bad, why in (("ttl", 1, "ttl is not a whole number"), ("ttl", "60", "ttl is not a whole number"),
                          ("space", "a b", "space is not a short string"), ("origin", 5, "origin is not")):
        record, problem = rl.parse_lock(json.dumps({**body, key: bad}))
        assert record is None and why in problem
    record, problem = rl.parse_lock(json.dumps({**body, "space": ""}))  # a launch host without /proc
    assert problem is None and record.space is None


# ------------------------------------------------------------ the refusal


def test_refusal_names_hosts_lock_teardown_and_override():
    message = rl.refusal_message("/srv/proj", {"h2": 1, "h1": 2, "h3": 0}, REC, inventory_hint="inv.yml")
    assert message == (
        "flodl run lock: another run of project /srv/proj is live on h1 (2 processes of the rank binary); "
        "h2 (1 process of the rank binary); controller ctl (run lock held by pid 4242 of alice, run id 0123abcd). "
        "Starting now would kill it: the launcher's pre-spawn cleanup stops every process of the same binary. "
        "Stop the other run with `ansible-playbook flodl.cluster.teardown -i inv.yml` (or wait for it to end: a run "
        "that ends releases its lock, a killed one's lease lapses), or, to replace it on purpose, run again with "
        "`-e flodl_run_lock=false`."
    )


def test_refusal_of_two_live_runs_names_both():
    held = rl.LockRecord(**{**OURS.__dict__, "origin": "pod-a"})
    message = rl.refusal_message("/srv/proj", {}, held, this_run=rl.this_run_text("ctl-b", "feed", "ctl-b"),
                                 lease_age=4.6)
    assert ("is live on controller ctl (run lock held by pid 4242 of alice, run id 0123abcd, started from pod-a, "
            "lease renewed 4 s ago, over once 60 s pass without renewal); this run (controller ctl-b, run id feed) "
            "was not started.") in message
    assert "started from pod-b" in rl.this_run_text("trainbox", "feed", "pod-b")


def test_live_hosts():
    assert rl.live_hosts({"b": 1, "a": 3, "c": 0, "d": None}) == ["a", "b"]


def test_live_binaries_are_each_remotes_rank_binary_and_none_without_a_command():
    remotes = cluster_model({"controller": {"host": "10.0.0.1", "path": "/srv/proj"}, "workers": [
        {"host": "gpu-b", "path": "/srv/proj/", "arch": "precompiled/cu128", "local_devices": [0]}]}).workers
    assert rl.live_binaries(remotes, None) == {} and rl.live_binaries(remotes, "") == {}
    [(host, path)] = rl.live_binaries(remotes, "train").items()
    assert host == "gpu-b" and path.startswith("/srv/proj/target/cluster/gpu-b/") and path.endswith("/release/train")
