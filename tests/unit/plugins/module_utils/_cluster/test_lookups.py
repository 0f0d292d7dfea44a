"""Worker names looked up all at once with one bounded wait (issue 19, item 4)."""
from __future__ import annotations

import threading
import time

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._launch import launch_env as le
from ansible_collections.flodl.cluster.plugins.module_utils._cluster import name_resolution as nr
from ansible_collections.flodl.cluster.plugins.module_utils._cluster import lookups


@pytest.fixture()
def never():
    """Set at teardown: releases the stub's blocked threads."""
    event = threading.Event()
    yield event
    event.set()


def _stub(answers: dict[str, list[str]], calls: list[str], never: threading.Event | None = None):
    """Answers from ``answers``; a name ending in '-hang' never answers; any other name fails."""
    def resolve(name: str) -> list[str]:
        calls.append(name)
        if name.endswith("-hang"):
            assert never is not None
            never.wait()
            raise OSError("released")
        if name in answers:
            return answers[name]
        raise OSError(f"Name or service not known: {name}")
    return resolve


def _cluster(workers: int) -> dict:
    named = [{"host": (f"w{i}-hang" if i % 3 == 0 else f"w{i}"), "local_devices": [0],
              "nccl_socket_ifname": "eth0", "path": "/srv/proj"} for i in range(workers)]
    literal = {"host": "10.0.0.9", "local_devices": [0], "nccl_socket_ifname": "eth0", "path": "/srv/proj"}
    return {"controller": {"host": "ctl.example", "port": 1337, "path": "/opt/proj"}, "workers": [*named, literal]}


def _hosts(cluster):
    return [cluster["controller"]["host"], *(w["host"] for w in cluster["workers"])]


def test_32_workers_with_names_that_never_answer_cost_one_bounded_wait_and_are_warned(never):
    calls: list[str] = []
    answers = {"ctl.example": ["10.0.0.1"], **{f"w{i}": [f"10.0.1.{i}"] for i in range(32)}}
    cluster = _cluster(32)
    start = time.monotonic()
    resolver = lookups.start_lookups(_hosts(cluster), _stub(answers, calls, never)).resolver()
    plan = le.prepare_launch(le.LaunchInputs(cluster=cluster, project_root="/opt/proj", cmd="train",
                                             host_user="alice", testing_cluster=False), resolver)
    elapsed = time.monotonic() - start
    assert lookups.LOOKUP_BUDGET_SECONDS <= elapsed < lookups.LOOKUP_BUDGET_SECONDS + 0.5
    assert "10.0.0.9" not in calls and sorted(calls) == sorted(set(calls))  # IP literals skipped; one try per name
    hung = [f"w{i}-hang" for i in range(0, 32, 3)]
    for name in hung:
        [warning] = [w for w in plan.warnings if f"host {name}:" in w]
        assert "no answer within 2s" in warning and nr.ENV_CLUSTER_EXTRA_HOSTS in warning
    extra = nr.parse_extra_hosts(plan.env[nr.ENV_CLUSTER_EXTRA_HOSTS])
    assert ("w1", "10.0.1.1") in extra and ("10.0.0.9", "10.0.0.9") in extra
    assert not any(h in dict(extra) for h in hung)
    assert '"host": "10.0.0.1"' in plan.topology_json  # the controller's answer arrived in time


def test_answers_return_as_soon_as_every_name_has_one():
    calls: list[str] = []
    start = time.monotonic()
    found = lookups.PendingLookups(["a", "b", "a"], _stub({"a": ["10.0.0.1"]}, calls)).answers()
    assert time.monotonic() - start < 1.0
    assert found["a"] == ["10.0.0.1"] and isinstance(found["b"], OSError) and sorted(calls) == ["a", "b"]


def test_a_controller_name_without_an_answer_is_shipped_as_written_with_the_warning():
    resolver = lookups.answered({}, 2.0)
    shipped, warnings = nr.resolve_controller_host("ctl-hang", resolver)
    assert shipped == "ctl-hang" and any("no answer within 2s" in w for w in warnings)


def test_run_names_are_the_controller_and_worker_hosts_without_ip_literals():
    assert lookups.run_names(_hosts(_cluster(2))) == ["ctl.example", "w0-hang", "w1"]


def test_started_lookups_run_beside_the_caller_and_the_wait_counts_from_the_start(never):
    calls: list[str] = []
    cluster = {"controller": {"host": "ctl.example"}, "workers": [{"host": "w1"}, {"host": "w2-hang"}]}
    start = time.monotonic()
    pending = lookups.start_lookups(_hosts(cluster), _stub({"ctl.example": ["10.0.0.1"], "w1": ["10.0.1.1"]}, calls, never),
                                    budget=0.6)
    assert time.monotonic() - start < 0.3  # started, not waited for
    time.sleep(0.4)  # the caller's own work; the lookups run meanwhile
    assert sorted(calls) == ["ctl.example", "w1", "w2-hang"]
    waited = time.monotonic()
    resolve = pending.resolver()
    assert time.monotonic() - waited < 0.45  # what was left of the budget, not the whole of it again
    assert resolve("w1") == ["10.0.1.1"]
    with pytest.raises(OSError, match="no answer within 0.6s"):
        resolve("w2-hang")
