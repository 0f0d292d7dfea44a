# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every name of the run looked up at once, with one bounded wait in total.

The launch step resolves ``controller.host`` and every worker's ``host`` on the controller (fdl-cli's
rules, name_resolution.resolve_host_to_ip). A resolver that drops queries costs glibc's timeout (5 s a try)
per name; in waves, more. Here each name gets its own daemon thread and the caller waits once, at most
:data:`LOOKUP_BUDGET_SECONDS`: a name with no answer by then counts as one that did not resolve (the
launch goes on with a warning, as for a failed lookup). getaddrinfo cannot be cancelled, so a late
thread is left to finish on its own and its answer is ignored.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Union

from ansible_collections.flodl.cluster.plugins.module_utils.name_resolution import Resolver, is_ip_literal

# The whole wait for every name of a run, in seconds: an /etc/hosts or a healthy DNS answers in
# milliseconds, and one dropped query already costs glibc 5 s.
LOOKUP_BUDGET_SECONDS = 2.0

# A name's addresses (a list of str), or the exception its lookup raised.
Answer = Union[list, BaseException]


def run_names(cluster: Mapping[str, Any]) -> list[str]:
    """The names the launch step looks up: ``controller.host`` and each worker's ``host`` (no IP literal)."""
    names = [str((cluster.get("controller") or {}).get("host") or "")]
    names += [str(w.get("host") or "") for w in cluster.get("workers") or []]
    return sorted({n for n in names if n and not is_ip_literal(n)})


def look_up_all(
    names: Iterable[str],
    resolver: Resolver,
    budget: float = LOOKUP_BUDGET_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Answer]:
    """name -> its addresses, or the exception its lookup raised; names still pending at the deadline are absent."""
    answers: dict[str, Answer] = {}
    lock = threading.Lock()
    done = threading.Condition(lock)
    wanted = list(dict.fromkeys(names))

    def one(name: str) -> None:
        try:
            found: Answer = list(resolver(name))
        except BaseException as exc:  # noqa: BLE001  (kept as this name's answer)
            found = exc
        with done:
            answers[name] = found
            done.notify_all()

    for name in wanted:
        threading.Thread(target=one, args=(name,), name=f"flodl-lookup-{name}", daemon=True).start()
    deadline = clock() + budget
    with done:
        while len(answers) < len(wanted):
            left = deadline - clock()
            if left <= 0:
                break
            done.wait(left)
        return dict(answers)


def answered(answers: Mapping[str, Answer], budget: float = LOOKUP_BUDGET_SECONDS) -> Resolver:
    """A resolver that only reads ``answers``: a name without one did not answer in time (an OSError)."""

    def resolve(name: str) -> list[str]:
        if name not in answers:
            raise OSError(f"no answer within {budget:g}s (names are looked up all at once, with one bounded wait)")
        found = answers[name]
        if isinstance(found, BaseException):
            raise found if isinstance(found, (OSError, UnicodeError)) else OSError(str(found))
        return list(found)

    return resolve


def bounded_resolver(cluster: Mapping[str, Any], resolver: Resolver,
                     budget: float = LOOKUP_BUDGET_SECONDS) -> Resolver:
    """Look up every name of ``cluster`` now, at most ``budget`` seconds in all; the answers as a resolver."""
    return answered(look_up_all(run_names(cluster), resolver, budget), budget)
