"""Which worker a failed launch charges, from flodl's launcher's own reports (module_utils._launch.launch_outcome)."""
from __future__ import annotations

from ansible_collections.flodl.cluster.plugins.module_utils._launch.launch_outcome import (
    RankExit,
    RankExits,
    launch_entries,
    rank_exit,
    reported,
)
from ansible_collections.flodl.cluster.plugins.module_utils._core.phase_result import entry

# As flodl's launcher prints it (launcher/mod.rs, the host control link's reader), on its stderr.
UPSTREAM = 'cluster launcher: host "h2" reports rank 2 exited with code 7; feeding elastic membership'
FAILED = {"failed": True, "rc": 7,
          "msg": "the launch command exited with code 7 (rc=7) after 3.0s; log: /l\nlast lines:"}
PASSED = {"changed": True, "rc": 0, "msg": "the launch command exited with code 0 after 3.0s; log: /l"}


def _planned() -> dict:
    # launch_env's per_host: inventory names; h2's flodl host is gpu-2 (flodl_host), as the launcher names it.
    return {"h1": entry("ok", "in the launched run, ranks [0, 1]", ranks=[0, 1], host="h1"),
            "h2": entry("ok", "in the launched run, ranks [2]", ranks=[2], host="gpu-2"),
            "h3": entry("ok", "in the launched run, ranks [3]", ranks=[3], host="h3")}


def _statuses(per_host: dict) -> dict:
    return {h: e["status"] for h, e in per_host.items()}


def test_the_upstream_report_line_is_read():
    assert rank_exit(UPSTREAM) == RankExit("h2", 2, 7)
    # Through a launch host's ssh or docker compose, the line may come prefixed; a negative code is a signal.
    line = '[launch] cluster launcher: host "h3" reports rank 12 exited with code -9'
    assert rank_exit(line) == RankExit("h3", 12, -9)


def test_a_host_is_unescaped_as_rust_debug_prints_it():
    assert rank_exit(r'host "a \"q\" b\\c\u{e9}" reports rank 0 exited with code 1') == RankExit('a "q" b\\c\u00e9', 0, 1)


def test_other_lines_are_not_reports():
    for line in ("[h2] step 3 loss 0.5", "[h2] reports rank 2 exited with code 7",  # no host "..." part
                 'cluster launcher: agent of "h2" died before the world formed', ""):
        assert rank_exit(line) is None, line


def test_each_rank_is_kept_once_in_order_and_clean_exits_are_dropped():
    exits = RankExits()
    for line in (UPSTREAM, 'host "h1" reports rank 0 exited with code 0', UPSTREAM,
                 'host "h3" reports rank 3 exited with code 143'):
        exits.see(line)
    assert exits.as_data() == [{"host": "h2", "rank": 2, "code": 7}, {"host": "h3", "rank": 3, "code": 143}]


def test_a_failure_the_launcher_attributes_fails_that_worker_only():
    result = dict(FAILED, rank_exits=[{"host": "gpu-2", "rank": 2, "code": 7}])
    out = launch_entries(_planned(), result)
    assert _statuses(out) == {"h1": "ok", "h2": "failed", "h3": "ok"}
    assert out["h2"]["msg"].startswith("flodl's launcher reports: rank 2 exited with code 7; the launch command "
                                       "exited with code 7")
    assert out["h2"]["data"]["rank_exits"] == [{"host": "gpu-2", "rank": 2, "code": 7}]
    assert "stopped with the run, which failed on h2" in out["h1"]["msg"]


def test_the_teardowns_kills_are_not_charged_beside_a_rank_of_its_own():
    result = dict(FAILED, rank_exits=[{"host": "h1", "rank": 0, "code": 143}, {"host": "gpu-2", "rank": 2, "code": 7},
                                      {"host": "h3", "rank": 3, "code": 137}])
    assert _statuses(launch_entries(_planned(), result)) == {"h1": "ok", "h2": "failed", "h3": "ok"}
    # Killed ranks only: those are all the launcher named.
    result = dict(FAILED, rank_exits=[{"host": "h3", "rank": 3, "code": 137}])
    assert _statuses(launch_entries(_planned(), result)) == {"h1": "ok", "h2": "ok", "h3": "failed"}


def test_a_failure_that_names_no_worker_fails_every_worker():
    for exits in ([], [{"host": "elsewhere", "rank": 9, "code": 1}]):
        out = launch_entries(_planned(), dict(FAILED, rank_exits=exits))
        assert set(_statuses(out).values()) == {"failed"}
        assert out["h1"]["msg"] == ("the launch failed and flodl's launcher named no failing host: the launch command "
                                    "exited with code 7 (rc=7) after 3.0s; log: /l")


def test_a_passing_launch_keeps_every_worker_ok_and_says_a_tolerated_exit():
    out = launch_entries(_planned(), dict(PASSED, rank_exits=[{"host": "h3", "rank": 3, "code": 1}]))
    assert set(_statuses(out).values()) == {"ok"}
    assert out["h1"]["msg"] == "in the launched run, ranks [0, 1]; the launch command exited with code 0 after 3.0s; log: /l"
    assert "reports rank 3 exited with code 1, and the run went on" in out["h3"]["msg"]


def test_the_step_passes_and_says_how_the_launch_ended():
    out = reported(dict(FAILED, rank_exits=[{"host": "gpu-2", "rank": 2, "code": 7}]), _planned())
    # failed=False said outright: Ansible fails a result without the key whose rc is not 0.
    assert out["failed"] is False and out["launch_failed"] is True and out["rc"] == 7
    assert out["msg"].startswith(FAILED["msg"]) and out["msg"].endswith("workers failed by this launch: h2")
    assert out["_ansible_verbose_always"] is True
    passed = reported(PASSED, _planned())
    assert "launch_failed" not in passed and passed["msg"] == PASSED["msg"] and set(passed["per_host"]) == {"h1", "h2", "h3"}
