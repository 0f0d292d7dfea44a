# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Why a gang playbook found no worker, told with the inventory sources it came from.

``prebuild``, ``launch`` and ``cluster_train`` run their first play on the controller's implicit
``localhost`` when group ``flodl_workers`` is empty or missing (a play of no hosts would be a green
run in which nothing was checked), and that play's first step refuses the run here.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._files.safe_reads import read_capped_text

PLUGIN_NAMES = ("flodl.cluster.fdl_cluster", "fdl_cluster")
_PLUGIN_LINE = re.compile(r"^\s*plugin\s*:\s*['\"]?([\w.]+)['\"]?\s*(?:#.*)?$", re.MULTILINE)
SOURCE_MAX = 64 * 1024


def is_fdl_cluster_source(source: str) -> bool:
    """True when ``source`` is an inventory file for the flodl.cluster.fdl_cluster plugin (read bounded)."""
    if not source.endswith((".yml", ".yaml")):
        return False
    try:
        text = read_capped_text(source, SOURCE_MAX)
    except (OSError, UnicodeDecodeError):
        return False
    return any(m.group(1) in PLUGIN_NAMES for m in _PLUGIN_LINE.finditer(text))


def empty_group_problem(sources: Any, phases: Sequence[str]) -> str:
    """``cluster: ...``: the run has no worker, why that fails it, and where to look."""
    listed = [str(s) for s in sources] if isinstance(sources, (list, tuple)) else []
    fdl = [s for s in listed if is_fdl_cluster_source(s)]
    what = " and ".join(p for p in ("prebuild", "launch") if p in phases)
    text = (f"cluster: group flodl_workers is empty or missing, so there is no worker to {what} for: a play "
            "with no host would pass without checking or starting anything. ")
    if fdl:
        text += (f"It comes from the flodl.cluster.fdl_cluster source {', '.join(fdl)}: look above for its "
                 "'Unable to parse' warning (a refused fdl file leaves the group empty; "
                 "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED=true makes that fatal), fix the fdl file it reads, "
                 "and check it with `ansible-inventory -i <source> --graph`")
    elif listed:
        text += (f"No host of flodl_workers came from the inventory source(s) {', '.join(listed)}: add one "
                 "inventory host per worker to group flodl_workers (under AWX, check the inventory source's "
                 "last sync), then run again")
    else:
        text += "No inventory source was given: pass -i <inventory> with one host per worker in group flodl_workers"
    return text
