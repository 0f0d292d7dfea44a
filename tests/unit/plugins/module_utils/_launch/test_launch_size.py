"""The launch environment measured on the bytes launched (issues 17 and 19): the kernel's per-string limit
at its boundary, the compact-JSON fallback, the refusal, and the plan carrying exactly what was measured."""
from __future__ import annotations

import json

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._launch import launch_env as le
from ansible_collections.flodl.cluster.plugins.module_utils._launch import launch_size as ls
from ansible_collections.flodl.cluster.plugins.module_utils._core.hexcodec import hex_decode, hex_encode
from ansible_collections.flodl.cluster.plugins.module_utils._launch.launch_text import plan_fields
from ansible_collections.flodl.cluster.plugins.module_utils._core.serde_json_text import serde_compact, serde_pretty

FULL, TESTING = ls.FULL_CLUSTER_JSON, ls.TESTING_CLUSTER_JSON
LIMIT = ls.MAX_ARG_STRLEN
REUSE_DIR = "/tmp/flodl-ssh-abcdefgh"
BIG_ARG_MAX = 64 * 1024 * 1024  # the total is tested on its own below


def _cluster(workers: int, pad: int) -> dict:
    """``workers`` remote workers; ``pad`` characters of one worker env value move every rendering by ``pad``."""
    return {
        "controller": {"host": "10.0.0.1", "port": 1337, "path": "/opt/proj"},
        "workers": [
            {"host": f"w{i:03d}", "local_devices": [0, 1], "nccl_socket_ifname": "eth0", "path": "/srv/proj",
             "ssh": {"target": f"10.1.{i // 250}.{i % 250 + 1}", "identity_file": ".fdl/keys/id"},
             "arch": "precompiled/cu128", **({"env": {"PAD": "p" * pad}} if i == 0 else {})}
            for i in range(workers)
        ],
    }


def _render(workers: int, pad: int, *, reuse: str | None = REUSE_DIR, arg_max: int = BIG_ARG_MAX,
            inherited: dict | None = None):
    inputs = le.LaunchInputs(cluster=_cluster(workers, pad), project_root="/opt/proj", cmd="train",
                             host_user="alice", ssh_reuse_dir=reuse, local_gpu_counts=(1, 0))
    return ls.render_checked(inputs, lambda name: [], inherited=inherited or {}, arg_max=arg_max)


def _pretty_bytes(plan, name: str) -> int:
    """What ``name`` measures pretty-printed, whichever form the plan ships."""
    value = json.loads(hex_decode(plan.env[name]).decode())
    return ls.entry_bytes(name, hex_encode(serde_pretty(value)))


def _pad_for(name: str, target: int, *, compact: bool, workers: int) -> int:
    """The pad that puts ``name`` (pretty or compact) at exactly ``target`` bytes (hex: 2 per character)."""
    plan, _fitted = _render(workers, 0)
    value = json.loads(hex_decode(plan.env[name]).decode())
    text = serde_compact(value) if compact else serde_pretty(value)
    base = ls.entry_bytes(name, hex_encode(text))
    assert (target - base) % 2 == 0 and target > base
    return (target - base) // 2


def _assert_launched_is_measured(plan, fitted):
    """The plan (and the registered result the launch command gets) holds the very strings measured."""
    assert plan.env is fitted.env
    handed = plan_fields(plan, envelope_text=None, envelope_source=None, log_dir="/l", check=False, guard=None,
                         inventory_names={})["env"]
    assert handed == plan.env
    assert fitted.sizes == {k: ls.entry_bytes(k, v) for k, v in handed.items()}


# A JSON character is two hex digits and every name has an even length plus '=' and NUL, so a hex variable
# is always an even number of bytes: one JSON character over the limit is two bytes over.
@pytest.mark.parametrize("name, workers", [(FULL, 130), (TESTING, 150)])
def test_pretty_at_the_limit_ships_as_is_and_one_character_more_ships_compact_with_one_warning(name, workers):
    pad = _pad_for(name, LIMIT, compact=False, workers=workers)
    plan, fitted = _render(workers, pad)
    assert fitted.sizes[name] == LIMIT and not fitted.problems and name not in fitted.compacted
    assert hex_decode(plan.env[name]).decode().startswith("{\n  \"controller\": {\n")  # pretty, as fdl-cli
    _assert_launched_is_measured(plan, fitted)

    plan, fitted = _render(workers, pad + 1)
    assert _pretty_bytes(plan, name) == LIMIT + 2
    assert not fitted.problems and name in fitted.compacted
    text = hex_decode(plan.env[name]).decode()
    assert text.startswith('{"controller":{"host":"10.0.0.1","port":1337,') and "\n" not in text
    assert fitted.sizes[name] < LIMIT
    mine = [w for w in fitted.warnings if name in w]
    assert len(mine) == 1 and str(LIMIT) in mine[0] and str(LIMIT + 2) in mine[0] and str(fitted.sizes[name]) in mine[0]
    assert mine[0] in plan.warnings
    _assert_launched_is_measured(plan, fitted)


@pytest.mark.parametrize("name", [FULL, TESTING])
def test_compact_at_the_limit_ships_and_one_character_more_is_refused_naming_variable_size_limit_and_fixes(name):
    pad = _pad_for(name, LIMIT, compact=True, workers=20)
    plan, fitted = _render(20, pad)
    assert name in fitted.compacted and fitted.sizes[name] == LIMIT
    # (the full topology carries more than the testing one: ssh options, so it may be refused itself)
    assert not [p for p in fitted.problems if p.variable == name]
    _assert_launched_is_measured(plan, fitted)

    _plan, fitted = _render(20, pad + 1)
    [problem] = [p for p in fitted.problems if p.variable == name]
    assert (problem.size, problem.limit) == (LIMIT + 2, LIMIT)
    text = problem.text()
    assert text.startswith(f"controller: variable {name} is too long even as compact JSON")
    for fix in ("shorten", "fewer per-worker flodl_env entries", "flodl_ssh_reuse: false", "split the cluster"):
        assert fix in text
    assert ("flodl_testing_cluster: false" in text) is (name == TESTING)
    assert str(LIMIT + 2) in text and str(LIMIT) in text and "E2BIG" in text


def test_compact_is_serde_compact_of_the_same_value_floats_and_key_order_kept():
    value = {"b": [1, 2], "a": {"x": 1e-7, "y": 2.0, "z": 0.00001, "é": "ü\n"}, "e": [], "f": {}}
    assert serde_compact(value) == '{"b":[1,2],"a":{"x":1e-7,"y":2.0,"z":0.00001,"é":"ü\\n"},"e":[],"f":{}}'
    pretty_hex = hex_encode(serde_pretty(value))
    assert hex_decode(ls.compact_hex(pretty_hex)).decode() == serde_compact(value)


def test_reuse_options_count_in_the_measured_bytes():
    with_reuse, _f = _render(3, 0)
    without, _g = _render(3, 0, reuse=None)
    grown = len(with_reuse.env[FULL]) - len(without.env[FULL])
    # one option per worker: '"ControlPath=<dir>/%C"' on its own line, and the options array around it
    assert grown > 0 and grown % 3 == 0
    assert with_reuse.env[TESTING] == without.env[TESTING]  # test binaries never ssh


def test_a_variable_that_is_not_json_is_refused_as_is():
    fitted = ls.fit_launch_env({"FDL_ENV": "x" * LIMIT}, inherited={}, arg_max=BIG_ARG_MAX)
    [problem] = fitted.problems
    assert problem.variable == "FDL_ENV" and problem.size == LIMIT + len("FDL_ENV=") + 1
    assert "file on the shared mount" in problem.text()


def test_the_total_counts_the_inherited_environment_once_and_the_command_line():
    env = {"A": "1" * 100}
    inherited = {"A": "old", "HOME": "/home/u"}
    fitted = ls.fit_launch_env(env, inherited=inherited, arg_max=BIG_ARG_MAX, argv=50)
    assert fitted.total == ls.entry_bytes("A", "1" * 100) + ls.entry_bytes("HOME", "/home/u") + 2 * 8 + 50
    budget_exact = fitted.total + ls.DEFAULT_ARG_MARGIN
    assert not ls.fit_launch_env(env, inherited=inherited, arg_max=budget_exact, argv=50).problems
    [problem] = ls.fit_launch_env(env, inherited=inherited, arg_max=budget_exact - 1, argv=50).problems
    assert problem.variable == "" and problem.size == fitted.total and problem.limit == fitted.total - 1
    assert problem.text().startswith("controller: the launch environment (the controller's own environment")


def test_a_guarded_plan_adds_and_checks_nothing():
    inputs = le.LaunchInputs(cluster=_cluster(2, 0), project_root="/opt/proj", cmd="train",
                             controller_env={"FLODL_INTERNAL_CLUSTER_JSON": "x"})
    plan, fitted = ls.render_checked(inputs, lambda name: [], inherited={}, arg_max=BIG_ARG_MAX)
    assert plan.guarded and plan.env == {} and not fitted.problems
