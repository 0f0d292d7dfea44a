"""module_utils._launch.prepared_launch: run_launcher's inputs from a registered launch_env result."""
from __future__ import annotations

from ansible_collections.flodl.cluster.plugins.module_utils._launch.prepared_launch import prepared_args

ARGS = {"prepared_var": "flodl_launch_env", "command": None, "chdir": None, "env": {}, "log_dir": None,
        "ssh_control_dir": None, "grace_seconds": 10.0}
PREPARED = {"changed": False, "command": "cargo run --release --bin train", "cwd": "/srv/proj",
            "env": {"FLODL_INTERNAL_FDL_CMD": "train"}, "log_dir": "/srv/proj/target/cluster/logs",
            "ssh_control_dir": "/tmp/flodl-ssh-abcd1234"}


def test_the_launch_comes_from_the_prepared_result_as_registered():
    args, refused = prepared_args(ARGS, "flodl_launch_env", PREPARED)
    assert refused is None
    assert args == {**ARGS, "command": PREPARED["command"], "chdir": "/srv/proj", "env": PREPARED["env"],
                    "log_dir": PREPARED["log_dir"], "ssh_control_dir": PREPARED["ssh_control_dir"],
                    "forward_agent": False, "project_dir": None}


def test_the_launch_host_reach_and_the_record_dir_come_from_the_prepared_run():
    """flodl_launch_forward_agent and the project dir as the run's reader read them: run_launcher reads no variable."""
    args, refused = prepared_args(ARGS, "flodl_launch_env", {**PREPARED, "forward_agent": True, "project_dir": "/p"})
    assert refused is None and args["forward_agent"] is True and args["project_dir"] == "/p"
    args, _refused = prepared_args(ARGS, "flodl_launch_env", {**PREPARED, "forward_agent": "yes"})
    assert args["forward_agent"] is False  # only the step's own boolean counts


def test_explicit_directories_win_over_the_prepared_ones():
    args, refused = prepared_args({**ARGS, "log_dir": "/var/log/run", "ssh_control_dir": "/tmp/flodl-ssh-mine0000"},
                                  "flodl_launch_env", PREPARED)
    assert refused is None and args["log_dir"] == "/var/log/run" and args["ssh_control_dir"] == "/tmp/flodl-ssh-mine0000"


def test_a_prepared_launch_that_failed_or_was_skipped_runs_nothing_but_its_masters_still_close():
    for outcome in ({"failed": True}, {"skipped": True}):
        args, refused = prepared_args(ARGS, "flodl_launch_env", {**PREPARED, **outcome})
        assert "`flodl_launch_env` did not pass" in refused and "nothing was started" in refused
        assert args["ssh_control_dir"] == PREPARED["ssh_control_dir"]  # the step closes them before it fails


def test_no_result_or_another_task_s_result_is_named_with_the_fix():
    _args, refused = prepared_args(ARGS, "flodl_launch_env", None)
    assert "names no registered result" in refused and "flodl.cluster.launch_env" in refused
    _args, refused = prepared_args(ARGS, "flodl_launch_env", {"changed": False, "rc": 0})
    assert "not a result of flodl.cluster.launch_env" in refused
