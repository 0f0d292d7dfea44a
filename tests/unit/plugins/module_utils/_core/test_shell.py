"""posix_quote (fdl-cli) and always_quote (launcher), docs/launcher-contract.md §6."""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._core import shell
from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import always_quote, join_posix, posix_quote


# --- ports of the seed's prebuild.rs tests ---------------------------------


def test_posix_quote_round_trips_safe_strings():
    assert posix_quote("ddp-bench") == "ddp-bench"
    assert posix_quote("target/cluster/exa") == "target/cluster/exa"
    assert posix_quote("") == "''"


def test_posix_quote_wraps_unsafe_strings():
    assert posix_quote("a b") == "'a b'"
    assert posix_quote("it's") == "'it'\\''s'"


# --- the full bare-safe alphabet --------------------------------------------


@pytest.mark.parametrize("ch", list("_-./:=+@,"))
def test_each_listed_punctuation_stays_bare(ch):
    token = f"a{ch}b"
    assert posix_quote(token) == token


def test_alphanumerics_stay_bare():
    token = "ABCxyz0123456789"
    assert posix_quote(token) == token


@pytest.mark.parametrize(
    "token",
    ["a b", "a\tb", "a\nb", "$HOME", "a;b", "a|b", "a&b", "a*b", "a?b", "~user", "a#b", "a%b",
     '"x"', "a\\b", "a(b)", "a[b]", "a{b}", "a<b", "a>b", "a!b", "a^b", "`x`"],
)
def test_anything_else_is_single_quoted(token):
    assert posix_quote(token) == "'" + token.replace("'", "'\\''") + "'"


@pytest.mark.parametrize("token", ["é", "naïve", "日本", "x\u00a0y", "١٢"])
def test_non_ascii_alphanumerics_are_quoted(token):
    # Rust's is_ascii_alphanumeric: a Unicode letter or digit is not bare-safe.
    assert posix_quote(token) == f"'{token}'"


def test_only_quotes():
    assert posix_quote("'") == "''\\'''"
    assert posix_quote("''") == "''\\'''\\'''"


# --- launcher rule: always quoted ---------------------------------------------


@pytest.mark.parametrize(
    "token,expected",
    [
        ("train", "'train'"),
        ("", "''"),
        ("/srv/proj", "'/srv/proj'"),
        ("it's", "'it'\\''s'"),
        ("a b", "'a b'"),
    ],
)
def test_always_quote(token, expected):
    assert always_quote(token) == expected


def test_join_posix_mixes_bare_and_quoted():
    assert join_posix(["cargo", "build", "--bin", "my bin", ""]) == "cargo build --bin 'my bin' ''"
    assert join_posix([]) == ""


@pytest.mark.parametrize("token", ["", "plain", "a b", "it's", "'", "$(rm -rf /)", "x\ny", "é", "a\\'b"])
def test_both_rules_survive_a_real_shell(token):
    for quote in (posix_quote, always_quote):
        assert shlex.split(quote(token)) == [token]
        out = subprocess.run(["sh", "-c", "printf %s " + quote(token)], capture_output=True, text=True, check=True)
        assert out.stdout == token


def _live(args: str, path: str | None = None) -> bool:
    env = {**os.environ, **({"PATH": path} if path is not None else {})}
    script = f"{shell.live_member_function('__live')}; __live {args}"
    return subprocess.run(["/bin/sh", "-c", script], env=env, check=False, timeout=10).returncode == 0


def test_a_group_or_session_is_live_while_a_member_runs_and_a_zombie_is_none(tmp_path):
    running = subprocess.Popen(["/bin/sleep", "30"], start_new_session=True)
    ended = subprocess.Popen(["/bin/sh", "-c", "exit 0"], start_new_session=True)  # never waited for: a zombie
    try:
        deadline = time.monotonic() + 10
        while open(f"/proc/{ended.pid}/stat", encoding="ascii").read().rsplit(") ", 1)[1][0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert _live(f"-g {running.pid}") and _live(f"-s {running.pid}")
        assert not _live(f"-g {ended.pid}") and not _live(f"-s {ended.pid}")
        # Without pgrep: kill -0 for a group (a zombie then still counts), no session member.
        bare = tmp_path / "bin"
        bare.mkdir()
        for tool in ("sed", "cut"):
            (bare / tool).symlink_to(shutil.which(tool))
        assert _live(f"-g {ended.pid}", str(bare)) and not _live(f"-s {running.pid}", str(bare))
    finally:
        running.kill()
        running.wait()
        ended.wait()
