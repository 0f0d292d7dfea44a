"""Values that used to pass validation and fail later (an internal assertion, a dead launch) are refused
with the run, before contact, naming the host, the variable and the fix."""
from __future__ import annotations

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._run.knobs import knob_problems
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.module_utils._core.problems import FDL
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.validate import cluster_problems
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import build_context

ALL = ("preflight", "prebuild", "launch")


def task_vars(h2=None, **extra):
    worker = {"flodl_path": "/srv/proj", "flodl_local_devices": [0], "flodl_nccl_socket_ifname": "eth0",
              "flodl_arch": "precompiled/cu128", "ansible_host": "10.0.0.12"}
    tv = {
        "groups": {"all": ["h1", "h2"], "flodl_workers": ["h1", "h2"]},
        "hostvars": {"h1": dict(worker, ansible_host="10.0.0.11"), "h2": dict(worker, **(h2 or {}))},
        "inventory_hostname": "h1", "ansible_play_hosts_all": ["h1", "h2"],
        "flodl_controller_host": "10.0.0.1", "flodl_controller_path": "/srv/proj", "flodl_cmd": "train",
    }
    tv.update(extra)
    return tv


@pytest.fixture(autouse=True)
def controller_env(monkeypatch):
    monkeypatch.setenv("FLODL_HOST_NAME", "ctl")
    monkeypatch.delenv("FLODL_NET_TIMEOUT_SCALE", raising=False)


def refused(tv, phases=None) -> TopologyError:
    with pytest.raises(TopologyError) as exc:
        build_context(tv, None, phases or ALL)
    return exc.value


@pytest.mark.parametrize("path, why", [
    ("srv/proj", "is not an absolute path"),
    ("proj;touch /tmp/canary", "is not an absolute path"),
    ("/srv/proj\ntouch /tmp/canary", "contains a control character"),
    ("/srv/proj\x00x", "contains a NUL character"),
])
def test_a_bad_flodl_path_names_host_variable_and_fix(path, why):
    exc = refused(task_vars({"flodl_path": path}))
    found = [p for p in exc.problems if "flodl_path" in p]
    assert len(found) == 1, exc.problems
    assert found[0].startswith("host h2 (worker 1): flodl_path") and why in found[0]
    assert "absolute path of the project checkout on that host" in found[0] or "remove it" in found[0]
    assert exc.per_host and list(exc.per_host) == ["h2"]  # that worker's own refusal, before contact
    assert "running_script" not in " ".join(exc.problems)


def test_an_absolute_path_with_odd_characters_is_a_directory_name():
    # Quoted as one word everywhere: not refused.
    build_context(task_vars({"flodl_path": "/srv/my proj/$x"}), None, ALL)


def test_a_relative_controller_path_is_refused():
    exc = refused(task_vars(flodl_controller_path="srv/proj"))
    assert any(p.startswith("controller: flodl_controller_path 'srv/proj' is not an absolute path")
               for p in exc.problems), exc.problems


def test_a_relative_project_dir_is_refused():
    exc = refused(task_vars(flodl_project_dir="checkout"))
    assert any(p.startswith("controller: flodl_project_dir 'checkout' is not an absolute path") for p in exc.problems)


def test_a_nul_in_an_env_value_is_refused_without_showing_it():
    exc = refused(task_vars({"flodl_env": {"TOKEN": "s3cret\x00tail"}}))
    found = [p for p in exc.problems if "NUL" in p]
    assert found == ['host h2 (worker 1): flodl_env["TOKEN"]: the value contains a NUL character, which no '
                     'process environment (execve) can carry; remove it']
    assert "s3cret" not in " ".join(exc.problems)


def test_a_nul_in_the_cluster_env_is_refused():
    exc = refused(task_vars(flodl_cluster_env={"A": "x\x00"}))
    assert any(p.startswith('cluster: flodl_cluster_env["A"]: the value contains a NUL') for p in exc.problems)


@pytest.mark.parametrize("var, value", [("flodl_data_path", "/data\x00"), ("flodl_docker", "cu\x00da")])
def test_a_nul_in_any_worker_string_is_refused(var, value):
    exc = refused(task_vars({var: value}))
    assert any(p.startswith(f"host h2 (worker 1): {var}: contains a NUL character") for p in exc.problems)


def test_a_nul_in_an_ssh_option_is_refused():
    exc = refused(task_vars({"flodl_ssh": {"options": ["ConnectTimeout=5\x00"]}}))
    assert any(p.startswith("host h2 (worker 1): flodl_ssh.options[0]: contains a NUL") for p in exc.problems), \
        exc.problems


def test_fdl_names_in_fdl_files():
    cluster = {"controller": {"host": "c", "path": "/p"},
               "workers": [{"host": "gpu-a", "path": "p", "local_devices": [0], "nccl_socket_ifname": ""}]}
    assert any(p.startswith('cluster.workers[0] ("gpu-a").path \'p\' is not an absolute path')
               for p in cluster_problems(cluster, FDL))


@pytest.mark.parametrize("name, value", [
    ("flodl_launch_timeout", -1), ("flodl_launch_timeout", "inf"), ("flodl_launch_timeout", "soon"),
    ("flodl_launch_grace_seconds", -5), ("flodl_launch_grace_seconds", "nan"),
    ("flodl_build_timeout", 0), ("flodl_build_timeout", -3600),
    ("flodl_preflight_timeout", 0), ("flodl_preflight_timeout", "-1"),
    ("flodl_preflight_max_parallel", 0), ("flodl_preflight_max_parallel", 2.5),
    ("flodl_run_lock_ttl", 0), ("flodl_run_lock_ttl", 4.5), ("flodl_run_lock_ttl", "soon"),
])
def test_a_number_out_of_range_is_refused_naming_the_variable_and_fix(name, value):
    exc = refused(task_vars(**{name: value}))
    found = [p for p in exc.problems if name in p]
    assert len(found) == 1 and found[0].startswith(f"controller: {name} must be ") and "e.g." in found[0]
    assert exc.per_host is None  # a problem of the run: the step fails before any host


@pytest.mark.parametrize("name, value", [
    ("flodl_launch_timeout", 0), ("flodl_launch_timeout", "86400"), ("flodl_launch_grace_seconds", 0),
    ("flodl_build_timeout", "600"), ("flodl_preflight_timeout", 5), ("flodl_preflight_max_parallel", "8"),
    ("flodl_run_lock_ttl", 5), ("flodl_run_lock_ttl", "120"),
])
def test_numbers_in_range_pass(name, value):
    assert knob_problems({name: value}, ALL, prebuild=True) == []


@pytest.mark.parametrize("value", ["maybe", 2, ["true"]])
def test_require_all_not_a_boolean_is_refused_before_contact(value):
    exc = refused(task_vars(flodl_preflight_require_all=value))
    (found,) = [p for p in exc.problems if "flodl_preflight_require_all" in p]
    assert found.startswith("controller: flodl_preflight_require_all must be true or false, got ")
    assert "leave it unset" in found and exc.per_host is None


@pytest.mark.parametrize("value", [True, False, "true", "false", "yes", "", "  "])
def test_require_all_as_a_boolean_or_its_text_or_blank_passes(value):
    assert knob_problems({"flodl_preflight_require_all": value}, ["preflight"], prebuild=True) == []


def test_knobs_of_phases_not_run_are_not_checked():
    assert knob_problems({"flodl_build_timeout": -1}, ["launch"], prebuild=True) == []
    assert knob_problems({"flodl_build_timeout": -1}, ALL, prebuild=False) == []


@pytest.mark.parametrize("name, value", [
    ("flodl_launch_log_dir", "/var/log/flodl\x00x"), ("flodl_launch_host", "h\x00"),
    ("flodl_prebuild_env", {"CARGO_HOME": "/c\x00"}),
])
def test_a_nul_in_a_run_level_variable_is_refused_without_showing_it(name, value):
    exc = refused(task_vars(**{name: value}))
    found = [p for p in exc.problems if p.startswith(f"controller: {name} contains a NUL")]
    assert len(found) == 1 and len([p for p in exc.problems if name in p]) == 1, exc.problems
    assert "\x00" not in " ".join(exc.problems)


def test_one_rank_in_all_is_refused_before_contact_for_a_launch():
    one = task_vars()
    one["groups"]["flodl_workers"] = ["h1"]
    problems = refused(one).problems
    assert any(p.startswith("cluster: 1 rank(s) in total") and "needs at least 2" in p for p in problems), problems
    # preflight alone is fine, and an `all` worker is only counted at launch
    assert build_context(one, None, ["preflight"])
    one["hostvars"]["h1"]["flodl_local_devices"] = "all"
    assert build_context(one, None, list(ALL))


def test_a_detached_run_cannot_ride_a_forwarded_agent():
    problems = knob_problems({"flodl_launch_detach": "true", "flodl_launch_forward_agent": True}, ["launch"], True)
    assert len(problems) == 1 and "outlives this job" in problems[0] and "flodl_launch_forward_agent: false" in problems[0]
    assert knob_problems({"flodl_launch_detach": True, "flodl_launch_forward_agent": "false"}, ["launch"], True) == []
    assert knob_problems({"flodl_launch_detach": True, "flodl_launch_forward_agent": True}, ["preflight"], True) == []


@pytest.mark.parametrize("mode, words", [
    ("fan-out", "flodl_launch_mode must be one of fanout, walk_in, got str 'fan-out'"),
    (True, "flodl_launch_mode must be one of fanout, walk_in"),
])
def test_an_unknown_launch_mode_is_refused_before_contact(mode, words):
    problems = knob_problems({"flodl_launch_mode": mode}, ["preflight", "launch"], True)
    assert len(problems) == 1 and words in problems[0]


@pytest.mark.parametrize("mode", ["fanout", "walk_in", "", "  "])
def test_the_launch_modes_and_a_blank_survey_answer_pass(mode):
    assert knob_problems({"flodl_launch_mode": mode}, ["launch"], True) == []


def test_a_detached_walk_in_is_refused():
    problems = knob_problems({"flodl_launch_mode": "walk_in", "flodl_launch_detach": "true"}, ["launch"], True)
    assert len(problems) == 1 and "flodl_launch_mode=walk_in and flodl_launch_detach=true" in problems[0]


@pytest.mark.parametrize("phases", [["preflight"], ["prebuild"], ["teardown"]])
def test_a_lock_ttl_of_nan_is_refused_by_the_launch_and_read_as_the_default_by_the_other_phases(phases):
    # It used to pass every phase but the launch as a float and crash the reader (int(nan)): a traceback, no refusal.
    assert build_context(task_vars(flodl_run_lock_ttl="nan"), None, phases).settings.run_lock_ttl == 60
    (found,) = [p for p in refused(task_vars(flodl_run_lock_ttl="nan"), ["launch"]).problems if "run_lock_ttl" in p]
    assert found.startswith("controller: flodl_run_lock_ttl must be a number of seconds (5 or more), got str 'nan'")
