"""Runs refused before contact, through the real actions that refuse them (no process started).

These cases used to be integration tests, one ansible-playbook run (or two) each, on namespace hosts that
were never contacted. Each now runs the step that refuses it: ``flodl.cluster.topology`` with the launch
phase (the first step of the launch playbook) and ``flodl.cluster.preflight_check`` with every phase (the
first step of cluster_train). The integration tests keep a few of them end to end, each showing 0 logins on
the hosts' sshd (test_launch.py, test_preflight.py, test_hardening.py).
"""
from __future__ import annotations

import copy

import pytest
from .conftest import make_action

ACTION = "topology"
BASE = "three_workers"  # a valid run of ctl, gpu-b (worker 1) and gpu-c
WORKER = "gpu-b"
ALL_PHASES = ["preflight", "prebuild", "launch"]
CANARY = "/var/tmp/flodl-canary"

# (run-level variables, variables of gpu-b, environment, what the refusal says); every case is refused by
# cluster_train's first step; those marked launch=True by the launch playbook's first step as well.
CASES = {
    # from test_launch.py: refused by cluster_train and by launch
    "reserved_cluster_env": ({"flodl_cluster_env": {"CUDA_VISIBLE_DEVICES": "0"}}, {}, {},
                             'key "CUDA_VISIBLE_DEVICES" is reserved', True),
    "reserved_worker_rank": ({}, {"flodl_env": {"FLODL_INTERNAL_LOCAL_RANK": "1"}}, {},
                             'host gpu-b (worker 1): flodl_env["FLODL_INTERNAL_LOCAL_RANK"]: '
                             'key "FLODL_INTERNAL_LOCAL_RANK" is reserved', True),
    "reserved_worker_fdl_env": ({}, {"flodl_env": {"FDL_ENV": "x"}}, {},
                                'host gpu-b (worker 1): flodl_env["FDL_ENV"]: key "FDL_ENV" is reserved', True),
    "scale_env_out_of_range": ({}, {}, {"FLODL_NET_TIMEOUT_SCALE": "0.05"},
                               "FLODL_NET_TIMEOUT_SCALE='0.05' is out of range", True),
    "scale_var_not_a_number": ({"flodl_net_timeout_scale": "1_0"}, {}, {}, "is not a number", True),
    # from test_preflight.py
    "reserved_worker_cuda": ({}, {"flodl_env": {"CUDA_VISIBLE_DEVICES": "0"}}, {},
                             'host gpu-b (worker 1): flodl_env["CUDA_VISIBLE_DEVICES"]', True),
    "scale_var_out_of_range": ({"flodl_net_timeout_scale": "0.05"}, {}, {}, "FLODL_NET_TIMEOUT_SCALE", True),
    # from test_hardening.py (payloads in inputs)
    "cmd_dir_climbs_out": ({"flodl_cmd_dir": "../../.."}, {}, {}, "flodl_cmd_dir '../../..' climbs out of", False),
    "cmd_with_a_shell_payload": ({"flodl_cmd": f"train;touch {CANARY}"}, {}, {},
                                 "contains ' ', '/', ';', which rustc refuses in a binary crate", False),
    "arch_climbs_out": ({}, {"flodl_arch": "../../../../usr"}, {}, "flodl_arch '../../../../usr' climbs out of",
                        False),
    "build_host_not_in_inventory": ({"flodl_build_host": "nohost"}, {}, {},
                                    "flodl_build_host 'nohost' is not an inventory host", False),
    "env_over_the_kernel_limit": ({}, {"flodl_env": {"BIG": "x" * 200_000}}, {},
                                  "over the kernel's 131072-byte limit for one environment", False),
    "gpu_listed_twice": ({}, {"flodl_local_devices": [0, 0]}, {}, "lists GPU 0 more than once", False),
    "dedupe_not_a_bool": ({"flodl_prebuild_dedupe": "maybe"}, {}, {},
                          "flodl_prebuild_dedupe must be true or false", False),
    "build_timeout_not_a_number": ({"flodl_build_timeout": "soon"}, {}, {},
                                   "flodl_build_timeout must be a number of seconds above 0", False),
    "grace_not_a_number": ({"flodl_launch_grace_seconds": "soon"}, {}, {},
                           "flodl_launch_grace_seconds must be a number of seconds", False),
    # issue 35: become on a worker that is not the step's own host (ranks would run as the connection user)
    "become_on_a_later_worker": ({}, {"ansible_become": True, "ansible_become_user": "nobody"}, {},
                                 "host gpu-b (worker 1): become is on for gpu-b (its ansible_become; "
                                 "become_user nobody", True),
    "become_as_inventory_text": ({}, {"ansible_become": "yes"}, {}, "host gpu-b (worker 1): become is on", True),
    "gpu_ram_share_not_a_fraction": ({}, {"flodl_gpu_ram_share": "half"}, {},
                                     "host gpu-b (worker 1): flodl_gpu_ram_share: must be a non-negative fraction",
                                     False),
}


def _apply(loaded, group: dict, worker: dict):
    """Run-level variables reach every host's vars (as group ``all`` does); a worker's only its own."""
    tv = copy.deepcopy(loaded.task_vars)
    tv.update(group)
    for host in tv["hostvars"].values():
        host.update(group)
    tv["hostvars"][WORKER].update(worker)
    loaded.task_vars = tv
    return loaded


def _text(result: dict) -> str:
    return " ".join([str(result.get("msg", "")), *map(str, result.get("problems", []))])


@pytest.mark.parametrize("name", sorted(CASES))
def test_cluster_train_refuses_before_contact(name, case, run_as, monkeypatch, no_processes):
    group, worker, env, expect, _launch = CASES[name]
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    loaded = _apply(case(BASE), group, worker)
    loaded.args = {"phases": ALL_PHASES}
    result = run_as("preflight_check", loaded)
    text = _text(result)
    assert expect in text, text
    assert "no host was contacted" in text
    if worker:  # a worker's own variable: that worker fails, the others are skipped uncontacted
        assert result["refused"] is True and result["failed_hosts"] == [WORKER], result
        assert {e["status"] for h, e in result["per_host"].items() if h != WORKER} == {"skipped"}
    else:
        assert result.get("failed") is True or result.get("refused") is True, result
    assert CANARY not in text or name == "cmd_with_a_shell_payload"
    assert no_processes == []  # no probe, no ssh, no local command


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c[4]))
def test_the_launch_playbook_refuses_before_contact(name, case, run, monkeypatch, no_processes):
    group, worker, env, expect, _launch = CASES[name]
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    loaded = _apply(case(BASE), group, worker)
    loaded.args = {"phases": ["launch"], "lock": True}
    result = run(loaded)
    # The step passes (it runs on one worker); every worker's report fails with its entry.
    assert not result.get("failed") and result["refused"] is True, result
    assert expect in _text(result) and "no host was contacted" in result["msg"], result
    assert "failed" in {e["status"] for e in result["per_host"].values()}
    if not worker:  # a problem of the run itself fails every worker
        assert {e["status"] for e in result["per_host"].values()} == {"failed"}, result["per_host"]
    assert no_processes == []


def test_the_plays_become_fails_every_worker_with_its_own_message(case, no_processes):
    """``become: true`` on the play (or --become): no worker may take it, each fails naming itself."""
    loaded = case(BASE)
    loaded.task_vars["hostvars"]["gpu-c"]["ansible_become"] = "false"  # its own false wins, as in Ansible
    loaded.args = {"phases": ALL_PHASES}
    action = make_action("preflight_check", loaded)
    action._task.become = True
    action._play_context.become = True
    result = action.run(task_vars=loaded.task_vars)
    assert result["refused"] is True and result["failed_hosts"] == ["ctl", "gpu-b"], result
    for name, index in (("ctl", 0), ("gpu-b", 1)):
        assert result["per_host"][name]["msg"].count("become is on for") == 1
        assert f"host {name} (worker {index}): become is on for {name} (the play's become" in \
            result["per_host"][name]["msg"]
    assert result["per_host"]["gpu-c"]["status"] == "skipped"
    assert no_processes == []


def _renamed(loaded, old: str, new: str):
    """The recorded case with inventory host ``old`` named ``new`` (its variables kept)."""
    tv = loaded.task_vars
    tv["hostvars"][new] = tv["hostvars"].pop(old)
    for key in ("all", "flodl_workers"):
        tv["groups"][key] = [new if h == old else h for h in tv["groups"][key]]
    tv["ansible_play_hosts_all"] = [new if h == old else h for h in tv["ansible_play_hosts_all"]]
    return loaded


@pytest.mark.parametrize("action", ["preflight_check", "topology"])
def test_a_worker_named_localhost_is_refused_not_taken_for_the_build_host(action, case, run_as, no_processes):
    """issue 38: it became the default build host (``h2 -> localhost(<its address>)``), its builds over ssh."""
    loaded = _renamed(case(BASE), WORKER, "localhost")
    loaded.args = {"phases": ALL_PHASES}
    result = run_as(action, loaded)
    text = _text(result)
    assert ("host localhost (worker 1): the inventory name 'localhost' is Ansible's name for this machine "
            "(the controller), but this worker is reached over ssh at 192.0.2.12") in text, text
    assert "default build host" in text and "rename the inventory host" in text
    if action == "preflight_check":
        assert result["failed_hosts"] == ["localhost"], result
    assert no_processes == []


@pytest.mark.parametrize("connection", ["local", None])
def test_the_controllers_own_worker_may_be_localhost_on_the_local_connection(connection, case, run_as):
    loaded = _renamed(case(BASE), "ctl", "localhost")  # flodl_host gpu-a: this machine
    loaded.task_vars["inventory_hostname"] = "localhost"
    if connection:
        loaded.task_vars["hostvars"]["localhost"]["ansible_connection"] = connection
    loaded.args = {"phases": ALL_PHASES}
    result = run_as("topology", loaded)
    if connection == "local":
        assert result.get("failed") is not True, result
    else:  # explicitly in the inventory, Ansible reaches it over ssh like any other host
        assert "host localhost (worker 0): the inventory name 'localhost'" in _text(result), result
