"""When the launch rides the probe's ssh masters (plugin_utils._launch.sshreuse_io), on the recorded run_launcher case.

The directory is real (0700, under the temp dir); its watcher is a real process that ends once the
directory is gone, which each test sees to.
"""
from __future__ import annotations

import os
import shutil
import stat

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._ssh import sshreuse
from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import sshreuse_io
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import read_run

from .conftest import make_action

ACTION = "run_launcher"


@pytest.fixture
def launch(case, monkeypatch):
    for name in [n for n in os.environ if n.startswith("FLODL_INTERNAL")]:
        monkeypatch.delenv(name)  # no launcher's recursion guard around this test run
    loaded = case("runs_locally")

    def make(**task_vars):
        loaded.task_vars.update(task_vars)
        action = make_action(ACTION, loaded)
        return action, loaded.task_vars, read_run(action, loaded.task_vars, ["launch"], connections=False)
    return make


def test_an_attached_native_launch_with_remote_workers_rides_the_masters(launch):
    action, task_vars, ctx = launch()
    assert sshreuse_io.reuse_wanted(action, task_vars, ctx, ["preflight", "launch"]) is True
    assert sshreuse_io.reuse_wanted(action, task_vars, ctx, ["preflight"]) is False  # no launch follows


@pytest.mark.parametrize("task_vars", [
    {"flodl_ssh_reuse": False},
    {"flodl_launch_detach": True},  # a detached launcher outlives the masters
    {"flodl_launch_docker": "cuda"},  # a launcher in a container sees no socket here
    {"flodl_launch_docker": True},  # names no service: the launch phase reports it
])
def test_reuse_is_off_when_the_launcher_could_not_use_the_masters(launch, task_vars):
    action, task_vars, ctx = launch(**task_vars)
    assert sshreuse_io.reuse_wanted(action, task_vars, ctx, ["launch"]) is False
    assert sshreuse_io.reuse_dir_for(action, task_vars, ctx, ["launch"]) is None


def test_the_run_directory_is_private_short_enough_and_handed_to_the_launch(launch):
    action, task_vars, ctx = launch()
    made = sshreuse_io.reuse_dir_for(action, task_vars, ctx, ["launch"])
    assert made is not None
    try:
        assert os.path.basename(made).startswith(sshreuse.DIR_PREFIX) and sshreuse.dir_fits(made)
        assert stat.S_IMODE(os.stat(made).st_mode) == 0o700
        expected = sshreuse_io.expected_dir()
        assert expected is not None and len(expected) == len(made)  # sized before contact, same length
        assert sshreuse_io.masters_for_launch(action, ctx, {sshreuse_io.RESULT_KEY: made}, False) == made
        assert sshreuse_io.masters_for_launch(action, ctx, {sshreuse_io.RESULT_KEY: made}, True) is None
        assert not os.path.exists(made)  # not used under the recursion guard: closed and removed
    finally:
        shutil.rmtree(made, ignore_errors=True)  # its watcher then ends by itself


def test_no_masters_without_a_preflight_directory(launch, tmp_path):
    action, _task_vars, ctx = launch()
    assert sshreuse_io.masters_for_launch(action, ctx, None, False) is None
    assert sshreuse_io.masters_for_launch(action, ctx, {sshreuse_io.RESULT_KEY: str(tmp_path / "gone")},
                                          False) is None
