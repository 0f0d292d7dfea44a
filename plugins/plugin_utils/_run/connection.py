# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How Ansible itself would reach a host: its connection plugin's resolved options.

The run-once controller step needs every worker's connection, not only its
own, so it resolves each host the way the task executor does for the host a
task runs on: load the host's connection plugin and feed it the host's
variables and the task's keywords (``-u``, ``remote_user``, ``--private-key``,
``ansible.cfg``, ``ANSIBLE_*`` environment all arrive through that path).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.playbook.play_context import PlayContext
from ansible.plugins.loader import connection_loader

from ansible_collections.flodl.cluster.plugins.module_utils._ssh.sshargs import ResolvedConnection

SSH_NAMES = ("ssh", "ansible.builtin.ssh", "ansible.legacy.ssh", "smart")
_ARG_OPTIONS = ("ssh_args", "ssh_common_args", "ssh_extra_args")


def _option(conn: Any, name: str) -> tuple[Any, str]:
    try:
        return conn.get_option_and_origin(name)
    except KeyError:
        return None, "default"


def keyword_connection(task: Any, on_workers: bool = True) -> str:
    """The ``connection`` keyword that applies to the workers, for a host without ``ansible_connection``.

    A delegated task's own keyword is the delegated host's (the prebuild step runs on ``flodl_build_host``), and a
    play on a host that is not a worker (a runbook on localhost) says nothing about how the workers are reached.
    """
    if not on_workers:
        return "ssh"
    value = _written_connection(task)
    return value if isinstance(value, str) and value else "ssh"


# Ansible's internals, each behind one function: the only two places the collection reads them.

def _written_connection(task: Any) -> Any:
    """The ``connection`` keyword as the playbook wrote it: the task's own, else its block's, role's or play's.

    No public API gives it: ansible-core 2.21 writes the loaded plugin's name back into ``task.connection`` (the
    first play host's, ``ansible.builtin.local`` for the controller's own box or for ``delegate_to: localhost``),
    so the written form (``task._ds``) and the parents' (``_get_parent_attribute``) are read instead.
    """
    written = getattr(task, "_ds", None)
    own = None if getattr(task, "delegate_to", None) or not isinstance(written, Mapping) else written.get("connection")
    inherited = getattr(task, "_get_parent_attribute", None)
    return own or (inherited("connection", omit=True) if callable(inherited) else None)


def _option_vars(conn: Any, host_vars: Mapping[str, Any], host_templar: Any) -> Any:
    """A host's variables that set the connection plugin's options (``ansible_port``, ``ansible_ssh_common_args``...).

    The task executor does this for the one host a task runs on; no public API does it for another host, and
    rebuilding it from ``get_plugin_vars`` would drift from Ansible's own precedence and templating.
    """
    return conn._resolve_option_variables(host_vars, host_templar)


class AnsibleConnections:
    """How Ansible would reach each host of one read of the run: the connection options of its plugin.

    One ``ssh`` plugin object and the task's keywords, read for the first ssh host, serve every host of the read;
    each host only sets the plugin's options from its own variables (``set_options`` replaces them all), as the
    task executor does.
    """

    def __init__(self, task: Any, templar: Any, cli_password: bool, on_workers: bool = True):
        self._task = task
        self._templar = templar
        self._cli_password = cli_password
        self._on_workers = on_workers
        self._ssh: Any = None
        self._task_keys: dict[str, Any] | None = None

    def _plugin(self) -> tuple[Any, dict[str, Any]]:
        if self._ssh is None:
            self._ssh = connection_loader.get("ssh", PlayContext(), None)
            task_keys = self._task.dump_attrs()
            task_keys.pop("retries", None)
            task_keys.pop("timeout", None)
            self._task_keys = task_keys
        return self._ssh, dict(self._task_keys or {})

    def resolve(self, host_vars: Mapping[str, Any]) -> ResolvedConnection:
        """The connection options Ansible would use for the host whose variables are ``host_vars``."""
        host_templar = self._templar.copy_with_new_env(available_variables=host_vars)
        name = host_vars.get("ansible_connection")
        name = str(host_templar.template(name)) if name is not None else keyword_connection(self._task, self._on_workers)
        if name not in SSH_NAMES:
            return ResolvedConnection(connection=name)
        conn, task_keys = self._plugin()
        conn.set_options(task_keys=task_keys, var_options=_option_vars(conn, host_vars, host_templar))
        args: dict[str, str] = {}
        for option in _ARG_OPTIONS:
            value, origin = _option(conn, option)
            # Ansible's own default ssh_args (ControlMaster for its module transfers) is not the operator's.
            if value and origin != "default":
                args[option] = str(value)
        password = _option(conn, "password")[0]
        key_data = _option(conn, "private_key")[0]
        return ResolvedConnection(
            connection="ssh",
            host=_option(conn, "host")[0],
            port=_option(conn, "port")[0],
            remote_user=_option(conn, "remote_user")[0],
            private_key_file=_option(conn, "private_key_file")[0],
            password_set=bool(password) or self._cli_password,
            private_key_data_set=bool(key_data),
            args=args,
        )
