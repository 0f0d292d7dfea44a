"""module_utils._core.phase_result: a run-once phase's entries -> each worker's own task result."""
from __future__ import annotations

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._core.phase_result import (
    REFUSED,
    entry,
    hosts_entry,
    prebuild_entries,
    preflight_entries,
    refused_entries,
    run_failed_entries,
    run_outcome,
    with_prior,
    worker_outcome,
    worker_part,
)


def test_entry_refuses_unknown_status():
    with pytest.raises(ValueError):
        entry("fine", "x")


@pytest.mark.parametrize("status,expect", [
    ("ok", {"changed": False}),
    ("changed", {"changed": True}),
    ("failed", {"failed": True}),
    ("skipped", {"skipped": True}),
])
def test_worker_outcome_per_status(status, expect):
    out = worker_outcome("preflight", "h1", {"per_host": {"h1": entry(status, "said", arch="x86_64")}})
    for key, value in expect.items():
        assert out[key] == value
    assert out["msg"] == "said" and out["preflight"] == {"arch": "x86_64"}
    assert ("failed" in out) == (status == "failed")


def test_a_named_entry_reports_the_hosts_entry_it_names():
    reports = {"gpu-a": {"arch": "x86_64", "errors": []}, "gpu-b": {"arch": "aarch64", "errors": ["gpu-b: musl"]}}
    phase = {"hosts": reports, "per_host": preflight_entries(reports, {"gpu-a": "ctl"})}
    # Keyed by inventory host, naming the logical host's report: the result holds each report once.
    assert phase["per_host"] == {"ctl": {"status": "ok", "msg": "preflight passed", "host": "gpu-a"},
                                 "gpu-b": {"status": "failed", "msg": "gpu-b: musl", "host": "gpu-b"}}
    assert worker_outcome("preflight", "ctl", phase)["preflight"] == reports["gpu-a"]
    failed = worker_outcome("preflight", "gpu-b", phase)
    assert failed["failed"] is True and failed["preflight"] == reports["gpu-b"]
    # The report is a copy: the worker's own result cannot change the registered one.
    worker_outcome("preflight", "ctl", phase)["preflight"]["arch"] = "changed"
    assert reports["gpu-a"]["arch"] == "x86_64"


def test_a_worker_reads_its_own_entry_and_the_report_it_names_only():
    reports = {"gpu-a": {"arch": "x86_64", "errors": []}, "gpu-b": {"arch": "aarch64", "errors": []}}
    phase = {"hosts": reports, "per_host": preflight_entries(reports, {"gpu-a": "ctl"}), "summary": ["..."]}
    assert worker_part(phase, "ctl") == {"per_host": {"ctl": phase["per_host"]["ctl"]}, "hosts": {"gpu-a": reports["gpu-a"]}}
    assert worker_outcome("preflight", "ctl", worker_part(phase, "ctl")) == worker_outcome("preflight", "ctl", phase)
    own = {"per_host": {"h1": entry("skipped", "x", problems=["p"])}, "hosts": {"h1": {"arch": "x86_64"}}}
    assert worker_part(own, "h1") == {"per_host": own["per_host"]}  # an entry with data of its own names nothing
    assert worker_part(phase, "gpu-z") == {}


def test_a_named_entry_without_its_hosts_entry_has_no_data():
    out = worker_outcome("preflight", "h1", {"per_host": {"h1": hosts_entry("ok", "x", "h1")}})
    assert out["preflight"] == {} and out["msg"] == "x"
    with pytest.raises(ValueError):
        hosts_entry("fine", "x", "h1")


def test_prebuild_entries_name_the_builds():
    built = {"hosts": {"h2": {"status": "built", "bin": "b", "changed": True, "arch": "cu128"}}}
    workers = ["h1", "h2"]
    per_host = prebuild_entries(built, workers, {}, "h1")
    assert per_host["h2"] == {"status": "changed", "msg": "built: b", "host": "h2"}
    assert per_host["h1"]["status"] == "skipped" and "data" in per_host["h1"]
    assert worker_outcome("prebuild", "h2", {**built, "per_host": per_host})["prebuild"] == built["hosts"]["h2"]


def test_unreachable_is_a_visible_skip():
    out = worker_outcome("preflight", "h1", {"per_host": {"h1": entry("unreachable", "no route")}})
    assert out["skipped"] is True and out["flodl_unreachable"] is True and out["_ansible_verbose_always"] is True
    assert out["msg"] == "UNREACHABLE for preflight, its checks were skipped: no route"


def test_a_host_without_entry_is_skipped_with_why():
    out = worker_outcome("prebuild", "h9", {"per_host": {"h1": entry("ok", "x")}})
    assert out["skipped"] is True and "no result for h9" in out["msg"]


def test_refused_each_worker_fails_with_its_own_problems_and_the_others_are_skipped():
    problems = ["host h2 (worker 1): flodl_path: must be a string"]
    out = refused_entries(["h1", "h2", "h3"], problems, {"h2": problems})
    assert out["h2"]["status"] == "failed"
    assert out["h2"]["msg"] == f"{REFUSED}: {problems[0]}"
    assert out["h2"]["data"]["problems"] == problems
    assert [out[h]["status"] for h in ("h1", "h3")] == ["skipped", "skipped"]
    assert "variables of h2" in out["h1"]["msg"]


def test_refused_run_level_problems_fail_every_worker():
    own = "host h2: ansible_ssh_extra_args: -F is not supported"
    run = "controller: flodl_cmd is required"
    out = refused_entries(["h1", "h2"], [run, own], {"h2": [own]})
    assert out["h1"]["status"] == "failed" and out["h1"]["data"]["problems"] == [run]
    assert out["h2"]["data"]["problems"] == [own, run]


def test_refused_for_workers_outside_a_limited_play_still_fails_the_play():
    own = "host h3 (worker 2): flodl_local_devices: must be `all` or a list"
    out = refused_entries(["h1"], [own], {"h3": [own]})
    assert out["h1"]["status"] == "failed"
    assert "h3 (outside this play)" in out["h1"]["msg"] and own in out["h1"]["msg"]


def _run(**statuses):
    return {"per_host": {h: entry(s, f"{h} said {s}") for h, s in statuses.items()}}


def test_a_non_worker_play_host_fails_when_any_worker_failed():
    out = run_outcome("preflight", "localhost", _run(h1="ok", h2="failed", h3="unreachable"))
    assert out["failed"] is True
    assert out["msg"].splitlines() == [
        "preflight for 3 worker(s), reported on localhost: 1 ok, 1 failed, 1 unreachable",
        "h2 said failed",
    ]
    assert out["preflight"] == {"workers": {"h1": "ok", "h2": "failed", "h3": "unreachable"}}


def test_a_non_worker_play_host_passes_and_names_the_unreachable():
    out = run_outcome("prebuild", "localhost", _run(h1="changed", h2="unreachable", h3="skipped"))
    assert "failed" not in out and out["changed"] is True and out["_ansible_verbose_always"] is True
    assert out["msg"] == ("prebuild for 3 worker(s), reported on localhost: 1 changed, 1 unreachable, 1 skipped"
                          " (unreachable: h2)")


def test_a_non_worker_play_host_without_any_worker_result_is_skipped():
    out = run_outcome("launch", "localhost", {})
    assert out["skipped"] is True and "no worker result" in out["msg"]


def test_the_run_verdict_names_each_failed_host_once():
    run = {"per_host": {
        "h1": entry("failed", "h1: the declared data path /d is missing"),
        "h10": entry("failed", "- host h10, variant precompiled/cu128: build exited with status 101"),
        "h2": entry("failed", f"{REFUSED}: host h1 (worker 0): bad"),
    }}
    assert run_outcome("prebuild", "localhost", run)["msg"].splitlines()[1:] == [
        "h1: the declared data path /d is missing",
        "- host h10, variant precompiled/cu128: build exited with status 101",
        f"h2: {REFUSED}: host h1 (worker 0): bad",
    ]


# --------------------------------------------------------------------------- one report for a build and its launch

BUILT = {"per_host": {"h1": entry("changed", "built: target/h1/train", bin="target/h1/train"),
                      "h2": entry("failed", "build for precompiled/rocm63 failed: `cargo build`"),
                      "h0": entry("skipped", "the controller's own box: no prebuild")}}
LAUNCHED = {"per_host": {h: entry("ok", f"in the launched run, ranks {r}", ranks=[r])
                         for r, h in enumerate(["h0", "h1", "h2"])}}


def test_a_failed_build_fails_its_worker_whatever_the_launch_says():
    out = with_prior("launch", "prebuild", "h2", LAUNCHED, BUILT)
    assert out["failed"] is True and out["msg"] == "build for precompiled/rocm63 failed: `cargo build`"
    assert "launch" not in out


def test_a_built_and_launched_worker_reports_both():
    out = with_prior("launch", "prebuild", "h1", LAUNCHED, BUILT)
    assert not out.get("failed") and out["changed"] is True  # the build changed it
    assert out["msg"] == "prebuild: built: target/h1/train; launch: in the launched run, ranks 1"
    assert out["prebuild"] == {"bin": "target/h1/train"} and out["launch"] == {"ranks": [1]}


def test_the_controllers_box_is_in_the_launch_though_it_needs_no_build():
    out = with_prior("launch", "prebuild", "h0", LAUNCHED, BUILT)
    assert not out.get("skipped") and not out.get("failed") and out["changed"] is False
    assert out["launch"] == {"ranks": [0]}


def test_a_worker_the_launch_did_not_reach_reports_its_build():
    # Another worker's build failed: the launch did not run, this worker's own build is its result.
    out = with_prior("launch", "prebuild", "h1", {}, BUILT)
    assert not out.get("failed") and out["changed"] is True
    assert out["msg"] == "built: target/h1/train (launch did not run)"


def test_a_non_worker_play_host_reports_the_failed_builds_first():
    out = with_prior("launch", "prebuild", "localhost", LAUNCHED, BUILT, worker=False)
    assert out["failed"] is True and out["msg"].splitlines()[0].startswith("prebuild for 3 worker(s)")
    passed = dict(BUILT, per_host={h: e for h, e in BUILT["per_host"].items() if h != "h2"})
    out = with_prior("launch", "prebuild", "localhost", LAUNCHED, passed, worker=False)
    assert not out.get("failed") and out["msg"].startswith("launch for 3 worker(s)")


def test_a_run_failed_on_the_controller_after_contact_fails_every_worker():
    # The controller's own preflight problems: the step ran on h1, which is not to blame; every worker fails.
    per_host = {"h1": entry("ok", "preflight passed"), "h2": entry("failed", "h2: data path missing"),
                "h3": entry("unreachable", "ssh: no route")}
    out = run_failed_entries(per_host, "the controller failed preflight, so the run stops: controller: x")
    assert {h: e["status"] for h, e in out.items()} == {"h1": "failed", "h2": "failed", "h3": "failed"}
    assert out["h2"]["msg"] == "h2: data path missing"  # its own failure is kept as it is
    assert out["h3"]["msg"] == "the controller failed preflight, so the run stops: controller: x (here: ssh: no route)"
