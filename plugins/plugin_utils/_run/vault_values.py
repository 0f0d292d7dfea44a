# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which values of a run came from Ansible Vault, as Ansible marks them (ansible-core 2.19 and later).

A ``!vault`` value is an ``EncryptedString`` before templating and a string tagged with its ciphertext after;
``VaultHelper.get_ciphertext`` answers for both. The secrets found are kept as plaintext -> ciphertext: the
plaintext to redact (module_utils._core.vault_redact), the ciphertext to hand between tasks, since it is safe to show.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ansible.parsing.vault import EncryptedString, VaultHelper

from ansible_collections.flodl.cluster.plugins.module_utils._run.run_model import RESULT_KEY
from ansible_collections.flodl.cluster.plugins.module_utils._core.vault_redact import redact, redact_text

CIPHERTEXTS_KEY = "vaulted"  # a result's (and a run model's) ciphertexts of the run's vaulted values
# Task variables that are views of other variables (each host's, the play's): scanned where they are defined.
_VIEWS = frozenset({"hostvars", "vars", "groups", "play_hosts", "ansible_play_hosts", "ansible_play_hosts_all",
                    "ansible_play_batch", "omit", "ansible_facts"})
_DELEGATED = "ansible_delegated_vars"  # {delegated host: its variables, views included}
_DEPTH = 8
# The secrets of the step now running (plaintext -> ciphertext): each task runs in a worker process of its own.
_STEP: dict[str, str] = {}


def _plain_text(value: Any) -> str | None:
    try:
        return json.loads(json.dumps(str(value)))
    except Exception:  # noqa: BLE001  (undecryptable: Ansible itself fails the variable's use)
        return None


def found_in(value: Any, into: dict[str, str], depth: int = 0) -> dict[str, str]:
    """Every vaulted string in ``value`` (a variable, templated or not) added to ``into``; returns ``into``."""
    if depth > _DEPTH:
        return into
    if isinstance(value, Mapping):
        for item in value.values():
            found_in(item, into, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            found_in(item, into, depth + 1)
    elif isinstance(value, (str, EncryptedString)):
        ciphertext = VaultHelper.get_ciphertext(value, with_tags=False)
        text = _plain_text(value) if ciphertext else None
        if text:
            into[text] = str(ciphertext)
    return into


def in_task_vars(task_vars: Mapping[str, Any], into: dict[str, str] | None = None) -> dict[str, str]:
    """The vaulted values among the task's own variables, untemplated (cheap: nothing is rendered)."""
    into = {} if into is None else into
    for name, value in task_vars.items():
        if name == _DELEGATED and isinstance(value, Mapping):
            # A delegated task's (the build's, on the build host): the delegated host's variables, each host's whole
            # set with its views of every other host. Its own are scanned as a task's; walking its hostvars would
            # render every worker's variables, each holding the run-once steps' results for all workers: O(N^2),
            # ten minutes at 500 workers on 2 CPUs (bench/README.md, stop 35).
            for delegated in value.values():
                if isinstance(delegated, Mapping):
                    in_task_vars(delegated, into)
        elif name not in _VIEWS:
            found_in(value, into)
    return into


def in_host(host_vars: Any, into: dict[str, str]) -> dict[str, str]:
    """The vaulted values among one inventory host's own variables, untemplated, when Ansible exposes them."""
    own = getattr(host_vars, "_vars", None)
    return in_task_vars(own, into) if isinstance(own, Mapping) else into


def decrypted(ciphertexts: Iterable[str]) -> list[str] | None:
    """Each ciphertext's plaintext, with this run's vault secrets; None when one cannot be decrypted."""
    out: list[str] = []
    for ciphertext in ciphertexts:
        text = _plain_text(EncryptedString(ciphertext=str(ciphertext))) if isinstance(ciphertext, str) else None
        if text is None:
            return None
        out.append(text)
    return out


def begin(task_vars: Mapping[str, Any]) -> None:
    """A step starts: its secrets are the vaulted values among its task variables (more come with the run)."""
    _STEP.clear()
    in_task_vars(task_vars, _STEP)


def add(vaulted: Mapping[str, str]) -> None:
    """The run's own secrets (plaintext -> ciphertext: plugin_utils._run.context.read_run), added to the step's."""
    _STEP.update(vaulted)


def add_ciphertexts(ciphertexts: Any) -> None:
    """Secrets an earlier step named by their ciphertexts (a registered result's ``vaulted``)."""
    named = [c for c in ciphertexts if isinstance(c, str)] if isinstance(ciphertexts, list) else []
    _STEP.update(zip(decrypted(named) or [], named))


def step_secrets() -> list[str]:
    return sorted(_STEP)


def ciphertexts() -> list[str]:
    """The step's secrets as their ciphertexts, safe to register for a later step (``add_ciphertexts``)."""
    return [_STEP[s] for s in sorted(_STEP)]


class RedactingDisplay:
    """Ansible's Display with this step's secrets withheld from every message the collection prints."""

    def __init__(self, display: Any) -> None:
        self._display = display

    def __getattr__(self, name: str) -> Any:
        return getattr(self._display, name)

    @staticmethod
    def _text(msg: Any) -> Any:
        return redact_text(msg, sorted(_STEP)) if isinstance(msg, str) and _STEP else msg

    def display(self, msg: Any, *args: Any, **kwargs: Any) -> Any:
        return self._display.display(self._text(msg), *args, **kwargs)

    def warning(self, msg: Any, *args: Any, **kwargs: Any) -> Any:
        return self._display.warning(self._text(msg), *args, **kwargs)

    def v(self, msg: Any, *args: Any, **kwargs: Any) -> Any:
        return self._display.v(self._text(msg), *args, **kwargs)

    def vv(self, msg: Any, *args: Any, **kwargs: Any) -> Any:
        return self._display.vv(self._text(msg), *args, **kwargs)

    def vvv(self, msg: Any, *args: Any, **kwargs: Any) -> Any:
        return self._display.vvv(self._text(msg), *args, **kwargs)

    def vvvv(self, msg: Any, *args: Any, **kwargs: Any) -> Any:
        return self._display.vvvv(self._text(msg), *args, **kwargs)


def withheld(result: dict[str, Any], keep: tuple[str, ...] = ()) -> dict[str, Any]:
    """A step's result with every secret of the step redacted. Fields in ``keep`` (what a later step runs) stay
    whole; when they hold a secret, the result is marked no_log, so that no callback, event or recorder gets it."""
    secrets = sorted(_STEP)
    if not secrets:
        return result
    out = redact(result, (*secrets,), (*keep, CIPHERTEXTS_KEY, RESULT_KEY))
    model = result.get(RESULT_KEY)
    if isinstance(model, dict):  # masked already (run_model.to_model); its ciphertexts kept whole
        out[RESULT_KEY] = dict(redact(model, secrets), **{k: model[k] for k in (CIPHERTEXTS_KEY,) if k in model})
    if any(out.get(k) != redact(result.get(k), secrets) for k in keep):
        out["_ansible_no_log"] = True
    return out


def withholding(keep: tuple[str, ...] = ()) -> Callable[[Callable[..., dict[str, Any]]], Callable[..., dict[str, Any]]]:
    """An action's ``run``, its step's secrets found first and withheld from its result (see :func:`withheld`)."""
    def wrap(run: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        @functools.wraps(run)
        def step(self: Any, tmp: Any = None, task_vars: Mapping[str, Any] | None = None) -> dict[str, Any]:
            begin(task_vars or {})
            return withheld(run(self, tmp, task_vars), keep)
        return step
    return wrap
