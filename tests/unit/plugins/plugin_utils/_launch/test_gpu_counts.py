"""The launch's GPU counts for ``local_devices: all`` workers preflight did not count: the workers' GPU part over
one ssh each, the controller's by the same part run here, read by the one probe parser."""
from __future__ import annotations

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.model import cluster_model
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.variants import GpuCounts
from ansible_collections.flodl.cluster.plugins.module_utils._run.run_model import RunSettings
from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import launch_io
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import RunContext

# A stand-in ssh that runs the remote command here with sh, as the worker's login would (its last argument).
SSH = '#!/bin/sh\nfor a; do last=$a; done\necho "$last" >> "$SSH_LOG"\nexec sh -c "$last"\n'
NVIDIA_SMI = "#!/bin/sh\nprintf '0\\n1\\n2\\n'\n"


def _ctx(tmp_path) -> RunContext:
    cluster = cluster_model({
        "controller": {"host": "10.0.0.1", "path": str(tmp_path)},
        "workers": [
            {"host": "ctl", "path": "/p", "local_devices": "all", "ssh": {"target": "ctl"}},
            {"host": "w1", "path": "/p", "local_devices": "all", "ssh": {"target": "10.0.0.2"}},
            {"host": "w2", "path": "/p", "local_devices": [0], "ssh": {"target": "10.0.0.3"}},
            {"host": "w3", "path": "/p", "local_devices": "all", "ssh": {"target": "10.0.0.4"}},
        ]})
    return RunContext(cluster=cluster, controller_identity="ctl", prebuild=False, net_timeout_scale=None,
                      cmd="train", cmd_dir="", fdl_env=None, build_host="localhost", launch_command=None,
                      project_dir=str(tmp_path), settings=RunSettings())


def test_uncounted_workers_run_the_gpu_part_and_the_counted_ones_are_kept(tmp_path, stand_in_on_path) -> None:
    log = stand_in_on_path("ssh", SSH)
    stand_in_on_path("nvidia-smi", NVIDIA_SMI)
    preflight = {"hosts": {"w3": {"gpus": {"nvidia": 1, "amd": 0}}}}
    counts, used_ssh = launch_io.gpu_counts(_ctx(tmp_path), preflight)
    assert used_ssh and counts["w3"] == GpuCounts(1, 0)  # preflight's count, no ssh for it
    assert counts["w1"][0] == 3 and counts["ctl"][0] == 3  # the part over ssh, and the same part run here
    sent = log.read_text().splitlines()
    assert len(sent) == 1 and sent[0].startswith("sh -c ") and "__FLODL_GPUS__" in sent[0]


def test_a_worker_whose_part_prints_no_count_is_named(tmp_path, stand_in_on_path) -> None:
    stand_in_on_path("ssh", '#!/bin/sh\necho "a login banner"\n')  # the part never ran there
    stand_in_on_path("nvidia-smi", NVIDIA_SMI)
    with pytest.raises(TopologyError) as err:
        launch_io.gpu_counts(_ctx(tmp_path), {"hosts": {"w3": {"gpus": {"nvidia": 1, "amd": 0}}}})
    assert err.value.problems == ["host w1: counting GPUs for `local_devices: all` failed: the GPU count printed nothing"]
