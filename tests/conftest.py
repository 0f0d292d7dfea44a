"""Make the checkout importable as ``ansible_collections.flodl.cluster``.

Unit tests import the pure module_utils the way Ansible does at run time.
A symlink farm under ``.cache/`` keeps the repository root as the
collection root without copying anything.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
_FARM = REPO_ROOT / ".cache" / "collections"
_LINK = _FARM / "ansible_collections" / "flodl" / "cluster"


def _ensure_farm() -> None:
    _LINK.parent.mkdir(parents=True, exist_ok=True)
    if not _LINK.is_symlink():
        try:
            _LINK.symlink_to(REPO_ROOT, target_is_directory=True)
        except FileExistsError:  # raced by a parallel pytest run
            pass


_ensure_farm()
if str(_FARM) not in sys.path:
    sys.path.insert(0, str(_FARM))
os.environ.setdefault("FLODL_CLUSTER_REPO_ROOT", str(REPO_ROOT))
