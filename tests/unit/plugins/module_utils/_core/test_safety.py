"""Hostile-input predicates: each refuses what reached a shell, ssh or a path in the issue's probe."""
from __future__ import annotations

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._core import safety as sf

W = "host gpu-b: flodl_host"


# ------------------------------------------------------------ host names and ssh targets


@pytest.mark.parametrize("value", ["gpu-b", "node01.cluster.local", "10.0.0.12", "fd00::2", "fe80::1%eth0", "a_b"])
def test_plain_host_names_pass(value):
    assert sf.host_name_problem(value, W) is None
    assert sf.ssh_target_problem(value, W) is None


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("-oProxyCommand=touch /tmp/p", "starts with '-'"),
        ("../../../x", "path separator"),
        ("a\\b", "path separator"),
        ("..", "relative directory name"),
        ("gpu b", "whitespace or a control character"),
        ("gpu\nb", "whitespace or a control character"),
        ("gpu\x00b", "whitespace or a control character"),
        ("gpu\u200bb", "whitespace or a control character"),
        ("gpu;touch", "metacharacters"),
        ("$(id)", "metacharacters"),
        ("", "is empty"),
        ("a" * 256, "at most 255"),
    ],
)
def test_hostile_host_names_are_refused(value, why):
    problem = sf.host_name_problem(value, W)
    assert problem is not None and why in problem
    assert problem.startswith(W + " ")
    assert "\n" not in problem


def test_host_name_refuses_at_but_ssh_target_accepts_user_at_host():
    assert "flodl_ssh.user" in sf.host_name_problem("alice@gpu-b", W)
    assert sf.ssh_target_problem("alice@gpu-b", W) is None
    assert "no host after '@'" in sf.ssh_target_problem("alice@", W)
    assert "starts with '-'" in sf.ssh_target_problem("-x@gpu-b", W)


def test_non_string_host_reports_type_only():
    assert sf.host_name_problem(12, W) == (
        f"{W} must be a string host name, got int. Set it to a host name or address."
    )


def test_long_hostile_value_is_shown_shortened():
    problem = sf.host_name_problem("-" + "x" * 200, W)
    assert "x" * 100 not in problem
    assert "..." in problem


# ------------------------------------------------------------ cargo --bin names


@pytest.mark.parametrize("value", ["train", "ddp-bench", "bench_2", "1abc", "é"])
def test_valid_cargo_bin_names(value):
    assert sf.cargo_bin_problem(value) is None


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("-x", "starts with '-'"),
        ("a.b", "'.'"),
        ("a b", "' '"),
        ("x;touch /tmp/p", "';'"),
        ("deps", "reserved by cargo"),
        ("incremental", "reserved by cargo"),
        ("", "is empty"),
        (None, "got null"),
        ("a" * 256, "255 bytes"),
    ],
)
def test_invalid_cargo_bin_names(value, why):
    problem = sf.cargo_bin_problem(value)
    assert problem is not None and why in problem
    assert problem.startswith("flodl_cmd ")
    assert "[[bin]]" in problem


def test_cargo_bin_message_in_full():
    assert sf.cargo_bin_problem("a.b") == (
        "flodl_cmd 'a.b' contains '.', which rustc refuses in a binary crate name. "
        "Set it to the name of a [[bin]] target in Cargo.toml (letters, digits, '_' and '-')."
    )


# ------------------------------------------------------------ relative paths under a root


@pytest.mark.parametrize("value", ["", ".", "trainer", "a/b/../c", "./x", "a/.."])
def test_paths_that_stay_under_their_root(value):
    assert sf.relative_path_problem(value, "flodl_cmd_dir", "the project directory") is None


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("../../..", "climbs out"),
        ("..", "climbs out"),
        ("a/../../b", "climbs out"),
        ("/usr", "is absolute"),
        ("~root", "is absolute"),
        ("a\0b", "NUL"),
        ("a\nb", "control"),
        (3, "got int"),
    ],
)
def test_paths_that_escape_are_refused(value, why):
    problem = sf.relative_path_problem(value, "host gpu-b: flodl_arch", "<path>/libtorch/")
    assert problem is not None and why in problem
    assert problem.startswith("host gpu-b: flodl_arch ")
    assert problem.endswith("Give a path relative to <path>/libtorch/ that stays inside it.")


def test_empty_arch_is_refused_when_the_root_itself_is_not_allowed():
    for value in ("", ".", "a/.."):
        problem = sf.relative_path_problem(value, "flodl_arch", "<path>/libtorch/", allow_empty=False)
        assert problem is not None and "itself" in problem


def test_resolved_under_follows_symlinks(tmp_path):
    root = tmp_path / "proj"
    (root / "sub").mkdir(parents=True)
    (root / "out").symlink_to(tmp_path)
    assert sf.resolved_under(str(root), str(root / "sub"))
    assert sf.resolved_under(str(root), str(root))
    assert not sf.resolved_under(str(root), str(root / "out"))
    assert not sf.resolved_under(str(root), str(tmp_path / "proj2"))


# ------------------------------------------------------------ environment size


def test_env_entry_at_the_string_limit_passes_and_one_byte_more_fails():
    # "K=" + value + NUL: 2 + 131069 + 1 == 131072 exactly.
    ok = {"K": "v" * (sf.MAX_ARG_STRLEN - 3)}
    assert sf.env_size_problems(ok, "flodl_env", arg_max=10**9) == []
    big = {"K": "v" * (sf.MAX_ARG_STRLEN - 2)}
    problems = sf.env_size_problems(big, "flodl_env", arg_max=10**9)
    assert len(problems) == 1
    assert "'K' is 131073 bytes" in problems[0] and "E2BIG" in problems[0]


def test_env_size_never_shows_a_value():
    secret = "hunter2-" * 30000
    problems = sf.env_size_problems({"TOKEN": secret}, "flodl_cluster_env", arg_max=200000, margin=0)
    assert len(problems) == 2
    assert all("hunter2" not in p for p in problems)
    assert "'TOKEN' is 240007 bytes" in problems[0]
    assert "240015 bytes in all" in problems[1]


def test_env_total_counts_baseline_margin_and_pointers():
    env = {"A": "x" * 100}  # 1 + 1 + 100 + 1 = 103, + 8 pointer = 111
    assert sf.env_size_problems(env, "e", arg_max=1111, margin=1000) == []
    problems = sf.env_size_problems(env, "e", arg_max=1111, margin=1000, baseline=1)
    assert problems == [
        "e: the environment is 112 bytes in all, over the 111 bytes the kernel leaves for it "
        "(ARG_MAX 1111 minus 1000 for the command line); the launch would fail with E2BIG. "
        "Move large values into files on the shared mount."
    ]


def test_env_multibyte_values_count_bytes():
    assert sf.env_size_problems({"K": "é" * 65535}, "e", arg_max=10**9) != []  # 131070 bytes of value


def test_env_non_string_value_reports_type():
    problems = sf.env_size_problems({"N": 3}, "flodl_env", arg_max=10**9)
    assert problems == ["flodl_env: variable 'N' has a int value; environment values must be strings. Quote it in YAML."]


def test_default_arg_max_is_positive():
    assert sf.default_arg_max() >= sf.FALLBACK_ARG_MAX


# ------------------------------------------------------------ booleans from surveys


@pytest.mark.parametrize(
    ("value", "expected"),
    [("false", False), ("False", False), (" no ", False), ("0", False), (0, False), (False, False),
     ("true", True), ("yes", True), ("on", True), (1, True), (True, True)],
)
def test_parse_bool_reads_survey_strings(value, expected):
    assert sf.parse_bool(value) is expected


@pytest.mark.parametrize("value", ["cuda", "", None, 2, "falsey", [], {}])
def test_parse_bool_refuses_non_booleans(value):
    assert sf.parse_bool(value) is None
    assert sf.bool_problem(value, "flodl_launch_docker") is not None


def test_bool_problem_message():
    assert sf.bool_problem("truthy", "flodl_prebuild") == (
        "flodl_prebuild must be a boolean, got str 'truthy'. Use true or false "
        "(a survey may send the strings \"true\"/\"false\", \"yes\"/\"no\")."
    )
    assert sf.bool_problem("no", "flodl_prebuild") is None
