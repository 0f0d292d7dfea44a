"""Fixtures for namespace ssh hosts (tests/harness/netns_cluster.py).

Imported with ``*`` by conftest.py, before that module defines ``need``:
so the skip/fail rule is repeated here (skip outside CI, fail under CI=true).

- ``netns_cluster_factory``: ``make(specs, user=None, shared_root=None) -> Cluster``;
  specs are ``HostSpec`` objects or plain host names.  Every cluster made is
  torn down at the end of the test.
- ``cluster3``: three healthy hosts h1, h2, h3 (root login).
- ``netns_shared_dir``: a directory outside /tmp seen by every host at the same
  path (create quirk paths in it before calling ``make``); removed afterwards.
"""
from __future__ import annotations

import os
import shutil
import sys
import uuid
from pathlib import Path
from typing import Callable, Iterator

import pytest

_HARNESS = Path(__file__).resolve().parent.parent / "harness"
if str(_HARNESS) not in sys.path:
    sys.path.insert(0, str(_HARNESS))

from ci_policy import need  # noqa: E402
from netns_cluster import SHARED_BASE, Cluster, HostSpec, require_root  # noqa: E402

__all__ = ["netns_cluster_factory", "cluster3", "netns_shared_dir"]


def _need_netns() -> None:
    reason = require_root()
    need(reason is None, reason or "")


@pytest.fixture
def netns_cluster_factory(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    _need_netns()
    made: list[Cluster] = []

    def make(specs: list[HostSpec | str], user: str | None = None,
             shared_root: Path | str | None = None) -> Cluster:
        hosts = [HostSpec(s) if isinstance(s, str) else s for s in specs]
        cluster = Cluster(hosts, tmp_path / f"netns-cluster-{len(made)}", user=user, shared_root=shared_root)
        made.append(cluster)
        cluster.up()
        return cluster

    yield make
    errors = []
    for cluster in reversed(made):
        try:
            cluster.down()
        except Exception as exc:  # noqa: BLE001  (tear every cluster down, then report)
            errors.append(exc)
    if errors:
        raise errors[0]


@pytest.fixture
def cluster3(netns_cluster_factory: Callable[..., Cluster]) -> Cluster:
    return netns_cluster_factory(["h1", "h2", "h3"])


@pytest.fixture
def netns_shared_dir() -> Iterator[Path]:
    SHARED_BASE.mkdir(parents=True, exist_ok=True)
    path = SHARED_BASE / f"{os.getpid()}-{uuid.uuid4().hex[:10]}"
    path.mkdir(mode=0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)
