# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A problem of a run as a value: whose it is, about which variable, what was found, why, the fix.

Producers return these; the text an operator reads is made once, by :meth:`Problem.text`, at the edge
(the action's result). Who a problem belongs to is a field (``worker``, the worker's index in the
cluster), never read back out of the text.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Place:
    """Where a problem is, as messages name it, with the worker and variable it is about."""

    text: str
    worker: int | None = None  # the worker's index in the cluster; None for the run itself
    variable: str = ""  # the inventory variable (or fdl key) the place is in

    def __str__(self) -> str:
        return self.text

    def sub(self, suffix: str) -> Place:
        """A place inside this one (``.port``, ``[0]``): same worker, same variable."""
        return Place(self.text + suffix, self.worker, self.variable)


@dataclass(frozen=True)
class Problem:
    """One problem; ``where`` empty when ``finding`` is already worded with its place."""

    where: str
    finding: str
    fix: str = ""
    consequence: str = ""
    worker: int | None = None
    variable: str = ""

    def text(self) -> str:
        head = f"{self.where}: {self.finding}" if self.where else self.finding
        return head + (f"; {self.consequence}" if self.consequence else "") + (f"; {self.fix}" if self.fix else "")


def at(place: Place, finding: str, fix: str = "") -> Problem:
    """A problem at ``place``."""
    return Problem(str(place), finding, fix, worker=place.worker, variable=place.variable)


def worded(text: str, worker: int | None = None, variable: str = "") -> Problem:
    """A problem whose text was written whole elsewhere (module_utils._core.safety), owned by ``worker``."""
    return Problem("", text, worker=worker, variable=variable)


def run_level(texts: Iterable[str | None], variable: str = "") -> list[Problem]:
    """The run's own problems (no worker) from texts; empty ones dropped."""
    return [worded(t, None, variable) for t in texts if t]


def texts(problems: Iterable[Problem]) -> list[str]:
    """The operator's lines, in order."""
    return [p.text() for p in problems]


@dataclass(frozen=True)
class Naming:
    """How messages name a place: inventory variables or fdl keys."""

    fdl: bool = False

    def cluster(self, key: str) -> Place:
        if self.fdl:
            return Place(f"cluster.{key}", None, f"cluster.{key}")
        if key == "workers":
            return Place("cluster: group flodl_workers")
        return Place(f"cluster: flodl_cluster_{key}", None, f"flodl_cluster_{key}")

    def controller(self, key: str) -> Place:
        if self.fdl:
            return Place(f"cluster.controller.{key}", None, f"cluster.controller.{key}")
        return Place(f"controller: flodl_controller_{key}", None, f"flodl_controller_{key}")

    def worker(self, index: int, host: Any, key: str) -> Place:
        """Worker ``index``'s key ``key`` (the worker itself when ``key`` is empty); the place is the worker's."""
        if self.fdl:
            label = f"cluster.workers[{index}]"
            if isinstance(host, str):
                label += f" ({json.dumps(host)})"
            return Place(f"{label}.{key}" if key else label, index, key)
        shown = str(host).strip() if isinstance(host, str) and host.strip() else "?"
        if not key:
            return Place(f"host {shown} (worker {index})", index)
        return Place(f"host {shown} (worker {index}): flodl_{key}", index, f"flodl_{key}")

    def sub(self, place: Place, key: str) -> Place:
        """A key inside a map-valued place (``ssh.port``, ``env["X"]``)."""
        return place.sub(f".{key}")


INVENTORY = Naming(fdl=False)
FDL = Naming(fdl=True)
