"""The controller's own CPU arch comes from the probe's arch part, run here with sh, not from Python."""
from __future__ import annotations

import os

from ansible_collections.flodl.cluster.plugins.plugin_utils._preflight import preflight_sweep as sweep


def test_the_controllers_arch_is_the_arch_part_run_here(stand_in_on_path) -> None:
    assert sweep.local_arch() == os.uname().machine
    stand_in_on_path("uname", "#!/bin/sh\necho riscv64\n")  # what sh finds first is what the workers' probe runs
    assert sweep.local_arch() == "riscv64"
