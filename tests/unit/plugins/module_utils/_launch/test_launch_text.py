"""module_utils._launch.launch_text: the launch plan and how the launch command ended, as task results."""
from __future__ import annotations

import json

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._core.fold import FOLD_ABOVE
from ansible_collections.flodl.cluster.plugins.module_utils._launch.launch_text import outcome_fields, plan_fields

LOG = "/p/target/cluster/logs/launch-1.log"


def test_success_keeps_the_tail_and_does_not_fail():
    out = outcome_fields(0, 2.04, ["a", "b"], LOG)
    assert "failed" not in out and out["changed"] is True and out["rc"] == 0
    assert out["stdout_tail"] == ["a", "b"] and out["log_file"] == LOG
    assert out["msg"] == f"the launch command exited with code 0 after 2.0s; log: {LOG}"


def test_a_non_zero_exit_fails_with_the_last_twelve_lines_in_the_message_only():
    tail = [f"line {i}" for i in range(20)]
    out = outcome_fields(3, 1.0, tail, LOG)
    assert out["failed"] is True and out["rc"] == 3 and "stdout_tail" not in out
    head, rest = out["msg"].split("\nlast lines:\n")
    assert head == f"the launch command exited with code 3 (rc=3) after 1.0s; log: {LOG}"
    assert rest.splitlines() == [f"  line {i}" for i in range(8, 20)]


def test_death_by_signal_reads_as_a_shell_would_report_it():
    out = outcome_fields(-9, 1.0, [], LOG)
    assert out["rc"] == 137 and out["signal"] == 9
    assert out["msg"].startswith("the launch command exited with signal 9 (rc=-9)")


def test_a_timeout_names_the_variable_and_the_grace():
    out = outcome_fields(-15, 20.0, ["x"], LOG, timed_out=True, timeout=20.0, grace=5.0)
    assert out["failed"] is True and out["timed_out"] is True
    assert out["msg"] == ("the launch command did not finish within flodl_launch_timeout=20s: its process group "
                          f"was stopped (TERM, then KILL after 5s); log: {LOG}")


def test_an_interrupt_wins_over_the_exit_code_and_reports_the_cleanup():
    out = outcome_fields(-15, 3.0, [], LOG, interrupted="SIGTERM", stop_note="TERM sent, gone after 0.1s",
                         orphan_cleanup="ran on 2 host(s), 0 warning(s)", timed_out=True)
    assert out["failed"] is True and out["interrupted"] == "SIGTERM" and "timed_out" not in out
    assert out["orphan_cleanup"] == "ran on 2 host(s), 0 warning(s)"
    assert out["msg"] == ("the launch command was interrupted by SIGTERM: its process group was stopped (TERM sent, "
                          f"gone after 0.1s); orphan cleanup: ran on 2 host(s), 0 warning(s); log: {LOG}")


def _plan(token: str | None = None):
    from ansible_collections.flodl.cluster.plugins.module_utils._launch import launch_env as le

    cluster = {
        "controller": {"host": "10.0.0.1", "port": 1337, "path": "/opt/proj"},
        "workers": [{"host": "gpu-a", "path": "/opt/proj", "local_devices": [0, 1]},
                    {"host": "gpu-b", "path": "/opt/proj", "local_devices": [0]}],
    }
    if token:
        cluster["controller"]["join"] = {"min_rank_start": 2, "token": token}
    return le.prepare_launch(le.LaunchInputs(cluster=cluster, project_root="/opt/proj", cmd="train", host_user="u"),
                             lambda host: [])


def test_plan_fields_give_each_worker_its_ranks_under_its_inventory_name():
    fields = plan_fields(_plan(), envelope_text='{"gpu-b": {"bin": "/b"}}', envelope_source="the prebuild step",
                         log_dir="/opt/proj/target/cluster/logs", check=True, guard=None,
                         inventory_names={"gpu-a": "a.example"})
    assert fields["per_host"] == {
        "a.example": {"status": "ok", "msg": "in the launched run, ranks [0, 1]",
                      "data": {"ranks": [0, 1], "host": "gpu-a"}},
        "gpu-b": {"status": "ok", "msg": "in the launched run, ranks [2]", "data": {"ranks": [2], "host": "gpu-b"}},
    }
    assert fields["prebuild_envelope"] == {"gpu-b": {"bin": "/b"}} and fields["topology_redacted"] is False
    assert fields["plan"][0] == "flodl launch plan (check mode: nothing runs, nothing is written)"
    assert '    gpu-b: {"bin": "/b"}' in fields["plan"]


def test_plan_fields_never_show_the_join_token():
    token = "cd" * 16
    fields = plan_fields(_plan(token), envelope_text=None, envelope_source=None, log_dir="/l", check=True,
                         guard=None, inventory_names={})
    assert fields["topology_redacted"] is True
    assert token not in json.dumps({k: v for k, v in fields.items() if k != "env"})
    assert token not in "\n".join(fields["plan"])


# ---------------------------------------------------------------- the summary (issue 19, item 3)


def _big_plan(workers: int, token: str | None = None):
    from ansible_collections.flodl.cluster.plugins.module_utils._launch import launch_env as le

    cluster = {
        "controller": {"host": "10.0.0.1", "port": 1337, "path": "/opt/proj"},
        "workers": [{"host": f"w{i}", "path": "/opt/proj", "local_devices": [0, 1], "nccl_socket_ifname": "eth0",
                     "ssh": {"target": f"10.0.1.{i}", "user": "alice", "port": 2222, "options": ["A=1"]}}
                    for i in range(workers)],
    }
    if token:
        cluster["controller"]["join"] = {"min_rank_start": 2, "token": token}
    return le.prepare_launch(le.LaunchInputs(cluster=cluster, project_root="/opt/proj", cmd="train", host_user="u",
                                             local_gpu_counts=(1, 0)), lambda host: [])


def _fields(plan, *, check=False, verbose=False, envelope=None):
    return plan_fields(plan, envelope_text=envelope, envelope_source="the prebuild step" if envelope else None,
                       log_dir="/l", check=check, guard=None, inventory_names={"w1": "inv-w1"}, verbose=verbose)


@pytest.mark.parametrize("workers", [2, 32, 40, 200])
def test_the_summary_has_a_line_per_worker_up_to_the_fold_and_shows_sizes_not_hex(workers):
    plan = _big_plan(workers)
    lines = _fields(plan)["plan"]
    fixed = len(_fields(_big_plan(2))["plan"]) - 2
    if workers <= FOLD_ABOVE:
        assert len(lines) == fixed + workers
    else:  # alike workers share one line (+ the note saying so): the plan stays bounded as the cluster grows
        folded = [ln for ln in lines if "workers): " in ln]
        assert len(lines) <= fixed + 2 + 2 and folded
        assert sum(len(ln.split(": ", 1)[1].split(", ")) for ln in folded) == workers
        assert any("-v prints one line each" in ln for ln in lines)
    text = "\n".join(lines)
    full = plan.env["FLODL_INTERNAL_FULL_CLUSTER_JSON"]
    assert full[:64] not in text and '"host"' not in text  # no hex, no decoded topology
    size = len("FLODL_INTERNAL_FULL_CLUSTER_JSON=") + len(full) + 1
    assert f"    FLODL_INTERNAL_FULL_CLUSTER_JSON=<{size} bytes, hex-encoded JSON>" in lines
    assert "    FLODL_INTERNAL_FDL_CMD=train" in lines  # short values are shown as they are
    if workers <= FOLD_ABOVE:
        assert "    inv-w1 (host w1): ranks 2-3, devices 0-1, ssh alice@10.0.1.1:2222 (1 option(s))" in lines
    assert lines[1] == f"  command : {plan.command}" and lines[3] == "  log     : /l/launch-<timestamp>.log"


def test_the_summary_names_each_workers_prebuilt_binary_on_its_own_line():
    lines = _fields(_big_plan(2), envelope='{"w0": {"bin": "target/cluster/w0/cpu/release/train"}}')["plan"]
    assert "    w0: ranks 0-1, devices 0-1, ssh alice@10.0.1.0:2222 (1 option(s)), prebuilt " \
           "target/cluster/w0/cpu/release/train" in lines


def test_v_and_check_mode_show_the_decoded_topology():
    plan = _big_plan(3)
    for lines in (_fields(plan, verbose=True)["plan"], _fields(plan, check=True)["plan"]):
        assert any(ln.startswith("  topology (FLODL_INTERNAL_FULL_CLUSTER_JSON, decoded") for ln in lines)
        assert '          "host": "w2",' in lines


def test_the_summary_never_shows_the_join_token():
    token = "ab" * 16
    fields = _fields(_big_plan(3, token))
    assert token not in "\n".join(fields["plan"]) and token.encode().hex() not in "\n".join(fields["plan"])
    assert "join token redacted" in fields["plan"][4]
