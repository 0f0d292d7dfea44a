"""The controller's own CPU arch comes from the probe's arch part, run here with sh, not from Python."""
from __future__ import annotations

import os

from ansible_collections.flodl.cluster.plugins.plugin_utils._preflight import preflight_sweep as sweep


def test_the_controllers_arch_is_the_arch_part_run_here(stand_in_on_path) -> None:
    assert sweep.local_arch() == os.uname().machine
    stand_in_on_path("uname", "#!/bin/sh\necho riscv64\n")  # what sh finds first is what the workers' probe runs
    assert sweep.local_arch() == "riscv64"


def test_the_gpu_counts_here_share_one_runner_and_keep_their_words(stand_in_on_path, monkeypatch) -> None:
    """preflight's GPU text, the launch's GPU counts and every local probe part run through probe_here."""
    from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import launch_io
    from ansible_collections.flodl.cluster.plugins.plugin_utils._proc import probe_here, processes

    stand_in_on_path("nvidia-smi", "#!/bin/sh\nprintf '0\\n1\\n'\n")
    assert sweep.local_gpu_text().split()[-2] == "2"  # the AMD count is this machine's own
    counts = launch_io.local_gpu_counts()
    assert counts is not None and counts[0] == 2
    assert processes.run_sh("echo out; exit 3") == processes.LocalRun(3, "out\n")
    gone = processes.LocalRun(None, "", "no sh")
    monkeypatch.setattr(probe_here, "run_sh", lambda *_a, **_k: gone)  # the one local runner of every part
    assert sweep.local_gpu_text() == "could not run the GPU count: no sh"
    assert launch_io.local_gpu_counts() is None
    assert sweep.local_arch() == ""
