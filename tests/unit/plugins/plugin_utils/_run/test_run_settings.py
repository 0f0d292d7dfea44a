"""The phases' knobs read once into a frozen RunSettings, carried by the run model, covered by its fingerprint."""
from __future__ import annotations

import dataclasses

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.model import cluster_model
from ansible_collections.flodl.cluster.plugins.module_utils._run.action_specs import PREFLIGHT_CHECK
from ansible_collections.flodl.cluster.plugins.module_utils._run.run_model import RunContext, RunSettings, from_model, to_model
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.run_handoff import run_fingerprint
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.run_rules import RUN_VARS
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.run_settings import read_settings


def test_read_as_the_steps_read_them() -> None:
    got = read_settings({"flodl_prebuild_dedupe": "maybe", "flodl_launch_docker": 3, "flodl_launch_detach": "true",
                         "flodl_launch_mode": " walk_in ", "flodl_prebuild_env": {"A": 1},
                         "flodl_launch": {"run_id": "ab"}, "flodl_run_lock_ttl": "12"}, None)
    assert (got.prebuild_dedupe, got.prebuild_dedupe_shown) == (None, "'maybe'")
    assert (got.launch_docker, got.launch_docker_type) == (None, "int")
    assert got.ssh_reuse is False and got.walks_in(["launch"]) and not got.walks_in(["prebuild"])
    assert got.prebuild_env == {"A": "1"} and got.launch_run_id == "ab" and got.run_lock_ttl == 12
    assert read_settings({}, None) == RunSettings()


def test_frozen_and_carried_by_the_model() -> None:
    settings = read_settings({"flodl_build_timeout": "90", "flodl_launch_host": "gpu-b"}, None)
    cluster = cluster_model({"controller": {"host": "c", "path": "/p"}, "workers": []})
    ctx = RunContext(cluster=cluster, controller_identity="c", prebuild=True,
                     net_timeout_scale=None, cmd="t", cmd_dir="", fdl_env=None, build_host="localhost",
                     launch_command=None, settings=settings)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.settings = RunSettings()  # type: ignore[misc]
    back = from_model(to_model(ctx, ["preflight"], True, "fp"), ["preflight"], True, "fp", None)
    assert back is not None and back.settings == settings
    model = to_model(ctx, ["preflight"], True, "fp")
    model["context"]["settings"]["run_lock_ttl"] = "60"
    assert from_model(model, ["preflight"], True, "fp", None) is None  # a field of the wrong shape: no model


@pytest.mark.parametrize("name", ["flodl_prebuild_env", "flodl_testing_cluster", "flodl_launch_container_root",
                                  "flodl_launch_docker", "flodl_launch_host", "flodl_ssh_reuse", "flodl_run_id",
                                  "flodl_launch", "flodl_prebuild_dedupe", "flodl_preflight_require_all"])
def test_the_fingerprint_covers_each_setting(name: str) -> None:
    assert name in RUN_VARS
    assert run_fingerprint({name: "a"}, None) != run_fingerprint({name: "b"}, None)


@pytest.mark.parametrize("value", ["nan", float("nan"), "inf", float("-inf"), "soon", [60], True, "4", -1e9])
def test_a_lock_ttl_that_is_no_usable_number_is_the_default_never_a_crash(value) -> None:
    # Only the launch phase refuses it (module_utils._run.knobs); a preflight, prebuild or teardown reads it still.
    assert read_settings({"flodl_run_lock_ttl": value}, None).run_lock_ttl == 60


@pytest.mark.parametrize("value, ttl", [(" 12 ", 12), (12.7, 12), ("1e9", 86400), (5, 5)])
def test_a_lock_ttl_in_range_or_above_is_read_and_capped(value, ttl) -> None:
    assert read_settings({"flodl_run_lock_ttl": value}, None).run_lock_ttl == ttl


def test_the_preflight_knobs_are_read_generically_and_carried() -> None:
    """A probe check's threshold (knobs.NUMBERS, phase preflight) reaches the run with no option of its own."""
    settings = read_settings({"flodl_preflight_min_free_gb": "0.5", "flodl_preflight_timeout": 12}, None)
    assert settings.preflight_number("flodl_preflight_min_free_gb") == 0.5
    assert settings.preflight_number("flodl_preflight_timeout") == 12.0
    for unset in ({}, {"flodl_preflight_min_free_gb": ""}, {"flodl_preflight_min_free_gb": "lots"}):
        assert read_settings(unset, None).preflight_number("flodl_preflight_min_free_gb") is None
    cluster = cluster_model({"controller": {"host": "c", "path": "/p"}, "workers": []})
    ctx = RunContext(cluster=cluster, controller_identity="c", prebuild=True, net_timeout_scale=None, cmd="t",
                     cmd_dir="", fdl_env=None, build_host="localhost", launch_command=None, settings=settings)
    model = to_model(ctx, ["preflight"], True, "fp")
    back = from_model(model, ["preflight"], True, "fp", None)
    assert back is not None and back.settings == settings
    for wrong in ([["flodl_preflight_min_free_gb", "0.5"]], [["x", 1, 2]], {"x": 1}, [[1, 2.0]]):
        model["context"]["settings"]["preflight_numbers"] = wrong
        assert from_model(model, ["preflight"], True, "fp", None) is None, wrong


@pytest.mark.parametrize("values, timeout, parallel", [
    ({}, 30.0, 64), ({"flodl_preflight_timeout": "12", "flodl_preflight_max_parallel": "8"}, 12.0, 8),
    ({"flodl_preflight_timeout": 5, "flodl_preflight_max_parallel": 2}, 5.0, 2),
    ({"flodl_preflight_timeout": " ", "flodl_preflight_max_parallel": ""}, 30.0, 64)])
def test_the_probes_timeout_and_parallelism_are_the_runs_own(values, timeout, parallel) -> None:
    """One source: the run's value (a blank survey answer is unset), not an option the role passed beside it."""
    settings = read_settings(values, None)
    assert settings.probe_timeout() == timeout and settings.probe_parallel() == parallel


def test_the_preflight_step_takes_no_timeout_or_parallelism_option() -> None:
    assert not {"timeout", "max_parallel"} & set(PREFLIGHT_CHECK["argument_spec"])


def test_the_fingerprint_covers_the_preflight_knobs() -> None:
    name = "flodl_preflight_min_free_gb"
    assert name in RUN_VARS and run_fingerprint({name: "1"}, None) != run_fingerprint({name: "2"}, None)
