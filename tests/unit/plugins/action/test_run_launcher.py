"""flodl.cluster.run_launcher: check mode and a missing directory start nothing; a local command runs, logged."""
from __future__ import annotations

import sys

ACTION = "run_launcher"


def test_recorded_case(recorded, run, expect, no_ssh):
    expect(run(recorded), recorded.expected)


def test_check_mode_and_a_missing_directory_start_nothing(case, run, no_processes):
    run(case("check_mode"))
    assert run(case("missing_chdir"))["failed"] is True
    assert no_processes == []


def test_the_local_launch_gets_its_variables_and_a_log(case, run, no_ssh, tmp_path):
    result = run(case("runs_locally"))
    # The process-group watcher (module_utils._core.group_watch) starts first, then the command.
    watcher, command = no_ssh[0], no_ssh[-1]
    assert watcher[0] == sys.executable and watcher[5] == "flodl-group-watch" and command[0] == "/bin/sh"
    log = (tmp_path / "logs" / result["log_file"].rsplit("/", 1)[-1]).read_text()
    assert "launched with 42" in log and result["log_file"].startswith(str(tmp_path / "logs"))


def test_a_prepared_launch_that_did_not_pass_or_is_missing_starts_nothing(case, run, no_processes):
    for name in ("prepared_failed", "prepared_missing"):
        assert run(case(name))["failed"] is True
    assert no_processes == []


def _prepared_with_workers(case, command: str):
    loaded = case("runs_prepared")
    prepared = dict(loaded.task_vars["flodl_launch_env"], command=command, per_host={
        "ctl": {"status": "ok", "msg": "in the launched run, ranks [0]", "data": {"ranks": [0], "host": "gpu-a"}},
        "gpu-b": {"status": "ok", "msg": "in the launched run, ranks [1]", "data": {"ranks": [1], "host": "gpu-b"}},
        "gpu-c": {"status": "ok", "msg": "in the launched run, ranks [2]", "data": {"ranks": [2], "host": "gpu-c"}}})
    loaded.task_vars = dict(loaded.task_vars, flodl_launch_env=prepared)
    return loaded


def test_a_rank_the_launcher_names_fails_its_worker_and_not_the_step(case, run, no_ssh):
    # flodl's launcher's own line, on stderr; the launch fails. The step ran on ctl, which is not to blame.
    command = ("echo 'cluster launcher: host \"gpu-b\" reports rank 1 exited with code 7; feeding elastic "
               "membership' >&2; exit 7")
    result = run(_prepared_with_workers(case, command))
    assert result["failed"] is False and result["launch_failed"] is True and result["rc"] == 7, result
    assert result["rank_exits"] == [{"host": "gpu-b", "rank": 1, "code": 7}]
    statuses = {h: e["status"] for h, e in result["per_host"].items()}
    assert statuses == {"ctl": "ok", "gpu-b": "failed", "gpu-c": "ok"}, result["per_host"]
    assert "rank 1 exited with code 7" in result["per_host"]["gpu-b"]["msg"]
    assert result["ansible_stats"]["data"]["flodl_launch"]["failed"] is True


def test_a_launch_failure_naming_nobody_fails_every_worker(case, run, no_ssh):
    result = run(_prepared_with_workers(case, "echo 'bind 0.0.0.0:9000 failed' >&2; exit 1"))
    assert result["failed"] is False and result["launch_failed"] is True and result["rank_exits"] == []
    assert {e["status"] for e in result["per_host"].values()} == {"failed"}
    assert "named no failing host: the launch command exited with code 1" in result["per_host"]["ctl"]["msg"]


def test_a_refused_prepared_launch_starts_nothing_and_hands_each_worker_its_entry(case, run, no_processes):
    loaded = case("runs_prepared")
    per_host = {"ctl": {"status": "failed", "msg": "refused before contact (no host was contacted): x", "data": {}}}
    loaded.task_vars = dict(loaded.task_vars, flodl_launch_env={
        "changed": False, "refused": True, "problems": ["x"], "failed_hosts": ["ctl"], "per_host": per_host,
        "msg": "refused before contact (no host was contacted): 1 problem(s):\n  x"})
    result = run(loaded)
    assert not result.get("failed") and result["refused"] is True and result["per_host"] == per_host
    assert "rc" not in result and no_processes == []


def test_a_log_directory_that_cannot_be_made_fails_the_launch_before_anything_starts(case, run, no_processes, tmp_path):
    (tmp_path / "logs").write_text("a file where the log directory goes\n")
    result = run(case("runs_locally"))
    assert result["failed"] is True and result["msg"].startswith(f"cannot create the launch log under {tmp_path}/logs: ")
    assert "rc" not in result and "ansible_stats" not in result
    assert no_processes == []  # neither the watcher nor the command


REFUSED_RUN = {"changed": False, "refused": True, "problems": ["controller: flodl_launch_timeout must be a number"],
               "failed_hosts": ["ctl", "gpu-b"], "msg": "refused before contact: 1 problem(s)\nmore",
               "per_host": {"ctl": {"status": "failed", "msg": "refused", "data": {}},
                            "gpu-b": {"status": "failed", "msg": "refused", "data": {}}}}


def test_a_refused_run_starts_nothing_and_its_job_artifact_says_it_failed(case, run, no_processes):
    loaded = case("runs_prepared")
    loaded.task_vars = dict(loaded.task_vars, flodl_launch_env=REFUSED_RUN)
    result = run(loaded)
    assert result["refused"] is True and not result.get("failed") and result["per_host"] == REFUSED_RUN["per_host"]
    assert result["msg"] == ("not started: the run was refused by an earlier step of this play; "
                             "refused before contact: 1 problem(s)")
    assert result["ansible_stats"]["data"]["flodl_launch"]["failed"] is True
    assert "command" not in result and no_processes == []


def test_a_refused_run_in_check_mode_publishes_no_job_artifact(case, run, no_processes):
    loaded = case("runs_prepared")
    loaded.task_vars = dict(loaded.task_vars, flodl_launch_env=REFUSED_RUN)
    loaded.check_mode = True
    result = run(loaded)
    assert result["refused"] is True and "ansible_stats" not in result and no_processes == []
