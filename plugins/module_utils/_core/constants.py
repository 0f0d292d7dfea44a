# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The names and paths more than one wing agrees on, defined once (a grep test keeps them single)."""
from __future__ import annotations

# The inventory group the playbooks run their workers from (the fdl_cluster inventory plugin fills it).
WORKERS_GROUP = "flodl_workers"
# flodl's own network-timeout multiplier (docs/launcher-contract.md §1a).
ENV_NET_TIMEOUT_SCALE = "FLODL_NET_TIMEOUT_SCALE"
# Where fdl's docker compose services mount the project (docs/launcher-contract.md §5).
CONTAINER_ROOT = "/workspace"
# fdl's CPU libtorch, relative to the project root (docs/launcher-contract.md §4).
LIBTORCH_CPU_REL = "./libtorch/precompiled/cpu"
