"""The launch host's own orphan cleanup: the plan's text, its quoting, and the wrapper running it under sh.

A fake ``ssh`` first on PATH records every argv it gets (one JSON line each), so the tests see exactly
what the launch host would run, hostile names included, without any network.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._launch import teardown as td
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_cleanup import (
    PLAN_END,
    CleanupPlanError,
    cleanup_budget,
    plan_payload,
    render_plan,
)
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_launch import env_payload, wrapper_script
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.ssh import launcher_argv

HOSTILE = "h'$(touch pwned)`id`;\"x"
FAKE_SSH = """#!{python}
import json, os, sys, time
with open(os.environ["FAKE_SSH_LOG"], "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
if os.environ.get("FAKE_SSH_HANG") and "ControlMaster=auto" in sys.argv:
    time.sleep(300)
"""


def _argv(host: str, binary: str = "/srv/p/target/cluster/h/v/release/train") -> list[str]:
    worker = {"host": host, "path": "/srv/p", "ssh": {"user": "u", "identity_file": "/k/id"}}
    return launcher_argv(worker, td.cleanup_script(binary), connect_timeout=4)


@pytest.fixture
def fake_ssh(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "ssh").write_text(FAKE_SSH.format(python=sys.executable))
    (bindir / "ssh").chmod(0o755)
    log = tmp_path / "ssh.log"
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SSH_LOG", str(log))
    return log


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _step(plan: str, step: str, d: Path, timeout: float = 30) -> subprocess.CompletedProcess:
    (d / "plan").write_text(plan)
    return subprocess.run(["/bin/sh", str(d / "plan"), step, str(d)], capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_each_step_runs_the_cleanup_argv_exactly_with_our_control_options_first(fake_ssh, tmp_path):
    argvs = {"h2": _argv("h2"), HOSTILE: _argv(HOSTILE, f"/srv/{HOSTILE}/train")}
    plan = render_plan(argvs, cleanup_budget(4))
    assert "pwned" not in os.listdir(tmp_path)
    for step in ("start", "cleanup", "close"):
        assert _step(plan, step, tmp_path).returncode == 0
    assert not (tmp_path / "pwned").exists()
    calls = _calls(fake_ssh)
    sock = ["-o", f"ControlPath={tmp_path}/%C"]
    for host, argv in argvs.items():
        assert ["-o", "ControlMaster=yes", "-o", "ControlPersist=yes", *sock, *argv[1:-1], "true"] in calls
        assert ["-o", "ControlMaster=auto", "-o", "ControlPersist=no", *sock, *argv[1:]] in calls
        assert ["-O", "exit", *sock, *argv[1:-1]] in calls
    assert len(calls) == 6
    # The cleanup's remote command is the teardown's own script, with the connect bound in the argv.
    assert td.cleanup_script(f"/srv/{HOSTILE}/train") in [c[-1] for c in calls]
    assert "ConnectTimeout=4" in " ".join(calls[0])


def test_the_cleanup_step_is_bounded(fake_ssh, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_SSH_HANG", "1")
    start = time.monotonic()
    proc = _step(render_plan({"h1": _argv("h1"), "h2": _argv("h2")}, 2), "cleanup", tmp_path)
    took = time.monotonic() - start
    assert proc.returncode == 0
    assert 1.5 < took < 10, took
    assert len(_calls(fake_ssh)) == 2


def test_no_worker_renders_a_plan_that_does_nothing(fake_ssh, tmp_path):
    plan = render_plan({}, 5)
    for step in ("start", "cleanup", "close"):
        assert _step(plan, step, tmp_path).returncode == 0
    assert _calls(fake_ssh) == []


@pytest.mark.parametrize("argv", [
    ["ssh", "--", "h1", "a\nb"], ["ssh", "-o", "X=\0", "--", "h1", "true"], ["ssh", "h1", "true"], ["scp", "--", "h", "x"],
])
def test_what_cannot_travel_as_plan_lines_is_refused(argv):
    with pytest.raises(CleanupPlanError):
        render_plan({"h1": argv}, 5)


def test_a_line_break_in_a_host_name_is_refused():
    with pytest.raises(CleanupPlanError):
        render_plan({"h1\n" + PLAN_END: _argv("h1")}, 5)


def test_payload_ends_with_the_marker_and_refuses_it_inside():
    assert plan_payload("a\nb\n") == f"a\nb\n{PLAN_END}\n".encode()
    with pytest.raises(CleanupPlanError):
        plan_payload(f"a\n{PLAN_END}\nb")


def test_budget_follows_the_connect_bound():
    assert cleanup_budget(4) == 10
    assert cleanup_budget(0) == 16


def _wrapper(tmp_path: Path, plan: str, command: str, grace: float = 1):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen(["sh", "-c", wrapper_script(str(tmp_path), command, grace, plan=True)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    assert proc.stdin is not None
    proc.stdin.write(env_payload({"FLODL_X": "1"}) + plan_payload(plan))
    proc.stdin.flush()
    return proc


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _wait_for(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_stdin_closing_stops_the_session_then_cleans_every_worker_then_closes(fake_ssh, tmp_path):
    pidfile = tmp_path / "pid"
    proc = _wrapper(tmp_path, render_plan({"h1": _argv("h1"), "h2": _argv("h2")}, 5),
                    f"echo $FLODL_X; sleep 300 & echo $! > {pidfile}; wait")
    _wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), 10, "the command never started")
    _wait_for(lambda: len(_calls(fake_ssh)) == 2, 20, "the masters were not opened")
    assert all("ControlMaster=yes" in c for c in _calls(fake_ssh))
    child = int(pidfile.read_text())
    proc.stdin.close()  # the job went away
    assert proc.wait(timeout=15) != 0
    _wait_for(lambda: len(_calls(fake_ssh)) == 6, 15, f"cleanup/close not run: {_calls(fake_ssh)}")
    calls = _calls(fake_ssh)
    assert [c[1] for c in calls[2:4]] == ["ControlMaster=auto"] * 2 and [c[0] for c in calls[4:]] == ["-O"] * 2
    _wait_for(lambda: not _running(child), 5, "the command's child survived the stop")
    _wait_for(lambda: not list(tmp_path.glob("flodl-launch.*")), 5, "the private directory was left")


def test_a_command_that_ends_by_itself_gets_no_cleanup_only_the_close(fake_ssh, tmp_path):
    proc = _wrapper(tmp_path, render_plan({"h1": _argv("h1")}, 5), "sleep 0.5; exit 3")
    assert proc.wait(timeout=15) == 3
    proc.stdin.close()  # ssh ends with the command: stdin closes after it
    _wait_for(lambda: len(_calls(fake_ssh)) == 2, 10, f"close not run: {_calls(fake_ssh)}")
    assert [c[:2] for c in _calls(fake_ssh)] == [["-o", "ControlMaster=yes"], ["-O", "exit"]]
