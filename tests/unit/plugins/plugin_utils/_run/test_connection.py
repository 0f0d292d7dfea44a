"""plugin_utils._run.connection: the `connection` keyword that applies to the workers (delegated tasks, 2.21 write-back,
runbooks), and each host's options as Ansible's ssh plugin resolves them."""
from __future__ import annotations

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play import Play
from ansible.template import Templar
from ansible.vars.manager import VariableManager

from ansible_collections.flodl.cluster.plugins.plugin_utils._run.connection import AnsibleConnections, keyword_connection


def _task(play_connection: str | None, **task_keys):
    play = {"name": "p", "hosts": "all", "gather_facts": False,
            "tasks": [{"name": "t", "meta": "noop", **task_keys}]}
    if play_connection:
        play["connection"] = play_connection
    loaded = Play.load(play, variable_manager=VariableManager(loader=DataLoader()), loader=DataLoader())
    return next(t for block in loaded.compile() for t in block.block if t.name == "t")


@pytest.mark.parametrize("play_connection", [None, "ssh", "ansible.builtin.ssh", "paramiko"])
def test_a_delegated_task_takes_the_keyword_from_its_parents(play_connection):
    task = _task(play_connection, delegate_to="localhost")
    # ansible-core 2.21 writes the delegated host's loaded plugin back into the task.
    task.connection = "ansible.builtin.local"
    assert keyword_connection(task) == (play_connection or "ssh")


def test_a_delegated_task_with_its_own_keyword_still_uses_the_parents():
    task = _task("ssh", delegate_to="buildbox", connection="local")  # `connection: local` is the build host's
    assert keyword_connection(task) == "ssh"


@pytest.mark.parametrize(("play_connection", "own", "expect"),
                         [(None, None, "ssh"), ("paramiko", None, "paramiko"), ("ssh", "local", "local")])
def test_a_task_on_the_worker_uses_its_own_keyword(play_connection, own, expect):
    task = _task(play_connection, **({"connection": own} if own else {}))
    assert keyword_connection(task) == expect


@pytest.mark.parametrize("play_connection", [None, "paramiko"])
def test_the_loaded_plugin_written_back_by_ansible_2_21_is_not_the_keyword(play_connection):
    # A run-once step on a first worker that is the controller's own box (ansible_connection: local): 2.21
    # records that host's plugin on the task, which says nothing about how the other workers are reached.
    task = _task(play_connection)
    task.connection = "ansible.builtin.local"
    assert keyword_connection(task) == (play_connection or "ssh")


def test_a_play_on_a_host_that_is_not_a_worker_says_nothing_of_the_workers():
    task = _task("local")  # a runbook on localhost with `connection: local`
    assert keyword_connection(task, on_workers=False) == "ssh"
    assert keyword_connection(task) == "local"


def test_one_plugin_object_serves_every_host_without_carrying_options_over():
    connections = AnsibleConnections(_task(None), Templar(loader=DataLoader()), cli_password=False)
    first = connections.resolve({"ansible_host": "192.0.2.11", "ansible_port": 2222, "ansible_user": "alice",
                                 "ansible_ssh_common_args": "-o ProxyJump=bastion",
                                 "ansible_ssh_private_key_file": "/keys/a"})
    second = connections.resolve({"ansible_host": "192.0.2.12"})
    assert (first.host, first.port, first.remote_user, first.private_key_file) == ("192.0.2.11", 2222, "alice", "/keys/a")
    assert first.args == {"ssh_common_args": "-o ProxyJump=bastion"}
    # The second host's options are its own: nothing of the first one's stays on the shared plugin object.
    assert (second.host, second.port, second.private_key_file, second.args) == ("192.0.2.12", None, None, {})
    assert second.remote_user != "alice"
    assert connections.resolve({"ansible_connection": "local"}).connection == "local"
