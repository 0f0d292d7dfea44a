# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The launch's libtorch variables: expected values written out by hand from the resolution rules."""
from __future__ import annotations

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._cluster.model import cluster_model
from ansible_collections.flodl.cluster.plugins.module_utils._launch import libtorch_env as lt


def typed(*entries):
    """The run's typed workers (module_utils._cluster.model), as the launch step hands them on."""
    workers = [{"local_devices": [0], **e} for e in entries]
    return cluster_model({"controller": {"host": "c", "path": "/p"}, "workers": workers}).workers


WORKERS = typed(
    {"host": "ctl", "path": "/srv/proj", "arch": "precompiled/cu128"},
    {"host": "amd-box", "path": "/home/u/proj/", "arch": "precompiled/rocm70"},
    {"host": "bare", "path": "/srv/proj"},
)
ARCH_CU128 = "torch=2.8.0\ncuda=12.8\narchs=8.0 9.0\nsource=precompiled\n"


def exists(*dirs):
    return lambda path: path in dirs


def test_worker_entry_variant_when_its_directory_exists():
    env = lt.libtorch_env("/mnt/co", "ctl", WORKERS, "precompiled/cpu\n", ARCH_CU128,
                          exists("/srv/proj/libtorch/precompiled/cu128"))
    assert env == {
        "LIBTORCH_CPU_PATH": "./libtorch/precompiled/cpu",
        "LIBTORCH_HOST_PATH": "/srv/proj/libtorch/precompiled/cu128",
        "LIBTORCH_PATH": "/srv/proj/libtorch/precompiled/cu128",
        "LD_LIBRARY_PATH": "/srv/proj/libtorch/precompiled/cu128/lib",
        "FDL_GPU_FEATURE": "cuda",
        "CUDA_VERSION": "12.8.0",
        "CUDA_TAG": "12.8",
    }


def test_missing_worker_directory_falls_back_to_active_with_the_literal_dot_join():
    env = lt.libtorch_env("/mnt/co", "ctl", WORKERS, "builds/sm61-sm120\n", "cuda=12.6.3\n", exists())
    assert env == {
        "LIBTORCH_CPU_PATH": "./libtorch/precompiled/cpu",
        "LIBTORCH_HOST_PATH": "./libtorch/builds/sm61-sm120",
        "LIBTORCH_PATH": "/mnt/co/./libtorch/builds/sm61-sm120",
        "LD_LIBRARY_PATH": "/mnt/co/./libtorch/builds/sm61-sm120/lib",
        "FDL_GPU_FEATURE": "cuda",
        "CUDA_VERSION": "12.6.3",
        "CUDA_TAG": "12.6",
    }


def test_trailing_slash_checkout_and_worker_path():
    env = lt.libtorch_env("/mnt/co/", "nobody", WORKERS, "precompiled/cu126", None, exists())
    assert env["LIBTORCH_PATH"] == "/mnt/co/./libtorch/precompiled/cu126"
    env = lt.libtorch_env("/x", "amd-box", WORKERS, None, None, exists("/home/u/proj/libtorch/precompiled/rocm70"))
    assert env["LIBTORCH_HOST_PATH"] == "/home/u/proj/libtorch/precompiled/rocm70"


def test_rocm_puts_the_system_runtime_first():
    env = lt.libtorch_env("/x", "amd-box", WORKERS, None, "cuda=none\n",
                          exists("/home/u/proj/libtorch/precompiled/rocm70"))
    assert env["LD_LIBRARY_PATH"] == "/opt/rocm/lib:/home/u/proj/libtorch/precompiled/rocm70/lib"
    assert env["FDL_GPU_FEATURE"] == "rocm"
    assert "CUDA_VERSION" not in env and "CUDA_TAG" not in env


def test_nothing_resolves_only_the_cpu_path_and_no_feature():
    assert lt.libtorch_env("/x", "bare", WORKERS, None, ARCH_CU128, exists()) == {
        "LIBTORCH_CPU_PATH": "./libtorch/precompiled/cpu"
    }
    assert lt.libtorch_env("/x", "bare", WORKERS, "  \n", None, exists()) == {
        "LIBTORCH_CPU_PATH": "./libtorch/precompiled/cpu"
    }


def test_worker_without_arch_uses_active():
    env = lt.libtorch_env("/x", "bare", WORKERS, "precompiled/cpu", None, exists("/srv/proj/libtorch"))
    assert env["LIBTORCH_HOST_PATH"] == "./libtorch/precompiled/cpu"


@pytest.mark.parametrize("name", ["precompiled/cpu", "cpu-2.8", "mybuild", "builds/sm80"])
def test_cpu_and_unknown_variants_get_cuda(name):
    assert lt.libtorch_env("/x", "n", [], name, None, exists())["FDL_GPU_FEATURE"] == "cuda"


@pytest.mark.parametrize(
    "arch_text, expected",
    [
        ("cuda=12.8\n", {"CUDA_VERSION": "12.8.0", "CUDA_TAG": "12.8"}),
        ("cuda=12\n", {"CUDA_VERSION": "12.0", "CUDA_TAG": "12.0"}),
        ("cuda=12.8.1\n", {"CUDA_VERSION": "12.8.1", "CUDA_TAG": "12.8"}),
        ("cuda=11.8\r\ncuda=12.4\n", {"CUDA_VERSION": "12.4.0", "CUDA_TAG": "12.4"}),
        ("cuda=none\n", {}),
        ("torch=2.8.0\n", {}),
        (None, {}),
    ],
)
def test_cuda_vars_from_arch(arch_text, expected):
    env = lt.libtorch_env("/x", "n", [], "precompiled/cu128", arch_text, exists())
    assert {k: env[k] for k in ("CUDA_VERSION", "CUDA_TAG") if k in env} == expected


@pytest.mark.parametrize(
    "inherited, expected",
    [
        (None, "/p/lib"),
        ("", "/p/lib"),
        ("/usr/local/lib", "/p/lib:/usr/local/lib"),
        ("/usr/local/lib:/p/lib", "/usr/local/lib:/p/lib"),
    ],
)
def test_inherited_ld_library_path(inherited, expected):
    assert lt.ld_library_path("/p", "precompiled/cu128", inherited) == expected


def test_inherited_ld_library_path_rocm():
    assert lt.ld_library_path("/p", "rocm70", "/a") == "/opt/rocm/lib:/p/lib:/a"
    assert lt.ld_library_path("/p", "rocm70", "/opt/rocm/lib:/p/lib") == "/opt/rocm/lib:/p/lib"


def test_path_join_is_rusts():
    assert lt.path_join("/a", "b") == "/a/b"
    assert lt.path_join("/a/", "b") == "/a/b"
    assert lt.path_join("/a", "/abs") == "/abs"
    assert lt.path_join("", "b") == "b"


def test_active_pointer_honours_the_case_variable():
    assert lt.active_pointer("/co", {}) == "/co/libtorch/.active"
    assert lt.active_pointer("/co", {"FDL_LIBTORCH_CASE": " pascal "}) == "/co/libtorch/.active.pascal"


def test_read_libtorch_env_reads_the_checkout(tmp_path):
    variant = tmp_path / "libtorch" / "precompiled" / "cu126"
    variant.mkdir(parents=True)
    (variant / ".arch").write_text("cuda=12.6\n", encoding="utf-8")
    (tmp_path / "libtorch" / ".active").write_text("precompiled/cu126\n", encoding="utf-8")
    co = str(tmp_path)
    env = lt.read_libtorch_env(co, "me", [], {"LD_LIBRARY_PATH": "/opt/x"})
    assert env == {
        "LIBTORCH_CPU_PATH": "./libtorch/precompiled/cpu",
        "LIBTORCH_HOST_PATH": "./libtorch/precompiled/cu126",
        "LIBTORCH_PATH": co + "/./libtorch/precompiled/cu126",
        "LD_LIBRARY_PATH": co + "/./libtorch/precompiled/cu126/lib:/opt/x",
        "FDL_GPU_FEATURE": "cuda",
        "CUDA_VERSION": "12.6.0",
        "CUDA_TAG": "12.6",
    }
    # a worker entry for this machine whose directory exists wins over .active
    env = lt.read_libtorch_env("/elsewhere", "me", typed({"host": "me", "path": co, "arch": "precompiled/cu126"}), {})
    assert env["LIBTORCH_PATH"] == co + "/libtorch/precompiled/cu126"
    assert env["CUDA_TAG"] == "12.6"
    # a named case without its file resolves nothing
    assert lt.read_libtorch_env(co, "me", [], {"FDL_LIBTORCH_CASE": "gone"}) == {
        "LIBTORCH_CPU_PATH": "./libtorch/precompiled/cpu"
    }
