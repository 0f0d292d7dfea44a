"""Walk-in renderers: the launcher's window topology, each agent's spec and environment, the agent's scripts."""
from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._walk_in import walk_in as wi
from ansible_collections.flodl.cluster.plugins.module_utils._core.hexcodec import hex_decode
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.remote_launch import END_MARK

TOKEN = "00112233445566778899aabbccddeeff"
SHIPPED = {
    "controller": {"host": "10.0.0.1", "port": 1337, "path": "/srv/p",
                   "join": {"join_timeout": 120, "discovery": False, "token": "f" * 32, "open_admission": True}},
    "workers": [
        {"host": "a", "ranks": [0, 1], "local_devices": [0, 1], "nccl_socket_ifname": "eth0", "path": "/srv/p",
         "arch": "precompiled/cu128", "env": {"K": "worker"}},
        {"host": "b", "ranks": [2], "local_devices": "all", "nccl_socket_ifname": "", "path": "/srv/p/",
         "data_path": "/data", "gpu_ram_share": 0.5},
    ],
    "env": {"K": "cluster", "Z": "1"},
}


def test_the_window_has_no_roster_and_waits_for_exactly_this_runs_ranks():
    topo = wi.window_topology(SHIPPED, TOKEN)
    assert topo["workers"] == []
    # The user's window length stays; the mode's own knobs replace theirs, in upstream's key order.
    assert list(topo["controller"]["join"].items()) == [
        ("min_rank_start", 3), ("join_timeout", 120), ("target_ranks", 3), ("discovery", True), ("token", TOKEN)]
    assert topo["env"] == {"K": "cluster", "Z": "1"} and topo["controller"]["host"] == "10.0.0.1"


@pytest.mark.parametrize("token", ["", "F" * 32, "0" * 31, "0" * 33, "g" * 32])
def test_a_token_that_is_not_16_hex_bytes_is_refused(token):
    with pytest.raises(ValueError, match="32 lowercase hex"):
        wi.window_topology(SHIPPED, token)


def test_fresh_tokens_differ_and_have_the_shape_upstream_requires():
    first, second = wi.new_token(), wi.new_token()
    assert first != second and len(first) == 32 and int(first, 16) >= 0


def test_each_agent_spec_in_upstreams_field_order_with_only_what_the_worker_declares():
    a, b = SHIPPED["workers"]
    spec_a = wi.agent_spec(a, SHIPPED["controller"], TOKEN)
    assert list(spec_a) == ["host", "controller_host", "controller_port", "salt_hex", "local_devices", "libtorch"]
    assert spec_a["local_devices"] == [0, 1] and spec_a["salt_hex"] == TOKEN
    spec_b = wi.agent_spec(b, SHIPPED["controller"], TOKEN)
    # "all", counted by preflight: the ranks give the devices.
    assert spec_b == {"host": "b", "controller_host": "10.0.0.1", "controller_port": 1337, "salt_hex": TOKEN,
                      "local_devices": [0], "data_path": "/data", "gpu_ram_share": 0.5}
    assert hex_decode(wi.spec_hex(spec_b)).decode() == (
        '{"host":"b","controller_host":"10.0.0.1","controller_port":1337,"salt_hex":"' + TOKEN
        + '","local_devices":[0],"data_path":"/data","gpu_ram_share":0.5}')


def test_the_agents_environment_puts_the_role_variables_last():
    a = SHIPPED["workers"][0]
    entry = {"bin": "target/cluster/a/precompiled-cu128/release/train", "ld_library_path": "/srv/p/lib",
             "cwd_subpath": "sub"}
    hostile = {"FLODL_HOST_NAME": "evil", "FLODL_INTERNAL_AGENT_JSON": "00"}
    launch = wi.agent_launch({**a, "env": {**a["env"], **hostile}}, entry,
                             wi.agent_spec(a, SHIPPED["controller"], TOKEN), SHIPPED["env"], {"FLODL_VERBOSITY": "1"})
    assert (launch.cwd, launch.binary) == ("/srv/p/sub", "/srv/p/target/cluster/a/precompiled-cu128/release/train")
    assert launch.env["K"] == "worker" and launch.env["Z"] == "1" and launch.env["NCCL_SOCKET_IFNAME"] == "eth0"
    assert launch.env["LD_LIBRARY_PATH"] == "/srv/p/lib" and launch.env["FLODL_VERBOSITY"] == "1"
    assert launch.env["FLODL_HOST_NAME"] == "a"
    assert json.loads(hex_decode(launch.env["FLODL_INTERNAL_AGENT_JSON"]))["host"] == "a"


def test_the_start_script_gives_the_program_a_clean_environment_and_records_its_exit(tmp_path):
    program = tmp_path / "prog"
    program.write_text("#!/bin/sh\nenv | sort\nexit 3\n")
    program.chmod(0o755)
    launch = wi.AgentLaunch("a", str(tmp_path), str(program), {"FLODL_HOST_NAME": "a", "X": "it's $HOME"})
    log = str(tmp_path / "agent.log")
    started = subprocess.run(["/bin/sh", "-c", wi.start_script(launch, log, 30)], input=wi.start_stdin(launch),
                             capture_output=True, timeout=10, check=True, env={"PATH": "/usr/bin:/bin",
                                                                               "FLODL_INTERNAL_FULL_CLUSTER_JSON": "x"})
    pid = wi.parse_start(started.stdout.decode())
    assert isinstance(pid, int) and pid > 1
    for _attempt in range(100):
        if (tmp_path / "agent.log.exit").exists():
            break
        subprocess.run(["sleep", "0.05"], check=True)
    code, lines = wi.parse_collect(subprocess.run(["/bin/sh", "-c", wi.collect_script(pid, log, 50)],
                                                  capture_output=True, text=True, timeout=10, check=True).stdout)
    assert code == 3
    names = {line.split("=", 1)[0] for line in lines}
    assert names == {"FLODL_HOST_NAME", "X", "PATH", "HOME", "PWD"} or names == {"FLODL_HOST_NAME", "X", "PATH", "HOME"}
    assert "X=it's $HOME" in lines  # a value is never expanded on the way
    assert not (tmp_path / "agent.log").exists()  # collected: nothing left on the worker


def test_no_cwd_is_said_and_pid_one_is_never_collected(tmp_path):
    launch = wi.AgentLaunch("a", str(tmp_path / "missing"), "/bin/true", {})
    out = subprocess.run(["/bin/sh", "-c", wi.start_script(launch, str(tmp_path / "l"), 5)],
                         input=f"{END_MARK}\n".encode(), capture_output=True, timeout=10, check=True).stdout.decode()
    assert wi.parse_start(out) == "no-cwd"
    cut = subprocess.run(["/bin/sh", "-c", wi.start_script(launch, str(tmp_path / "l"), 5)],
                         input=b"X=1\n", capture_output=True, timeout=10, check=True).stdout.decode()
    assert wi.parse_start(cut) == "no-env"  # stdin cut short: nothing is started
    with pytest.raises(ValueError):
        wi.collect_script(1, "/tmp/x", 5)


def test_the_plan_turns_a_prepared_fanout_into_a_window_and_one_agent_per_worker():
    shipped = {**SHIPPED, "workers": [{**w, "local_devices": [0] if w["local_devices"] == "all" else w["local_devices"]}
                                      for w in SHIPPED["workers"]]}
    envelope = {"a": {"bin": "target/a/train", "ld_library_path": "/lib/a"}, "b": {"bin": "/abs/train"}}
    env = {"FLODL_INTERNAL_FULL_CLUSTER_JSON": "00", "FLODL_VERBOSITY": "2", "OTHER": "x"}
    launcher_env, window, plan, problems = wi.plan(env, shipped, envelope, {"a": "inv-a"}, 600)
    assert problems == [] and launcher_env["OTHER"] == "x"
    assert json.loads(hex_decode(launcher_env["FLODL_INTERNAL_FULL_CLUSTER_JSON"])) == window
    token = window["controller"]["join"]["token"]
    assert sorted(plan["agents"]) == ["b", "inv-a"] and plan["port"] == 1337 and plan["join_timeout"] == 120
    assert plan["agent_timeout"] == 600 + 120 + 60 and len(plan["run_id"]) == 16
    a = plan["agents"]["inv-a"]
    assert (a["binary"], a["env"]["LD_LIBRARY_PATH"], a["env"]["FLODL_VERBOSITY"]) == ("/srv/p/target/a/train",
                                                                                       "/lib/a", "2")
    assert json.loads(hex_decode(a["env"]["FLODL_INTERNAL_AGENT_JSON"]))["salt_hex"] == token
    assert "OTHER" not in a["env"]  # the controller's own variables stay with the launcher
    lines = wi.plan_lines(plan)
    assert "3 rank(s)" in lines[0] and token not in "\n".join(lines)


def test_a_worker_without_a_prebuilt_binary_is_named():
    _env, _window, plan, problems = wi.plan({}, SHIPPED, {"a": {"bin": "x"}}, {}, 0)
    assert sorted(plan["agents"]) == ["a"] and plan["agent_timeout"] == 0
    assert problems and problems[0].startswith("b: no prebuilt binary in the prebuild envelope")


def test_the_agents_environment_is_on_no_command_line_while_it_runs(tmp_path):
    """The spec holds the run's join token: no process the start leaves running (the session's shell, timeout, the
    agent) carries a value of the environment in its command line, which any local user can read in /proc."""
    import os  # noqa: PLC0415
    import time  # noqa: PLC0415

    program = tmp_path / "prog"
    program.write_text("#!/bin/sh\necho \"$SECRET\"\nsleep 30\n")
    program.chmod(0o755)
    secret = "s3cr3t-" + wi.new_token()
    launch = wi.AgentLaunch("a", str(tmp_path), str(program), {"SECRET": secret, "FLODL_HOST_NAME": "a"})
    log = str(tmp_path / "agent.log")
    started = subprocess.run(["/bin/sh", "-c", wi.start_script(launch, log, 60)], input=wi.start_stdin(launch),
                             capture_output=True, timeout=10, check=True, env={"PATH": "/usr/bin:/bin"})
    pid = wi.parse_start(started.stdout.decode())
    assert isinstance(pid, int) and pid > 1
    try:
        deadline = time.monotonic() + 10
        agent_log = tmp_path / "agent.log"
        while time.monotonic() < deadline and not (agent_log.is_file() and secret in agent_log.read_text()):
            time.sleep(0.05)
        assert (tmp_path / "agent.log").read_text().strip() == secret  # the agent got it, in its environment
        session, carrying = [], []
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and os.getsid(int(entry)) == pid:
                    session.append(int(entry))
                    if secret.encode() in open(f"/proc/{entry}/cmdline", "rb").read():
                        carrying.append(int(entry))
            except OSError:
                continue
        assert len(session) >= 2 and carrying == [], (session, carrying)  # the shell, timeout, the program, sleep
    finally:
        res = subprocess.run(["/bin/sh", "-c", wi.collect_script(pid, log, 5)], capture_output=True, text=True,
                             timeout=10, check=True)
    assert wi.parse_collect(res.stdout)[1] == [secret]


TABLE_HEAD = "  sl  local_address rem_address   st tx_queue rx_queue\n"


def _check(tmp_path, port, host, rows, seconds=0.4, six_rows=None):
    """The launch host's window check, run with sh against fake /proc/net/tcp* tables."""
    tcp = tmp_path / "tcp"
    tcp.write_text(TABLE_HEAD + "".join(rows))
    tables = (str(tcp), str(tmp_path / "tcp6"))
    if six_rows is not None:
        (tmp_path / "tcp6").write_text(TABLE_HEAD + "".join(six_rows))
    script = wi.listen_check_script(port, host, seconds, tables)
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.parametrize("port, host, opened", [
    (1337, "192.168.107.1", True),  # its own address
    (1337, "192.168.108.1", False),  # another window's address on the same port (a second cluster)
    (1337, None, True),  # any address
    (1337, "launchbox", True),  # a name: its bind is not knowable, the port decides
    (22, None, False),  # established, not listening
    (1338, "192.168.107.1", False),
])
def test_the_launch_hosts_window_check_reads_the_table_as_this_machine_does(tmp_path, port, host, opened):
    rows = ["   0: 016BA8C0:0539 00000000:0000 0A 00000000:00000000\n",  # 192.168.107.1:1337, LISTEN
            "   1: 0100007F:0016 0100007F:A000 01 00000000:00000000\n"]  # 127.0.0.1:22, ESTABLISHED
    res = _check(tmp_path, port, host, rows)
    assert (res.returncode == 0 and res.stdout.endswith(wi.LISTEN_MARK + "\n")) is opened, res
    if not opened:
        assert res.returncode == 1 and set(res.stdout) == {"."}  # dots only, until its bound
    # The one definition of an address: the local check agrees on the same table.
    from ansible_collections.flodl.cluster.plugins.plugin_utils._walk_in.walk_in_io import listening
    assert listening(port, host, (str(tmp_path / "tcp"),)) is opened


def test_the_window_check_reads_tcp6_and_the_any_address(tmp_path):
    six = ["   0: 00000000000000000000000001000000:0539 00000000000000000000000000000000:0000 0A 0:0\n"]
    assert _check(tmp_path, 1337, "::1", [], six_rows=six).returncode == 0
    assert _check(tmp_path, 1337, "::2", [], six_rows=six).returncode == 1
    anywhere = ["   0: 00000000:0539 00000000:0000 0A 0:0\n"]
    assert _check(tmp_path, 1337, "192.168.108.1", anywhere).returncode == 0
    assert wi.table_addresses("192.168.107.1") == {"016BA8C0", "00000000"}
    assert wi.table_addresses("launchbox") is None


def test_the_window_check_waits_for_a_table_that_fills_later(tmp_path):
    tcp = tmp_path / "tcp"
    tcp.write_text(TABLE_HEAD)
    script = wi.listen_check_script(1337, "127.0.0.1", 20, (str(tcp),))
    proc = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        tcp.write_text(TABLE_HEAD + "   0: 0100007F:0539 00000000:0000 0A 0:0\n")
        out = proc.communicate(timeout=15)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and out.endswith(wi.LISTEN_MARK + "\n")


def test_a_start_removes_earlier_runs_finished_agent_logs_once_stale(tmp_path):
    """A cancelled run's agent log stays for a post-mortem; the next start on that worker removes it after
    STALE_LOG_MINUTES, but never a running agent's log (no ``.exit`` yet) nor a fresh one."""
    old = time.time() - 60 * (wi.STALE_LOG_MINUTES + 5)
    files = {}
    for name, finished, stale in (("aaaaaaaaaaaaaaaa", True, True), ("bbbbbbbbbbbbbbbb", True, False),
                                  ("cccccccccccccccc", False, True)):
        log = tmp_path / f"flodl-agent-{name}.log"
        log.write_text("rank output\n")
        marks = [log]
        if finished:
            (tmp_path / f"{log.name}.exit").write_text("0\n")
            marks.append(tmp_path / f"{log.name}.exit")
        for path in marks:
            if stale:
                os.utime(path, (old, old))
        files[name] = marks
    launch = wi.AgentLaunch("a", str(tmp_path), "/bin/true", {"FLODL_HOST_NAME": "a"})
    started = subprocess.run(["/bin/sh", "-c", wi.start_script(launch, str(tmp_path / "flodl-agent-dddddddddddddddd.log"), 5)],
                             input=wi.start_stdin(launch), capture_output=True, timeout=10, check=True)
    assert isinstance(wi.parse_start(started.stdout.decode()), int)
    assert not any(p.exists() for p in files["aaaaaaaaaaaaaaaa"])
    assert all(p.exists() for p in files["bbbbbbbbbbbbbbbb"] + files["cccccccccccccccc"])


def test_a_session_left_only_as_zombies_is_collected_without_a_grace(tmp_path, stand_in_on_path):
    """Where nothing reaps orphans (this machine's init, a container without one), the agent's ended session
    stays as zombies: the collect reads the exit code and lines at once, with no second's grace per worker."""
    slept = stand_in_on_path("sleep", '#!/bin/sh\necho "sleep $*" >>"$SSH_LOG"\nexec /bin/sleep "$@"\n')
    zombie = subprocess.Popen(["/bin/sh", "-c", "exit 0"], start_new_session=True)  # never waited for: a zombie
    state = ""
    for _attempt in range(200):
        with open(f"/proc/{zombie.pid}/stat", encoding="ascii") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
        if state == "Z":
            break
        time.sleep(0.01)
    log = tmp_path / "agent.log"
    log.write_text("agent: a finished\n")
    (tmp_path / "agent.log.exit").write_text("0\n")
    try:
        res = subprocess.run(["/bin/sh", "-c", wi.collect_script(zombie.pid, str(log), 5)], capture_output=True,
                             text=True, timeout=10, check=True)
    finally:
        zombie.wait()
    assert state == "Z"
    assert wi.parse_collect(res.stdout) == (0, ["agent: a finished"])
    assert not slept.exists()  # no grace: nothing of the session was running
    live = subprocess.Popen(["/bin/sleep", "30"], start_new_session=True)
    try:
        subprocess.run(["/bin/sh", "-c", wi.collect_script(live.pid, str(log), 5)], capture_output=True, timeout=10,
                       check=True)
        assert live.wait(timeout=5) != 0  # a running session is still stopped, after its grace
    finally:
        if live.poll() is None:
            live.kill()
    assert slept.read_text() == "sleep 1\n"
