# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible's resolved ssh connection -> the worker's flodl ``ssh`` block.

flodl's launcher reaches a worker with ``ssh -o <options> -p <port> -l <user>
-i <key> <target>`` and nothing else, so every Ansible setting has to become
one of those or be refused: a setting dropped silently would make the probe
and the launcher reach a different machine, or none. This module is pure:
the action plugin hands it the option values Ansible resolved for the host.
"""
from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._core.safety import blank
from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import join_posix

# Flags with a value that map onto the ssh block (``-o`` handled apart).
_VALUE_FLAGS = {"-p": "port", "-l": "user", "-i": "identity_file", "-J": "ProxyJump", "-S": "ControlPath"}
# Value-less flags that have an exact ``-o`` spelling.
_BARE_FLAGS = {
    "-4": "AddressFamily=inet",
    "-6": "AddressFamily=inet6",
    "-A": "ForwardAgent=yes",
    "-a": "ForwardAgent=no",
    "-C": "Compression=yes",
    "-q": "LogLevel=QUIET",
    "-T": None,  # flodl already passes -T
}
# ssh flags that take a value: a refused one must not leave its value behind as a stray token.
_FLAGS_WITH_VALUE = frozenset("-B -b -c -D -E -e -F -I -L -m -O -P -Q -R -W -w".split())
_WHY_REFUSED = {
    "-F": "an ssh config file is read by this controller's ssh only; flodl's launcher would not read it "
    "(write its settings as -o Key=Value, or put them in ~/.ssh/config of the user that runs the launcher)",
    "-o": "an -o value must be Key=Value",
}
# Where each Ansible setting comes from, for messages.
SETTING_NAMES = {
    "ssh_args": "ssh_args (ansible.cfg [ssh_connection] / ANSIBLE_SSH_ARGS)",
    "ssh_common_args": "ansible_ssh_common_args",
    "ssh_extra_args": "ansible_ssh_extra_args",
}


@dataclass
class ResolvedConnection:
    """The options Ansible resolved for one host (``get_option`` values; None when unset)."""

    connection: str = "ssh"
    host: str | None = None
    port: Any = None
    remote_user: str | None = None
    private_key_file: str | None = None
    password_set: bool = False
    private_key_data_set: bool = False
    args: dict[str, str] = field(default_factory=dict)  # ssh_args / ssh_common_args / ssh_extra_args


@dataclass
class DerivedSsh:
    ssh: dict[str, Any]
    problems: list[str]


def _split(text: str, setting: str, problems: list[str]) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:
        problems.append(f"{SETTING_NAMES.get(setting, setting)}: cannot be split like a shell line ({exc})")
        return []


def parse_ssh_args(text: str | None, setting: str) -> tuple[dict[str, Any], list[str], list[str]]:
    """(fields, options, problems) from one ssh argument string.

    ``fields`` holds port/user/identity_file; ``options`` the ``Key=Value``
    list in the order given (OpenSSH keeps the first value of an option).
    """
    fields: dict[str, Any] = {}
    options: list[str] = []
    problems: list[str] = []
    tokens = _split(text or "", setting, problems)
    name = SETTING_NAMES.get(setting, setting)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        # ``-p2222`` and ``-p 2222`` are the same to ssh.
        joined = len(tok) > 2 and (tok[:2] == "-o" or tok[:2] in _VALUE_FLAGS)
        flag, inline = (tok[:2], tok[2:]) if joined else (tok, "")
        if flag == "-o" or flag in _VALUE_FLAGS:
            value = inline
            if not value:
                if i + 1 >= len(tokens):
                    problems.append(f"{name}: {flag} has no value")
                    break
                value = tokens[i + 1]
                i += 1
            if flag == "-o":
                key, sep, val = value.partition("=")
                if not sep:
                    key, val = value.partition(" ")[::2]
                if not key.strip() or not val.strip():
                    problems.append(f"{name}: -o {value!r}: {_WHY_REFUSED['-o']}")
                else:
                    options.append(f"{key.strip()}={val.strip()}")
            elif _VALUE_FLAGS[flag] in ("port", "user", "identity_file"):
                fields[_VALUE_FLAGS[flag]] = int(value) if flag == "-p" and value.isdigit() else value
            else:
                options.append(f"{_VALUE_FLAGS[flag]}={value}")
        elif tok in _BARE_FLAGS:
            if _BARE_FLAGS[tok]:
                options.append(str(_BARE_FLAGS[tok]))
        elif tok in _WHY_REFUSED:
            problems.append(f"{name}: {tok} is not supported: {_WHY_REFUSED[tok]}")
            i += 1 if tok in _FLAGS_WITH_VALUE else 0
        else:
            i += 1 if tok in _FLAGS_WITH_VALUE else 0
            problems.append(
                f"{name}: {tok!r} is not supported: flodl's launcher passes only -o options, port, user and key "
                "to ssh, so it would reach the host differently from this probe (write it as -o Key=Value, "
                "or set it in ~/.ssh/config)"
            )
        i += 1
    return fields, options, problems


def _has_option(options: list[str], key: str) -> bool:
    return any(o.split("=", 1)[0].strip().lower() == key.lower() for o in options)


# What a jump leg must share with the worker's own ssh to check host keys the same way.
_HOST_KEY_OPTIONS = ("userknownhostsfile", "globalknownhostsfile", "stricthostkeychecking", "knownhostscommand")


def _key(option: str) -> str:
    return option.split("=", 1)[0].strip().lower()


def _hop(spec: str) -> tuple[str, str, str]:
    """``[ssh://][user@]host[:port]`` (``[v6]:port`` too) -> (user, host, port), blanks when absent."""
    spec = spec.strip()
    spec = spec[len("ssh://"):] if spec.startswith("ssh://") else spec
    user, _at, rest = spec.rpartition("@")
    if rest.startswith("["):
        host, _sep, tail = rest[1:].partition("]")
        return user, host, tail[1:] if tail.startswith(":") else ""
    if rest.count(":") == 1:
        host, port = rest.split(":")
        return user, host, port
    return user, rest, ""


def _jump_command(hops: list[str], inherited: list[str]) -> str:
    """A ProxyCommand reaching ``%h:%p`` through ``hops`` (the last one next to the target), each leg with
    ``inherited``. ``%`` in a value is doubled: the ssh running this command expands its own tokens first."""
    user, host, port = _hop(hops[-1])
    argv = ["ssh"]
    for option in inherited:
        argv += ["-o", option.replace("%", "%%")]
    if len(hops) > 1:
        argv += ["-o", "ProxyCommand=" + _jump_command(hops[:-1], inherited).replace("%", "%%")]
    argv += ["-l", user] if user else []
    argv += ["-p", port] if port else []
    return join_posix([*argv, "-W", "[%h]:%p", "--", host])


def jump_with_host_key_options(options: list[str]) -> list[str]:
    """``options`` with a ProxyJump that checks host keys as the worker's own ssh does.

    ssh runs a jump leg as a second ``ssh -W`` that reads ssh_config only, never the ``-o`` options: with a
    UserKnownHostsFile (or StrictHostKeyChecking...) given as ``-o``, the leg checks the jump host against
    another known_hosts and fails with only ``Connection closed by UNKNOWN port 65535``. The ProxyJump is
    written as the ProxyCommand ssh would run for it, with those options; unchanged without any, or when a
    ProxyCommand is set too.
    """
    jumps = [o for o in options if _key(o) == "proxyjump"]
    inherited = [o for o in options if _key(o) in _HOST_KEY_OPTIONS]
    value = jumps[0].split("=", 1)[1].strip() if jumps else ""
    if not value or value.lower() == "none" or not inherited or _has_option(options, "ProxyCommand"):
        return options
    command = _jump_command([hop for hop in value.split(",") if hop.strip()], inherited)
    return [f"ProxyCommand={command}" if o is jumps[0] else o for o in options]


SSH_CONNECTIONS = ("ssh", "ansible.builtin.ssh", "smart")


def is_ssh_connection(name: str | None) -> bool:
    """True for the connection plugins flodl's launcher can stand in for with its own ssh."""
    return str(name or "ssh") in SSH_CONNECTIONS


def non_ssh_problems(host: str, connection: str, worker_vars: Mapping[str, Any]) -> list[str]:
    """What a walk_in worker reached by a non-ssh Ansible connection cannot have (its agent needs no ssh).

    flodl counts ``local_devices: all`` with its own ssh (the preflight's GPU sweep does the same): neither
    reaches this worker, so its devices are listed instead.
    """
    if str(worker_vars.get("flodl_local_devices") or "").strip() == "all":
        return [
            f"host {host}: flodl_local_devices is 'all', but this worker is reached by Ansible's {connection} "
            "connection, not ssh: flodl counts 'all' devices over ssh and cannot reach it; list its devices "
            "explicitly (e.g. flodl_local_devices: [0, 1])"
        ]
    return []


def derive_worker_ssh(
    host: str,
    conn: ResolvedConnection,
    explicit: Mapping[str, Any] | None = None,
) -> DerivedSsh:
    """The flodl ``ssh`` block for worker ``host``; explicit ``flodl_ssh`` keys win.

    Problems name the setting and why flodl's launcher cannot honour it.
    """
    problems: list[str] = []
    if not is_ssh_connection(conn.connection):
        problems.append(
            f"ansible_connection is {conn.connection!r}: flodl's launcher reaches remote workers with ssh "
            "only; use the ssh connection for this host (or make it the controller's own worker)"
        )
    if conn.password_set:
        problems.append(
            "a password is set (ansible_password / ansible_ssh_pass / --ask-pass): flodl's launcher runs ssh "
            "with BatchMode=yes, so only keys (a key file or ssh-agent) can log in; use a key"
        )
    if conn.private_key_data_set:
        problems.append(
            "ansible_ssh_private_key holds key data: flodl's launcher can use a key file or ssh-agent only; "
            "write the key to a file (ansible_ssh_private_key_file) or load it into ssh-agent"
        )
    ssh: dict[str, Any] = {}
    if not blank(conn.host) and str(conn.host) != host:
        ssh["target"] = str(conn.host)
    if not blank(conn.port):
        ssh["port"] = conn.port
    if not blank(conn.remote_user):
        ssh["user"] = str(conn.remote_user)
    if not blank(conn.private_key_file):
        ssh["identity_file"] = str(conn.private_key_file)
    options: list[str] = []
    # ssh_common_args and ssh_extra_args follow ssh_args on Ansible's own command line.
    for setting in ("ssh_args", "ssh_common_args", "ssh_extra_args"):
        fields, opts, found = parse_ssh_args(conn.args.get(setting), setting)
        problems += found
        for key, value in fields.items():
            ssh.setdefault(key, value)
        options += [o for o in opts if o not in options]
    if options:
        ssh["options"] = jump_with_host_key_options(options)
    if explicit:
        ssh.update({k: v for k, v in explicit.items() if v is not None})
    if isinstance(ssh.get("port"), str) and ssh["port"].strip().isdigit():
        ssh["port"] = int(ssh["port"].strip())  # -e and INI values arrive as text
    return DerivedSsh(ssh=ssh, problems=[f"host {host}: {p}" for p in problems])


def worker_ssh_block(
    host: str, worker_vars: Mapping[str, Any], conn: ResolvedConnection
) -> tuple[dict[str, Any] | None, list[str]]:
    """(ssh block or None, problems) for one worker; ``flodl_ssh`` in ``worker_vars`` wins.

    A non-map ``flodl_ssh`` is kept as ``{"__invalid__": value}`` for the validator to report.
    """
    explicit = worker_vars.get("flodl_ssh")
    if explicit is not None and not isinstance(explicit, Mapping):
        return {"__invalid__": explicit}, []
    derived = derive_worker_ssh(host, conn, explicit)
    return (derived.ssh if derived.ssh or explicit is not None else None), derived.problems


def own_worker_ssh_block(worker_vars: Mapping[str, Any]) -> dict[str, Any] | None:
    """The controller's own worker: its declared ``flodl_ssh`` as written (it is never reached over ssh).

    Nothing is derived from its Ansible connection; a non-map is kept for the validator, as above.
    """
    explicit = worker_vars.get("flodl_ssh")
    if explicit is None:
        return None
    return dict(explicit) if isinstance(explicit, Mapping) else {"__invalid__": explicit}


def uses_control_master(options: list[str]) -> bool:
    """True when the operator set their own connection sharing (never override it)."""
    return _has_option(options, "ControlMaster") or _has_option(options, "ControlPath")


# Secrets flodl cannot use; only their presence is read.
SECRET_CONNECTION_VARS = (
    "ansible_password", "ansible_ssh_pass", "ansible_ssh_password", "ansible_ssh_private_key", "ansible_private_key",
)
# Ansible's variable names per connection option, highest precedence last (as in the ssh plugin).
CONNECTION_VARS = {
    "host": ("ansible_host", "ansible_ssh_host"),
    "port": ("ansible_port", "ansible_ssh_port"),
    "remote_user": ("ansible_user", "ansible_ssh_user"),
    "private_key_file": ("ansible_private_key_file", "ansible_ssh_private_key_file"),
    "ssh_common_args": ("ansible_ssh_common_args",),
    "ssh_extra_args": ("ansible_ssh_extra_args",),
}


def connection_from_vars(hostvars: Mapping[str, Any]) -> ResolvedConnection:
    """The connection the classic ``ansible_*`` host variables describe (no config, no CLI).

    The pure fallback of the real resolver (plugin_utils._run.connection), used
    where no task executor is around: unit tests and offline checks.
    """
    found: dict[str, Any] = {}
    for option, names in CONNECTION_VARS.items():
        for name in names:
            if hostvars.get(name) not in (None, ""):
                found[option] = hostvars[name]
    return ResolvedConnection(
        connection=str(hostvars.get("ansible_connection") or "ssh"),
        host=found.get("host"),
        port=found.get("port"),
        remote_user=found.get("remote_user"),
        private_key_file=found.get("private_key_file"),
        password_set=any(hostvars.get(n) for n in ("ansible_password", "ansible_ssh_pass", "ansible_ssh_password")),
        private_key_data_set=bool(hostvars.get("ansible_ssh_private_key") or hostvars.get("ansible_private_key")),
        args={k: str(found[k]) for k in ("ssh_common_args", "ssh_extra_args") if k in found},
    )
