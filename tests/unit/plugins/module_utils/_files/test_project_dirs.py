"""Never written through a link out of the project: the run lock, logs and build dirs are checked first.

The root of the target dirs is the checkout (flodl_project_dir), not flodl_controller_path: a checkout
elsewhere with no link must pass (issue 17), a real escaping link must not.
"""
from __future__ import annotations

import errno
import os

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._files import project_dirs as sf
from ansible_collections.flodl.cluster.plugins.module_utils._files.safe_files import UnsafePathError
from ansible_collections.flodl.cluster.plugins.module_utils._run.prebuild import plan_prebuild
from ansible_collections.flodl.cluster.plugins.module_utils._files.project_dirs import write_dir_problems
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import TopologyError
from ansible_collections.flodl.cluster.plugins.module_utils._prebuild import build_files
from ansible_collections.flodl.cluster.plugins.plugin_utils._host import runlock_io
from ansible_collections.flodl.cluster.plugins.plugin_utils._run.context import build_context


@pytest.fixture
def escaping(tmp_path):
    """(project, outside): ``<project>/target`` is a link to a directory outside the project."""
    project, outside = tmp_path / "proj", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    os.symlink(outside, project / "target")
    return project, outside


def test_make_dirs_under_creates_each_component(tmp_path):
    made = sf.make_dirs_under(str(tmp_path), "target/cluster/h2/cu128")
    assert made == str(tmp_path / "target/cluster/h2/cu128") and os.path.isdir(made)


def test_under_umask_000_the_directories_and_the_run_lock_are_not_group_or_world_writable(tmp_path):
    project = tmp_path / "new" / "proj"  # the root too is made here
    old = os.umask(0)
    try:
        sf.make_dirs_under(str(project), "target/cluster/h2/cu128")
        assert runlock_io.take_lock(str(project), "ctl", os.getpid()) == (None, [], True)
    finally:
        os.umask(old)
    made = [tmp_path / "new", project, project / "target", project / "target/cluster", project / "target/cluster/h2",
            project / "target/cluster/h2/cu128"]
    assert [os.stat(p).st_mode & 0o777 for p in made] == [0o755] * 6
    assert os.stat(project / "target/cluster/run.lock").st_mode & 0o777 == 0o644


def test_under_umask_000_launch_logs_and_run_records_are_private(tmp_path):
    from ansible_collections.flodl.cluster.plugins.module_utils._launch.detached import DetachedRun
    from ansible_collections.flodl.cluster.plugins.plugin_utils._launch import detached_io, launch_io

    project = tmp_path / "proj"
    project.mkdir()
    old = os.umask(0)
    try:
        sink = launch_io.open_launch_log(str(project / "target/cluster/logs"), "20261206-000000", lambda _m: None)
        sink.close()
        record = detached_io.write_record(str(project), DetachedRun("a" * 16, "localhost", 1, sink.path, "c", 1.0))
    finally:
        os.umask(old)
    modes = [os.stat(p).st_mode & 0o777 for p in (
        project / "target", project / "target/cluster", project / "target/cluster/logs", sink.path,
        os.path.dirname(record), record)]
    assert modes == [0o755, 0o755, 0o750, 0o640, 0o750, 0o640]


def test_make_dirs_under_refuses_a_link_out_and_creates_nothing_there(escaping):
    project, outside = escaping
    with pytest.raises(UnsafePathError) as err:
        sf.make_dirs_under(str(project), "target/cluster")
    assert f"{project}/target is a symbolic link to {outside}" in err.value.strerror
    assert "Remove the link" in err.value.strerror
    assert os.listdir(outside) == []


def test_make_dirs_under_allows_a_link_that_stays_inside(tmp_path):
    (tmp_path / "scratch").mkdir()
    os.symlink(tmp_path / "scratch", tmp_path / "target")
    sf.make_dirs_under(str(tmp_path), "target/cluster")
    assert os.path.isdir(tmp_path / "scratch" / "cluster")


def test_make_dirs_under_refuses_a_file_on_the_way(tmp_path):
    (tmp_path / "target").write_text("x")
    with pytest.raises(UnsafePathError, match="not a directory"):
        sf.make_dirs_under(str(tmp_path), "target/cluster")


def test_make_dirs_under_takes_relative_paths_only(tmp_path):
    for bad in ("/etc", "target/../../x"):
        with pytest.raises(ValueError):
            sf.make_dirs_under(str(tmp_path), bad)


def test_link_escape_problem_checks_without_creating(escaping, tmp_path):
    project, outside = escaping
    assert "outside the project" in sf.link_escape_problem(str(project), "target/cluster/h2")
    assert sf.link_escape_problem(str(tmp_path / "fresh"), "target/cluster") is None
    assert not (tmp_path / "fresh").exists()


def test_the_run_lock_is_not_written_through_a_link_out(escaping):
    project, outside = escaping
    with pytest.raises(UnsafePathError):
        runlock_io.take_lock(str(project), "ctl", os.getpid())
    assert os.listdir(outside) == []


def test_a_checkout_other_than_the_controller_path_is_not_refused(tmp_path):
    checkout, path = tmp_path / "checkout", tmp_path / "shared"
    (checkout / "target" / "cluster").mkdir(parents=True)
    path.mkdir()
    # controller.path holds only the libtorch variants: a link there is not the run's to check
    (path / "target").symlink_to(tmp_path)
    assert write_dir_problems(str(checkout), ["target/cluster/h2/cu128"]) == []


def test_an_escaping_link_in_the_checkout_is_refused(escaping, tmp_path):
    project, _outside = escaping
    found = write_dir_problems(str(project), ["target/cluster/h2/cu128"])
    assert found == [f"controller: {sf.link_escape_problem(str(project), 'target')}"]


def _context_vars(controller_path, checkout):
    return {
        "groups": {"all": ["h2"], "flodl_workers": ["h2"]},
        "hostvars": {"h2": {"flodl_path": "/srv/proj", "flodl_local_devices": [0, 1], "flodl_arch": "precompiled/cu128",
                            "flodl_nccl_socket_ifname": ""}},
        "inventory_hostname": "h2", "ansible_play_hosts_all": ["h2"],
        "flodl_controller_host": "10.0.0.1", "flodl_controller_path": str(controller_path),
        "flodl_project_dir": str(checkout), "flodl_cmd": "train",
    }


def test_build_context_refuses_an_escaping_target_before_contact(escaping, tmp_path, monkeypatch):
    monkeypatch.setenv("FLODL_HOST_NAME", "ctl")
    project, outside = escaping
    with pytest.raises(TopologyError) as err:
        build_context(_context_vars(tmp_path / "shared", project), None, ["preflight", "prebuild", "launch"])
    assert any(p.startswith(f"controller: {project}/target is a symbolic link") for p in err.value.problems)
    assert os.listdir(outside) == []


def test_build_context_accepts_a_checkout_elsewhere_without_links(tmp_path, monkeypatch):
    monkeypatch.setenv("FLODL_HOST_NAME", "ctl")
    (tmp_path / "checkout").mkdir()
    ctx = build_context(_context_vars(tmp_path / "shared", tmp_path / "checkout"), None,
                        ["preflight", "prebuild", "launch"])
    assert ctx.project_dir == str(tmp_path / "checkout")


def test_prebuild_module_checks_target_dirs_under_the_checkout(escaping, tmp_path):
    workers = [{"host": "h2", "path": "/srv/proj", "arch": "precompiled/cu128"}]
    shared = tmp_path / "shared"
    shared.mkdir()
    fine = tmp_path / "fine"
    fine.mkdir()
    plan = plan_prebuild(str(shared), "train", workers, project_dir=str(fine))
    assert build_files.link_escapes(plan, str(shared / "target/cluster/prebuild-envelope.json")) == []
    project, _outside = escaping
    plan = plan_prebuild(str(shared), "train", workers, project_dir=str(project))
    found = build_files.link_escapes(plan, str(shared / "target/cluster/prebuild-envelope.json"))
    assert len(found) == 1 and f"{project}/target is a symbolic link" in found[0]


def test_a_dangling_link_on_the_way_is_refused_and_nothing_is_made_at_its_target(tmp_path):
    os.symlink(tmp_path / "nowhere", tmp_path / "target")
    assert sf.link_escape_problem(str(tmp_path), "target/cluster") == (
        f"{tmp_path}/target is a dangling symbolic link; remove it, then run again")
    with pytest.raises(UnsafePathError, match="dangling symbolic link"):
        sf.make_dirs_under(str(tmp_path), "target/cluster")
    assert not os.path.lexists(tmp_path / "nowhere")


def test_a_component_that_cannot_be_looked_at_is_a_problem_when_checking_and_an_error_when_making(tmp_path):
    # A name longer than the file system takes (a hostile host or arch name): lstat fails, not with ENOENT.
    (tmp_path / "target").mkdir()
    rel = "target/" + "h" * 300
    assert sf.link_escape_problem(str(tmp_path), rel) == (
        f"{tmp_path}/{rel} cannot be checked (File name too long); fix its permissions, then run again")
    with pytest.raises(OSError) as err:
        sf.make_dirs_under(str(tmp_path), rel)
    assert err.value.errno == errno.ENAMETOOLONG
    assert os.listdir(tmp_path / "target") == []


def test_a_target_that_is_not_a_relative_path_is_left_to_the_validator(tmp_path):
    (tmp_path / "target" / "cluster").mkdir(parents=True)
    assert write_dir_problems(str(tmp_path), ["target/cluster/../../../etc", "/etc", "target/cluster/h2"]) == []
