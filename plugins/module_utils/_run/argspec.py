# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles' argument specs applied to a whole run in one pass on the controller.

Ansible validates a role's spec with one task per host, and each such task costs a worker process per
host. The phases validate every worker's variables against the same ``meta/argument_specs.yml`` in the
run-once step instead, with Ansible's own validator, and report each worker's problems as that worker's
own result.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.flodl.cluster.plugins.module_utils._core.problems import Problem

# What the validator reads; the rest of an option's spec (description, version_added) is documentation.
_SPEC_KEYS = ("type", "required", "choices", "elements", "default", "options", "no_log", "aliases")


def spec_of(option: Mapping[str, Any]) -> dict[str, Any]:
    """An option's spec without its documentation (nested options too)."""
    out = {k: option[k] for k in _SPEC_KEYS if k in option}
    if isinstance(out.get("options"), Mapping):
        out["options"] = {name: spec_of(sub) for name, sub in out["options"].items()}
    return out


def union_options(role_options: Iterable[Mapping[str, Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    """One option set for roles that run together: the first definition wins, required by one is required."""
    union: dict[str, dict[str, Any]] = {}
    for options in role_options:
        for name, option in options.items():
            if name not in union:
                union[name] = spec_of(option)
            elif option.get("required"):
                union[name]["required"] = True
    return union


def blank_is_unset(option: Mapping[str, Any], value: Any) -> bool:
    """An empty answer (AWX sends one for every question left blank) to an optional non-text option."""
    return (isinstance(value, str) and not value.strip() and not option.get("required")
            and option.get("type", "str") not in ("str", "raw", "path"))


def problems(options: Mapping[str, Mapping[str, Any]], params: Mapping[str, Any]) -> dict[str, list[str]]:
    """Ansible's own verdict on ``params`` (only the options given), per option; empty when all pass."""
    present = {name: value for name, value in params.items()
               if name in options and not blank_is_unset(options[name], value)}
    if not ArgumentSpecValidator(dict(options)).validate(present).error_messages:
        return {}
    # Rare: find which options fail (the validator's messages carry no option name of their own).
    found: dict[str, list[str]] = {}
    for name, option in options.items():
        one = {name: present[name]} if name in present else {}
        messages = ArgumentSpecValidator({name: dict(option)}).validate(one).error_messages
        if messages:
            found[name] = list(messages)
    return found


def run_problems(
    options: Mapping[str, Mapping[str, Any]],
    run_params: Mapping[str, Any],
    workers: Iterable[tuple[str, Mapping[str, Any]]],
    worker_names: Iterable[str],
) -> tuple[dict[str, list[str]], dict[str, dict[str, list[str]]]]:
    """(problems of the run's own variables, problems per worker), each per option; worker options per worker."""
    per_worker_names = set(worker_names)
    worker_options = {k: v for k, v in options.items() if k in per_worker_names}
    run_options = {k: v for k, v in options.items() if k not in per_worker_names}
    per_host: dict[str, dict[str, list[str]]] = {}
    for name, values in workers:
        found = problems(worker_options, values)
        if found:
            per_host[name] = found
    return problems(run_options, run_params), per_host


def uncovered(found: Mapping[str, list[str]], worker: int | None, ours: Iterable[Problem], who: str) -> list[Problem]:
    """The spec's problems that the run's own rules did not already report (theirs say why and how to fix).

    An option is covered when one of ``ours`` is about that variable and belongs to the same ``worker``
    (None: the run's own variables), read from the problems' fields, never from their text.
    """
    said = {p.variable for p in ours if p.worker == worker and p.variable}
    return [
        Problem(who, message, worker=worker, variable=option)
        for option, messages in found.items()
        if option not in said
        for message in messages
    ]
