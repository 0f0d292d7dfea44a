# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The probe on this machine: the registry's parts an ``Ask`` turns on, run with the workers' own ``sh``
(:func:`processes.run_sh`) and read back by the one parser (module_utils._probe.preflight_probe).

The controller's arch, data path and GPU count, and the build host's target dir when the build host is this
machine, are so read by the same parts every other host runs.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from ansible_collections.flodl.cluster.plugins.module_utils._probe.preflight_probe import (
    ProbeOutput, parse_probe, probe_script)
from ansible_collections.flodl.cluster.plugins.module_utils._probe.probe_check import Armed, Ask
from ansible_collections.flodl.cluster.plugins.plugin_utils._proc.processes import run_sh


def probe_here(ask: Ask, checks: Sequence[Armed] = (),
               paths: Optional[Sequence[str]] = None) -> tuple[ProbeOutput, Optional[str]]:
    """What the parts printed here, parsed, and why the script could not run at all (None when it ran)."""
    ran = run_sh(probe_script(ask, checks, paths))
    return parse_probe(ran.stdout), ran.error
