"""Ansible's resolved connection -> flodl's ssh block: what maps, what is refused."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._ssh.sshargs import (
    ResolvedConnection,
    connection_from_vars,
    derive_worker_ssh,
    jump_with_host_key_options,
    parse_ssh_args,
    uses_control_master,
)


def test_jump_port_identity_and_options_from_common_args():
    fields, options, problems = parse_ssh_args(
        "-J jump@10.0.0.2:2200 -p 2222 -i ~/.ssh/k -o ConnectTimeout=7 -oServerAliveInterval=5 -o 'User Alice'",
        "ssh_common_args",
    )
    assert problems == []
    assert fields == {"port": 2222, "identity_file": "~/.ssh/k"}
    assert options == ["ProxyJump=jump@10.0.0.2:2200", "ConnectTimeout=7", "ServerAliveInterval=5", "User=Alice"]


def test_joined_flag_values():
    fields, options, problems = parse_ssh_args("-p2200 -Jbastion -luser", "ssh_extra_args")
    assert (fields, options, problems) == ({"port": 2200, "user": "user"}, ["ProxyJump=bastion"], [])


def test_bare_flags_become_options():
    _fields, options, problems = parse_ssh_args("-C -4 -A -q -T", "ssh_args")
    assert problems == []
    assert options == ["Compression=yes", "AddressFamily=inet", "ForwardAgent=yes", "LogLevel=QUIET"]


@pytest.mark.parametrize(
    "args,fragment",
    [
        ("-F /etc/ssh/other_config", "-F is not supported: an ssh config file"),
        ("-L 8080:localhost:80", "'-L' is not supported"),
        ("-o", "-o has no value"),
        ("-o NoValue", "must be Key=Value"),
        ("-o 'unterminated", "cannot be split"),
        ("--", "'--' is not supported"),
    ],
)
def test_refused_arguments_name_the_setting(args, fragment):
    _fields, _options, problems = parse_ssh_args(args, "ssh_extra_args")
    assert len(problems) == 1
    assert problems[0].startswith("ansible_ssh_extra_args: ")
    assert fragment in problems[0]


def test_derive_takes_host_port_user_key_and_all_three_arg_settings():
    conn = ResolvedConnection(
        host="10.0.0.12",
        port=2222,
        remote_user="alice",
        private_key_file="/keys/gpu-b",
        args={"ssh_args": "-C", "ssh_common_args": "-J bastion", "ssh_extra_args": "-o ConnectTimeout=9"},
    )
    derived = derive_worker_ssh("gpu-b", conn)
    assert derived.problems == []
    assert derived.ssh == {
        "target": "10.0.0.12",
        "port": 2222,
        "user": "alice",
        "identity_file": "/keys/gpu-b",
        "options": ["Compression=yes", "ProxyJump=bastion", "ConnectTimeout=9"],
    }


def test_target_equal_to_host_is_left_out_and_string_port_becomes_int():
    derived = derive_worker_ssh("h1", ResolvedConnection(host="h1", port="2200"))
    assert derived.ssh == {"port": 2200}


def test_args_port_does_not_beat_the_resolved_port():
    # Ansible puts -p <port> itself only when a port is set; an explicit ansible_port is what it uses.
    derived = derive_worker_ssh("h1", ResolvedConnection(port=22, args={"ssh_common_args": "-p 2222"}))
    assert derived.ssh["port"] == 22


def test_explicit_flodl_ssh_wins():
    conn = ResolvedConnection(host="10.0.0.12", remote_user="alice", args={"ssh_common_args": "-o A=1"})
    derived = derive_worker_ssh("gpu-b", conn, {"user": "bob", "options": ["B=2"], "port": None})
    assert derived.ssh == {"target": "10.0.0.12", "user": "bob", "options": ["B=2"]}


@pytest.mark.parametrize(
    "conn,fragment",
    [
        (ResolvedConnection(connection="local"), "ansible_connection is 'local'"),
        (ResolvedConnection(connection="community.docker.docker"), "ssh only"),
        (ResolvedConnection(password_set=True), "BatchMode=yes"),
        (ResolvedConnection(private_key_data_set=True), "holds key data"),
        (ResolvedConnection(args={"ssh_extra_args": "-F cfg"}), "ansible_ssh_extra_args: -F is not supported"),
    ],
)
def test_what_flodl_cannot_reproduce_is_refused_with_the_host(conn, fragment):
    derived = derive_worker_ssh("gpu-b", conn)
    assert len(derived.problems) == 1
    assert derived.problems[0].startswith("host gpu-b: ")
    assert fragment in derived.problems[0]


def test_connection_from_vars_reads_the_classic_variables():
    conn = connection_from_vars(
        {
            "ansible_host": "10.0.0.9",
            "ansible_ssh_user": "carol",
            "ansible_private_key_file": "/k",
            "ansible_port": "2201",
            "ansible_ssh_common_args": "-J j",
            "ansible_ssh_pass": "",
        }
    )
    assert (conn.host, conn.remote_user, conn.private_key_file, conn.port) == ("10.0.0.9", "carol", "/k", "2201")
    assert conn.args == {"ssh_common_args": "-J j"}
    assert conn.password_set is False
    assert connection_from_vars({"ansible_password": "x"}).password_set is True


def test_control_master_detection():
    assert uses_control_master(["controlmaster=auto"])
    assert uses_control_master(["ControlPath=/tmp/x"])
    assert not uses_control_master(["ConnectTimeout=5"])


# --------------------------------------------------------------------------
# a jump leg checks host keys as the worker's own ssh does (issue 38)
# --------------------------------------------------------------------------

KNOWN = ["UserKnownHostsFile=/etc/flodl/known hosts", "StrictHostKeyChecking=yes"]


def test_a_jump_is_written_as_the_proxycommand_ssh_runs_for_it_with_the_host_key_options():
    derived = derive_worker_ssh("gpu-b", ResolvedConnection(
        host="10.0.0.12", args={"ssh_common_args": "-o 'UserKnownHostsFile=/etc/flodl/known hosts' "
                                                   "-o StrictHostKeyChecking=yes -J ops@10.0.0.2:2200"}))
    assert derived.problems == []
    assert derived.ssh["options"] == [*KNOWN, (
        "ProxyCommand=ssh -o 'UserKnownHostsFile=/etc/flodl/known hosts' -o StrictHostKeyChecking=yes "
        "-l ops -p 2200 -W '[%h]:%p' -- 10.0.0.2")]


@pytest.mark.parametrize("options", [
    ["ProxyJump=bastion", "Compression=yes"],  # nothing to inherit: flodl's bytes as they were
    [*KNOWN, "ProxyJump=none"],
    [*KNOWN, "ProxyCommand=nc %h %p", "ProxyJump=bastion"],  # the operator's own command wins
    KNOWN,
])
def test_options_without_a_jump_to_rewrite_are_left_alone(options):
    assert jump_with_host_key_options(options) == options


def test_an_explicit_flodl_ssh_block_is_kept_as_written():
    explicit = {"options": [*KNOWN, "ProxyJump=bastion"]}
    derived = derive_worker_ssh("gpu-b", ResolvedConnection(), explicit)
    assert derived.ssh["options"] == explicit["options"]  # fdl-cli's topology bytes


def _jump_leg_argv(options: list[str], stand_in_on_path, tmp_path) -> list[str]:
    """What the real ssh client runs for its ProxyCommand: a stand-in ``ssh`` on PATH records its argv."""
    real_ssh = shutil.which("ssh")
    # Never skipped: scripts/bootstrap.sh installs the OpenSSH client, which every part of the collection needs.
    assert real_ssh is not None, "no ssh client: run scripts/bootstrap.sh (it installs openssh-client)"
    log = stand_in_on_path("ssh", '#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done > "$SSH_LOG"\n')
    argv = [real_ssh, "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5"]
    for option in options:
        argv += ["-o", option]
    subprocess.run([*argv, "-p", "2222", "--", "fd00::12", "true"], capture_output=True, timeout=30,
                   check=False, env={**os.environ, "SHELL": "/bin/sh"})
    return log.read_text().splitlines()


def test_the_real_ssh_runs_the_jump_leg_with_the_host_key_options(stand_in_on_path, tmp_path):
    options = jump_with_host_key_options(["UserKnownHostsFile=/kh/%d 1", "StrictHostKeyChecking=yes",
                                          "ProxyJump=ops@10.0.0.2:2200"])
    assert _jump_leg_argv(options, stand_in_on_path, tmp_path) == [
        "-o", "UserKnownHostsFile=/kh/%d 1", "-o", "StrictHostKeyChecking=yes", "-l", "ops", "-p", "2200",
        "-W", "[fd00::12]:2222", "--", "10.0.0.2"]


def test_two_hops_each_leg_with_the_options(stand_in_on_path, tmp_path):
    options = jump_with_host_key_options(["UserKnownHostsFile=/kh", "ProxyJump=j1,[fd00::2]:2201"])
    leg = _jump_leg_argv(options, stand_in_on_path, tmp_path)
    # The leg next to the target reaches it through the first hop, which it runs with the same options.
    assert leg == ["-o", "UserKnownHostsFile=/kh", "-o",
                   "ProxyCommand=ssh -o UserKnownHostsFile=/kh -W '[%h]:%p' -- j1",
                   "-p", "2201", "-W", "[fd00::12]:2222", "--", "fd00::2"]
