# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What Ansible's own flags mean for a run: ``-v`` and ``become``.

``-v``: flodl's log level (``FLODL_VERBOSITY``) for the launched command. flodl reads the variable as
``0``-``4`` or ``quiet``/``normal``/``verbose``/``debug``/``trace`` (``normal`` when unset), and its
launcher forwards the value to every remote rank. ``fdl -v``, ``-vv`` and ``-vvv`` mean ``verbose``,
``debug`` and ``trace``; ``ansible-playbook -v`` (an AWX job template's verbosity) means the same here.
A value the operator set wins: in the controller's environment or in the cluster's ``env``.

``become``: refused by the steps that run on the controller and reach the workers over their own ssh, on every
worker it would apply to (its own ``ansible_become``, or the play's become).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from ansible_collections.flodl.cluster.plugins.module_utils._core.problems import Problem, worded

ENV_VERBOSITY = "FLODL_VERBOSITY"
# fdl's own mapping of -v, -vv, -vvv (more v's stay at trace).
LEVELS = ("verbose", "debug", "trace")


def launch_verbosity(ansible_verbosity: int, controller_env: Mapping[str, str],
                     cluster_env: Optional[Mapping[str, Any]]) -> Optional[str]:
    """The ``FLODL_VERBOSITY`` to add for ``ansible_verbosity`` v's, or None (no -v, or set by the operator)."""
    if ansible_verbosity <= 0 or ENV_VERBOSITY in controller_env:
        return None
    if isinstance(cluster_env, Mapping) and ENV_VERBOSITY in cluster_env:
        return None
    return LEVELS[min(ansible_verbosity, len(LEVELS)) - 1]


def become_problem(host: str, become_user: Optional[str]) -> str:
    """Why a run-once step on a host that is not a worker refuses ``become``: it runs here, without it."""
    user = become_user or "root"
    return (
        f"controller: become is set for {host} (a become keyword, --become, AWX's privilege escalation or "
        f"ansible_become), but this step runs on the controller and reaches the workers over its own ssh as the "
        f"connection user, and flodl's launcher has no become: nothing would run as {user}; turn become off for "
        "flodl.cluster's plays (become: false, or -e ansible_become=false), and to run the ranks as another user "
        f"connect as that user (ansible_user or flodl_ssh.user). {_BUILD_ONLY}"
    )


def worker_become_problem(host: str, index: int, user: Optional[str], method: Optional[str],
                          own_var: bool) -> Problem:
    """Why a worker on which Ansible would become is refused: the steps and the launcher reach it without become.

    ``own_var``: the worker's own ``ansible_become`` turned it on (else the play's become reached it).
    """
    source = ("its ansible_become" if own_var
              else "the play's become: a become keyword, --become or AWX's privilege escalation")
    shown = user or "root"
    fix = (f"set ansible_become: false for {host} (or remove it from its inventory variables)" if own_var
           else "turn become off for flodl.cluster's plays (become: false, no --become, no privilege escalation)")
    return worded(
        f"host {host} (worker {index}): become is on for {host} ({source}; become_user {shown}, become_method "
        f"{method or 'sudo'}), but flodl.cluster reaches {host} over its own ssh as the connection user and "
        f"flodl's launcher has no become: the ranks would run as the connection user, not as {shown}; {fix}, and "
        f"to run the ranks as {shown} connect as that user (ansible_user or flodl_ssh.user), or launch with "
        f"flodl_launch_mode: walk_in, which starts each worker's agent over Ansible's own connection, become "
        f"included. {_BUILD_ONLY}",
        index, "ansible_become")


_BUILD_ONLY = "Only the prebuild's build on flodl_build_host honours become"
