"""ssh argv shapes (docs/launcher-contract.md §7a, §3f) and the parallel runner."""
from __future__ import annotations

import sys
import time

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._ssh import ssh as s
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.ssh import (
    launcher_argv,
    probe_argv,
    resolve_identity,
    target_of,
)
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.processes import SshResult, run_one, run_parallel

FULL_SSH = {
    "target": "10.0.0.12",
    "port": 2222,
    "user": "alice",
    "identity_file": ".fdl/keys/gpu-b",
    "options": ["ProxyJump=bastion", "StrictHostKeyChecking=no"],
}


def worker(ssh=None, host="gpu-b"):
    w = {"host": host, "local_devices": "all", "nccl_socket_ifname": "x", "path": "/srv/proj"}
    if ssh is not None:
        w["ssh"] = ssh
    return w


# ---------------------------------------------------------------- probe (§7a)


def test_probe_argv_full_order():
    assert probe_argv(worker(FULL_SSH), "echo hi", project_root="/opt/proj") == [
        "ssh",
        "-p", "2222",
        "-l", "alice",
        "-i", "/opt/proj/.fdl/keys/gpu-b",
        "-o", "ProxyJump=bastion",
        "-o", "StrictHostKeyChecking=no",
        "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
        "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3",
        "--",
        "10.0.0.12",
        "echo hi",
    ]


def test_probe_argv_without_ssh_block():
    assert probe_argv(worker(), "true") == [
        "ssh", "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
        "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3", "--", "gpu-b", "true",
    ]


def test_probe_never_uses_a_host_user():
    # §7a: -l only from ssh.user (FLODL_INTERNAL_HOST_USER is the launcher's default, not fdl-cli's).
    argv = probe_argv(worker({"port": 22}), "true")
    assert "-l" not in argv
    assert argv[:3] == ["ssh", "-p", "22"]


def test_probe_empty_user_skipped():
    assert "-l" not in probe_argv(worker({"user": ""}), "true")


@pytest.mark.parametrize(
    "identity,expected",
    [
        ("keys/id", "/opt/proj/keys/id"),
        ("./id", "/opt/proj/./id"),
        ("/abs/id", "/abs/id"),
        ("~/.ssh/id", "~/.ssh/id"),
        ("~alice/.ssh/id", "~alice/.ssh/id"),
    ],
)
def test_probe_identity_resolution(identity, expected):
    argv = probe_argv(worker({"identity_file": identity}), "true", project_root="/opt/proj")
    assert argv[argv.index("-i") + 1] == expected


def test_probe_relative_identity_without_root_is_verbatim():
    argv = probe_argv(worker({"identity_file": "keys/id"}), "true")
    assert argv[argv.index("-i") + 1] == "keys/id"


def test_resolve_identity_trailing_slash_root():
    assert resolve_identity("k", "/opt/proj/") == "/opt/proj/k"
    assert resolve_identity("k", "") == "k"


def test_probe_script_is_one_last_argument():
    script = "if [ -d '/a b' ]; then echo 1; fi"
    argv = probe_argv(worker({"target": "t"}), script)
    assert argv[-3:] == ["--", "t", script]


def test_target_of():
    assert target_of(worker()) == "gpu-b"
    assert target_of(worker({"user": "u"})) == "gpu-b"
    assert target_of(worker({"target": "1.2.3.4"})) == "1.2.3.4"
    assert target_of(worker({"target": ""})) == "gpu-b"


# ---------------------------------------------------------------- launcher (§3f, no tunnel)


def test_launcher_argv_full_order():
    assert launcher_argv(worker(FULL_SSH), "pkill x", host_user="bob", project_root="/opt/proj") == [
        "ssh",
        "-o", "ProxyJump=bastion",
        "-o", "StrictHostKeyChecking=no",
        "-T",
        "-o", "ServerAliveInterval=10",
        "-o", "ServerAliveCountMax=3",
        "-o", "BatchMode=yes",
        "-o", "StrictHostKeyChecking=accept-new",
        "-p", "2222",
        "-l", "alice",
        "-i", "/opt/proj/.fdl/keys/gpu-b",
        "--",
        "10.0.0.12",
        "pkill x",
    ]


def test_launcher_argv_identity_verbatim_without_project_root():
    argv = launcher_argv(worker({"identity_file": "keys/id"}), "true")
    assert argv[argv.index("-i") + 1] == "keys/id"


def test_launcher_falls_back_to_host_user():
    argv = launcher_argv(worker(), "true", host_user="  bob \n")
    assert argv[argv.index("-l") + 1] == "bob"
    assert argv == ["ssh", *s.LAUNCHER_DEFAULTS, "-l", "bob", "--", "gpu-b", "true"]


@pytest.mark.parametrize("host_user", [None, "", "   "])
def test_launcher_omits_l_without_a_user(host_user):
    argv = launcher_argv(worker(), "true", host_user=host_user)
    assert "-l" not in argv
    assert argv == ["ssh", *s.LAUNCHER_DEFAULTS, "--", "gpu-b", "true"]


def test_launcher_ssh_user_beats_host_user():
    argv = launcher_argv(worker({"user": "alice"}), "true", host_user="bob")
    assert argv[argv.index("-l") + 1] == "alice"
    assert "bob" not in argv


def test_launcher_user_options_come_before_defaults():
    argv = launcher_argv(worker({"options": ["BatchMode=no"]}), "true")
    assert argv.index("BatchMode=no") < argv.index("BatchMode=yes")
    assert argv[1:3] == ["-o", "BatchMode=no"]


def test_defaults_constants():
    assert s.PROBE_DEFAULTS == [
        "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
        "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3",
    ]
    assert s.LAUNCHER_DEFAULTS == [
        "-T", "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3",
        "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new",
    ]


@pytest.mark.parametrize("build", [lambda w: probe_argv(w, "true"), lambda w: launcher_argv(w, "true")])
def test_a_dash_target_is_after_the_double_dash(build):
    argv = build(worker({"target": "-oProxyCommand=touch /tmp/p"}))
    assert argv[-3:] == ["--", "-oProxyCommand=touch /tmp/p", "true"]
    assert argv.count("--") == 1


@pytest.mark.parametrize("build", [lambda w: probe_argv(w, "true"), lambda w: launcher_argv(w, "true")])
def test_every_connection_has_keepalives(build):
    argv = build(worker(FULL_SSH))
    assert "ServerAliveInterval=10" in argv and "ServerAliveCountMax=3" in argv
    assert "StrictHostKeyChecking=no" not in argv[argv.index("-T"):]  # only the user's own option


# ---------------------------------------------------------------- running


def test_run_parallel_collects_every_host():
    jobs = {
        "a": ["sh", "-c", "echo x"],
        "b": ["sh", "-c", "echo out; echo err >&2; exit 3"],
    }
    results = run_parallel(jobs, timeout=10)
    assert set(results) == {"a", "b"}
    a, b = results["a"], results["b"]
    assert (a.host, a.returncode, a.stdout, a.stderr, a.error, a.ok) == ("a", 0, "x\n", "", None, True)
    assert a.argv == jobs["a"]
    assert (b.returncode, b.stdout, b.stderr, b.ok) == (3, "out\n", "err\n", False)
    assert b.error is None


def test_run_parallel_empty():
    assert run_parallel({}) == {}


def test_run_parallel_is_parallel():
    jobs = {f"h{i}": ["sh", "-c", "sleep 0.5; echo done"] for i in range(6)}
    start = time.monotonic()
    results = run_parallel(jobs, timeout=10)
    elapsed = time.monotonic() - start
    assert all(r.ok and r.stdout == "done\n" for r in results.values())
    assert elapsed < 2.0  # six serial runs would take 3 s


def test_run_parallel_bounded():
    jobs = {f"h{i}": ["sh", "-c", "sleep 0.3"] for i in range(4)}
    start = time.monotonic()
    results = run_parallel(jobs, timeout=10, max_parallel=1)
    assert all(r.ok for r in results.values())
    assert time.monotonic() - start >= 1.1


def test_timeout_is_an_error_not_a_hang():
    start = time.monotonic()
    results = run_parallel({"slow": ["sleep", "10"], "fast": ["sh", "-c", "echo ok"]}, timeout=0.5)
    assert time.monotonic() - start < 5
    slow = results["slow"]
    assert slow.returncode is None and not slow.ok
    assert slow.error == "no answer within 0.5s"
    assert results["fast"].ok


def test_timeout_keeps_partial_output():
    r = run_one("h", [sys.executable, "-u", "-c", "print('early', flush=True); import time; time.sleep(10)"], timeout=1.5)
    assert r.error and "1.5s" in r.error
    assert r.returncode is None
    assert "early" in r.stdout


def test_missing_binary_is_an_error():
    r = run_parallel({"h": ["/nonexistent/no-such-ssh", "x"]})["h"]
    assert r.returncode is None and not r.ok
    assert r.error.startswith("could not start ssh:")


def test_stdin_is_closed():
    # A remote command that reads stdin must not block on the controller's terminal.
    r = run_one("h", ["sh", "-c", "cat; echo end"], timeout=5)
    assert r.ok and r.stdout == "end\n"


def test_non_utf8_output_is_replaced_not_fatal():
    r = run_one("h", ["sh", "-c", "printf '\\377ok'"], timeout=5)
    assert r.ok and r.stdout.endswith("ok") and "\ufffd" in r.stdout


def test_result_ok_property():
    assert SshResult("h", [], 0, "", "", 0.1).ok
    assert not SshResult("h", [], 1, "", "", 0.1).ok
    assert not SshResult("h", [], 0, "", "", 0.1, error="boom").ok
    assert not SshResult("h", [], None, "", "", 0.1).ok


def test_seconds_measured():
    r = run_one("h", ["sh", "-c", "sleep 0.2"], timeout=5)
    assert 0.15 <= r.seconds < 5
