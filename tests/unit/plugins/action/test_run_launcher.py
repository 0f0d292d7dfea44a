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
    # The process-group watcher (module_utils.group_watch) starts first, then the command.
    watcher, command = no_ssh[0], no_ssh[-1]
    assert watcher[0] == sys.executable and watcher[5] == "flodl-group-watch" and command[0] == "/bin/sh"
    log = (tmp_path / "logs" / result["log_file"].rsplit("/", 1)[-1]).read_text()
    assert "launched with 42" in log and result["log_file"].startswith(str(tmp_path / "logs"))


def test_a_prepared_launch_that_did_not_pass_or_is_missing_starts_nothing(case, run, no_processes):
    for name in ("prepared_failed", "prepared_missing"):
        assert run(case(name))["failed"] is True
    assert no_processes == []
