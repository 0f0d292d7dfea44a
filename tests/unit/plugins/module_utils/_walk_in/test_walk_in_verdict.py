"""A walk-in worker's verdict comes from the launcher's report about its host and its agent's end (E13)."""
from __future__ import annotations

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._walk_in import walk_in_verdict as wv

LINES = [
    "[standin-launcher] join window open on 10.0.0.1:1337",
    'host "h2" joined with ranks [0, 1]',
    'host "h1" joined with ranks [2]',
    'host "h2" reports rank 1 exited with code 7',
    "[standin-launcher] done: worst exit code 7",
]


def test_the_launchers_lines_are_read_per_host_and_survive_registration():
    view = wv.read_launcher(LINES)
    assert view.joined == {"h2": [0, 1], "h1": [2]} and view.failed_ranks == {"h2": [(1, 7)]}
    assert wv.view_of(view.to_data()) == view and not view.quorum_failed


def test_a_failed_rank_fails_its_worker_only_although_its_agent_exited_0():
    view = wv.read_launcher(LINES)
    h2 = wv.worker_entry("h2", view, 0, ["agent: h2 finished DEGRADED"], 7, 300, True)
    assert h2["status"] == "failed" and "rank 1 exited with code 7 (the launcher's report)" in h2["msg"]
    assert "  | agent: h2 finished DEGRADED" in h2["msg"] and h2["data"]["rc"] == 7
    h1 = wv.worker_entry("h1", view, 0, ["agent: h1 finished"], 7, 300, True)
    assert h1["status"] == "changed" and "ranks [2] ran" in h1["msg"]
    assert not wv.unattributed(view, 7, ["h1", "h2"])  # the launcher's failure is h2's


def test_a_worker_that_never_joined_fails_with_the_bound_and_what_its_agent_printed():
    view = wv.read_launcher(['host "h1" joined with ranks [0]',
                             "cluster join: FAILED — quorum not met: 1/2 ranks joined within the join_timeout"])
    h2 = wv.worker_entry("h2", view, 1, ["agent: the join window refused h2: bad frame MAC"], 1, 120, True)
    assert h2["status"] == "failed"
    assert h2["msg"].startswith("h2: did not join within 120 s (the window's quorum was not met)")
    assert "bad frame MAC" in h2["msg"] and not wv.unattributed(view, 1, ["h1", "h2"])


@pytest.mark.parametrize("code, rc, status", [(0, 0, "changed"), (1, 0, "failed"), (None, 143, "failed"),
                                              (0, None, "failed")])
def test_the_agents_own_end_counts_when_the_launcher_names_nothing(code, rc, status):
    view = wv.read_launcher(['host "h1" joined with ranks [0]'])
    assert wv.worker_entry("h1", view, code, [], rc, 300, True)["status"] == status


def test_an_agent_that_was_not_started_fails_with_why():
    found = wv.worker_entry("h3", wv.LauncherView(), None, [], 1, 300, False, "no directory /srv/p there")
    assert found["status"] == "failed" and "not started (no directory /srv/p there)" in found["msg"]


def test_a_launcher_failure_nobody_is_named_for_is_the_launch_steps():
    assert wv.unattributed(wv.read_launcher(['host "h1" joined with ranks [0]']), 2, ["h1"])
    assert not wv.unattributed(wv.LauncherView(), 0, ["h1"])


def test_a_worker_that_joined_is_not_charged_when_the_quorum_failed_for_another():
    view = wv.read_launcher(['host "h1" joined with ranks [0]',
                             "cluster join: FAILED — quorum not met: 1/2 ranks joined within the join_timeout (9 s)"])
    h1 = wv.worker_entry("h1", view, 1, ["agent: the window closed before the start"], 1, 9, True)
    assert h1["status"] == "ok" and "joined with ranks [0], but the run never started" in h1["msg"], h1
    h2 = wv.worker_entry("h2", view, 1, ["agent: could not dial the controller"], 1, 9, True)
    assert h2["status"] == "failed" and h2["msg"].startswith("h2: did not join within 9 s")
    assert "  | agent: could not dial the controller" in h2["msg"]


def test_one_hosts_view_holds_its_own_entries_only():
    view = wv.view_for("h2", [1, 2], [[2, 7]], True)
    assert view == wv.LauncherView({"h2": [1, 2]}, {"h2": [(2, 7)]}, True)
    assert wv.view_for("h3", None, None, None) == wv.LauncherView()


@pytest.mark.parametrize("opened, why", [
    ({"launcher": {"pid": 4242}, "changed": True}, None),
    ({"failed": True, "msg": "flodl launch: the launcher ended before its join window opened"},
     "the step failed: flodl launch: the launcher ended before its join window opened"),
    ({"skipped": True}, "the step was skipped"),
    (None, "nothing is registered for it: the step did not run"),
    ({"launcher": {"pid": "4242"}}, "the step registered no launcher"),
])
def test_the_open_steps_result_says_whether_a_window_is_open(opened, why):
    assert wv.window_problem(opened) == why
