"""The walk-in launcher on this machine, for real: started detached, its window awaited, followed to its end."""
from __future__ import annotations

import os
import socket
import sys
import textwrap
from types import SimpleNamespace

import pytest

from ansible_collections.flodl.cluster.plugins.plugin_utils._walk_in import walk_in_io, walk_in_steps

# A stand-in launcher: binds the window, names its hosts as upstream does, exits with the code asked once the
# test has seen its window (the test's `release` file in its directory) or after its hold, whichever comes first.
LAUNCHER = textwrap.dedent("""\
    import os, socket, sys, time
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
    print('host "h1" joined with ranks [0]', flush=True)
    print('host "h2" joined with ranks [1]', flush=True)
    held = time.monotonic() + float(sys.argv[3])
    while time.monotonic() < held and not os.path.exists("release"):
        time.sleep(0.02)
    if sys.argv[2] != "0":
        print('host "h2" reports rank 1 exited with code ' + sys.argv[2], flush=True)
    print("partial line without newline", end="", flush=True)
    sys.exit(int(sys.argv[2]))
    """)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _args(tmp_path, code: int, hold: float = 30.0, command: str | None = None) -> tuple[dict, dict]:
    # hold: how long the launcher keeps its window open unless released (_release) once the test has seen it.
    port = _port()
    (tmp_path / "launcher.py").write_text(LAUNCHER)
    cmd = command or f"{sys.executable} launcher.py {port} {code} {hold}"
    args = {"command": cmd, "chdir": str(tmp_path), "env": {"FLODL_X": "1"}, "shell": "/bin/sh",
            "grace_seconds": 1.0, "timeout": 0.0, "output_batch_seconds": 0.0, "launch_host": "localhost",
            "prepared_var": "flodl_launch_env", "window_var": "flodl_launch_window", "forward_agent": False,
            "project_dir": None}
    window = {"run_id": "0123456789abcdef", "host": "127.0.0.1", "port": port, "open_timeout": 10.0, "join_timeout": 30.0,
              "agents": {"h1": {"host": "h1"}, "h2": {"host": "h2"}}}
    return args, window


def _release(tmp_path) -> None:
    """The window was seen open: the stand-in launcher may end now (not after its whole hold)."""
    (tmp_path / "release").touch()


def test_listening_reads_the_kernels_table_without_connecting(tmp_path):
    table = tmp_path / "tcp"
    table.write_text("  sl  local_address rem_address   st\n"
                     "   0: 0100007F:0539 00000000:0000 0A 00000000:00000000\n"
                     "   1: 0100007F:0016 0100007F:A000 01 00000000:00000000\n")
    assert walk_in_io.listening(1337, None, (str(table),)) is True
    assert walk_in_io.listening(22, None, (str(table),)) is False  # established, not listening
    assert walk_in_io.listening(1337, None, (str(tmp_path / "missing"),)) is False


def test_another_windows_address_on_the_same_port_is_not_this_one(tmp_path):
    """Two clusters on one machine: each launcher binds its own controller address on the same port."""
    table = tmp_path / "tcp"
    table.write_text("  sl  local_address rem_address   st\n"
                     "   0: 016BA8C0:0539 00000000:0000 0A 00000000:00000000\n")  # 192.168.107.1:1337
    assert walk_in_io.listening(1337, "192.168.107.1", (str(table),)) is True
    assert walk_in_io.listening(1337, "192.168.108.1", (str(table),)) is False
    anywhere = tmp_path / "tcp-any"
    anywhere.write_text("  sl  local_address rem_address   st\n   0: 00000000:0539 00000000:0000 0A 0:0\n")
    assert walk_in_io.listening(1337, "192.168.108.1", (str(anywhere),)) is True
    six = tmp_path / "tcp6"
    six.write_text("  sl  local_address rem_address   st\n"
                   "   0: 00000000000000000000000001000000:0539 00000000000000000000000000000000:0000 0A 0:0\n")
    assert walk_in_io.listening(1337, "::1", (str(six),)) is True


def test_the_window_opens_then_the_launcher_is_followed_to_its_end_and_read_per_host(tmp_path):
    args, window = _args(tmp_path, 7)
    started, problem = walk_in_io.open_window(args, window, str(tmp_path / "logs"), os.getpid())
    assert problem is None and started["pid"] > 1 and started["port"] == window["port"]
    _release(tmp_path)
    shown: list[str] = []
    ended = walk_in_io.follow(started, shown.append, 0.0, 1.0, 0.0)
    assert ended["rc"] == 7 and ended["timed_out"] is False
    assert ended["view"]["joined"] == {"h1": [0], "h2": [1]} and ended["view"]["failed_ranks"] == {"h2": [[1, 7]]}
    assert ended["tail"][-1] == "partial line without newline"  # the last partial line is not lost
    assert any("joined with ranks" in text for text in shown)


def test_a_launcher_that_ends_before_its_window_opens_is_reported_and_nothing_stays(tmp_path):
    args, window = _args(tmp_path, 0, command="echo no window; exit 2")
    started, problem = walk_in_io.open_window(args, window, str(tmp_path / "logs"), os.getpid())
    assert problem == "the launcher ended before its join window opened"


def test_a_window_that_never_opens_is_stopped_at_its_bound(tmp_path):
    args, window = _args(tmp_path, 0, command="exec sleep 30")
    window["open_timeout"] = 0.5
    started, problem = walk_in_io.open_window(args, window, str(tmp_path / "logs"), os.getpid())
    assert problem.startswith(f"the launcher's join window (port {window['port']}) did not open within 0.5 s")
    assert not os.path.exists(f"/proc/{started['pid']}") or open(f"/proc/{started['pid']}/stat").read().split()[2] == "Z"


def test_a_launcher_past_its_timeout_is_stopped(tmp_path):
    args, window = _args(tmp_path, 0, hold=30)
    started, problem = walk_in_io.open_window(args, window, str(tmp_path / "logs"), os.getpid())
    assert problem is None
    ended = walk_in_io.follow(started, lambda _text: None, 0.5, 0.5, 0.0)
    assert ended["timed_out"] is True and ended["rc"] is None


def _action():
    return SimpleNamespace(_templar=None)


def _display():
    shown: list[str] = []
    return SimpleNamespace(display=shown.append, shown=shown)


def test_the_launch_steps_walk_in_stages_open_then_follow(tmp_path):
    args, window = _args(tmp_path, 7)
    task_vars = {"flodl_launch_env": {"walk_in": window}, "hostvars": {}}
    shown = _display()
    opened = walk_in_steps.run_stage(_action(), task_vars, {}, dict(args, walk_in_stage="open"),
                                     str(tmp_path / "logs"), shown)
    assert opened["changed"] is True and "join window open" in opened["msg"], opened
    _release(tmp_path)
    task_vars["flodl_launch_window"] = opened
    followed = walk_in_steps.run_stage(_action(), task_vars, {}, dict(args, walk_in_stage="follow"),
                                       str(tmp_path / "logs"), shown)
    # The launcher failed, and names h2: h2's own report carries it, so the launch step passes.
    assert followed["rc"] == 7 and followed["failed"] is False
    assert followed["msg"] == "the launcher ended with exit code 7; 2 of 2 worker(s) joined"


@pytest.mark.parametrize("prepared, host, words", [
    ({}, "localhost", "needs a launch_env result prepared for walk_in"),
    ({"walk_in": {"agents": {}}}, "elsewhere", "flodl_launch_host 'elsewhere' is not an inventory host"),
])
def test_the_walk_in_stages_refuse_what_they_cannot_run(tmp_path, prepared, host, words):
    args, _window = _args(tmp_path, 0)
    out = walk_in_steps.run_stage(_action(), {"flodl_launch_env": prepared, "hostvars": {}}, {},
                                  dict(args, walk_in_stage="open", launch_host=host), str(tmp_path), _display())
    assert out["failed"] is True and words in out["msg"]


def test_follow_without_an_open_window_is_refused(tmp_path):
    args, window = _args(tmp_path, 0)
    out = walk_in_steps.run_stage(_action(), {"flodl_launch_env": {"walk_in": window}, "hostvars": {}}, {},
                                  dict(args, walk_in_stage="follow"), str(tmp_path), _display())
    assert out["failed"] is True and "no open join window registered as flodl_launch_window" in out["msg"]


# --------------------------------------------------------------------------- on a launch host (flodl_launch_host)


def _remote(args):
    """A launch host played by this machine: the remote wrapper run by sh where ssh would run it there, in a session
    of its own (what stops the ssh here never signals the far side: only its stdin closes)."""
    from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_launch import env_payload, wrapper_script

    script = wrapper_script(args["chdir"], args["command"], float(args["grace_seconds"]), args["shell"])
    return walk_in_io.RemoteLauncher("lh", ["setsid", "/bin/sh", "-c", script], env_payload(args["env"]),
                                     lambda check: ["/bin/sh", "-c", check])


def _gone(pid: int, within: float = 10.0) -> bool:
    import time

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.1)
    return False


def test_a_launcher_on_the_launch_host_opens_its_window_there_and_is_followed_here(tmp_path):
    args, window = _args(tmp_path, 7)
    args["command"] = f"echo launcher-env=$FLODL_X; {args['command']}"
    started, problem = walk_in_io.open_window(args, window, str(tmp_path / "logs"), os.getpid(), remote=_remote(args))
    assert problem is None and started["launch_host"] == "lh"
    _release(tmp_path)
    ended = walk_in_io.follow(started, lambda _text: None, 0.0, 1.0, 0.0)
    # The environment arrived on the wrapper's stdin; its output and exit code came back through the ssh's.
    assert ended["rc"] == 7 and "launcher-env=1" in ended["tail"], ended
    assert ended["view"]["joined"] == {"h1": [0], "h2": [1]}


def test_stopping_the_ssh_here_stops_the_launcher_there(tmp_path):
    args, window = _args(tmp_path, 0, hold=60)
    args["command"] = f"echo $$ > launcher.pid; exec {args['command']}"
    started, problem = walk_in_io.open_window(args, window, str(tmp_path / "logs"), os.getpid(), remote=_remote(args))
    assert problem is None
    launcher = int((tmp_path / "launcher.pid").read_text())
    assert not _gone(launcher, 0.5)
    walk_in_io.stop(started["pid"], 1.0)  # what the held watcher does when ansible-playbook dies
    assert _gone(launcher), "the launcher outlived its ssh: the wrapper did not see its stdin close"


def test_a_window_that_never_opens_on_the_launch_host_leaves_nothing_running(tmp_path):
    args, window = _args(tmp_path, 0, command="echo $$ > launcher.pid; exec sleep 60")
    window["open_timeout"] = 1.0
    started, problem = walk_in_io.open_window(args, window, str(tmp_path / "logs"), os.getpid(), remote=_remote(args))
    assert "did not open" in problem and "1 s" in problem, problem
    assert _gone(int((tmp_path / "launcher.pid").read_text()))
    assert _gone(started["pid"])


def test_a_launch_host_the_check_cannot_reach_is_named(tmp_path):
    args, window = _args(tmp_path, 0, hold=30)
    args["command"] = f"echo $$ > launcher.pid; exec {args['command']}"
    remote = walk_in_io.RemoteLauncher("lh", _remote(args).argv, _remote(args).payload,
                                       lambda _check: ["/bin/sh", "-c", "sleep 1; echo 'ssh: connect to host lh: refused' >&2; exit 255"])
    started, problem = walk_in_io.open_window(args, window, str(tmp_path / "logs"), os.getpid(), remote=remote)
    assert problem.startswith("could not ask lh (flodl_launch_host) whether the launcher's join window listens there "
                              "(ssh exit 255: ssh: connect to host lh: refused)"), problem
    assert _gone(int((tmp_path / "launcher.pid").read_text())) and _gone(started["pid"])


def test_the_open_stage_runs_the_launcher_on_the_launch_host_with_the_fanouts_ssh(tmp_path, monkeypatch):
    from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_launch import env_payload, wrapper_script
    from ansible_collections.flodl.cluster.plugins.plugin_utils._host import launch_target

    args, window = _args(tmp_path, 0)
    ssh = {"user": "me", "port": 2222}
    monkeypatch.setattr(launch_target, "launch_ssh", lambda _a, _t, _h, _f: ssh)
    monkeypatch.setattr(walk_in_steps, "launch_ssh", lambda _a, _t, _h, _f: ssh)
    remote = walk_in_steps.remote_launcher(_action(), {}, "lh", args)
    assert remote.host == "lh" and remote.payload == env_payload({"FLODL_X": "1"})
    assert remote.argv[:5] == ["ssh", "-p", "2222", "-l", "me"] and remote.argv[-2:] == [
        "lh", wrapper_script(args["chdir"], args["command"], 1.0, "/bin/sh")]
    assert remote.script_argv("true")[-2:] == ["lh", "true"]
    # Through the stages: opened there, followed here.
    monkeypatch.setattr(walk_in_steps, "remote_launcher", lambda *_a: _remote(args))
    task_vars = {"flodl_launch_env": {"walk_in": window}, "hostvars": {"lh": {}}}
    shown = _display()
    opened = walk_in_steps.run_stage(_action(), task_vars, {}, dict(args, walk_in_stage="open", launch_host="lh"),
                                     str(tmp_path / "logs"), shown)
    assert opened["changed"] is True and "join window is open on lh on port" in shown.shown[-1], opened
    _release(tmp_path)
    task_vars["flodl_launch_window"] = opened
    followed = walk_in_steps.run_stage(_action(), task_vars, {}, dict(args, walk_in_stage="follow", launch_host="lh"),
                                       str(tmp_path / "logs"), shown)
    assert followed["rc"] == 0 and followed["failed"] is False, followed
