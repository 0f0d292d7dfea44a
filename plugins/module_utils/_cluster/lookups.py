# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every name of the run looked up at once, with one bounded wait in total.

The launch step resolves ``controller.host`` and every worker's ``host`` on the controller (fdl-cli's
rules, name_resolution.resolve_host_to_ip). A resolver that drops queries costs glibc's timeout (5 s a try)
per name; in waves, more. Here each name gets its own daemon thread and the caller waits once, at most
:data:`LOOKUP_BUDGET_SECONDS`: a name with no answer by then counts as one that did not resolve (the
launch goes on with a warning, as for a failed lookup). getaddrinfo cannot be cancelled, so a late
thread is left to finish on its own and its answer is ignored. The launch step starts the lookups as soon
as it has read the run (``start_lookups``), so they run beside its other work.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from typing import Union

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.name_resolution import Resolver, is_ip_literal

# The whole wait for every name of a run, in seconds: an /etc/hosts or a healthy DNS answers in
# milliseconds, and one dropped query already costs glibc 5 s.
LOOKUP_BUDGET_SECONDS = 2.0

# A name's addresses (a list of str), or the exception its lookup raised.
Answer = Union[list, BaseException]


def run_names(hosts: Iterable[str]) -> list[str]:
    """The names the launch step looks up among ``hosts`` (``Cluster.hosts``): each once, no IP literal."""
    return sorted({n for n in hosts if n and not is_ip_literal(n)})


class PendingLookups:
    """Lookups started at once, each name in its own daemon thread; ``answers`` waits until every name has one
    or the deadline, counted from the start, has passed. The threads are started from a thread of their own:
    the caller goes on with its other work while they run."""

    def __init__(self, names: Iterable[str], resolver: Resolver, budget: float = LOOKUP_BUDGET_SECONDS) -> None:
        self.budget = budget
        self._deadline = time.monotonic() + budget
        self._wanted = list(dict.fromkeys(names))
        self._answers: dict[str, Answer] = {}
        self._done = threading.Condition(threading.Lock())
        if self._wanted:
            threading.Thread(target=self._start_all, args=(resolver,), name="flodl-lookups", daemon=True).start()

    def _start_all(self, resolver: Resolver) -> None:
        for name in self._wanted:
            threading.Thread(target=self._one, args=(name, resolver), name=f"flodl-lookup-{name}", daemon=True).start()

    def _one(self, name: str, resolver: Resolver) -> None:
        try:
            found: Answer = list(resolver(name))
        except BaseException as exc:  # noqa: BLE001  (kept as this name's answer)
            found = exc
        with self._done:
            self._answers[name] = found
            self._done.notify_all()

    def answers(self) -> dict[str, Answer]:
        """name -> its addresses, or the exception its lookup raised; names still pending at the deadline are absent."""
        with self._done:
            while len(self._answers) < len(self._wanted):
                left = self._deadline - time.monotonic()
                if left <= 0:
                    break
                self._done.wait(left)
            return dict(self._answers)

    def resolver(self) -> Resolver:
        """The answers (waited for) as a resolver."""
        return answered(self.answers(), self.budget)


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


def start_lookups(hosts: Iterable[str], resolver: Resolver,
                  budget: float = LOOKUP_BUDGET_SECONDS) -> PendingLookups:
    """Start looking up every name of ``hosts`` now; ``.resolver()`` later waits at most ``budget`` from now."""
    return PendingLookups(run_names(hosts), resolver, budget)
