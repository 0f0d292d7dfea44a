"""libtorch variant naming (docs/launcher-contract.md §4) and ports of the seed's prebuild.rs tests."""
from __future__ import annotations

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._cluster import variants as v
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.variants import (
    arch_slug,
    classify_variant,
    cuda_build_env,
    cuda_version_from_arch,
    runtime_ld_library_path,
    variant_basename,
    variant_feature,
    variant_vendor,
)

# ---------------------------------------------------------------- §4 table


@pytest.mark.parametrize(
    "arch,klass,vendor,feature",
    [
        ("cpu", v.CPU, v.CPU, ""),
        ("precompiled/cpu", v.CPU, v.CPU, ""),
        ("cpu-foo", v.CPU, v.CPU, ""),
        ("precompiled/cpu-aarch64", v.CPU, v.CPU, ""),
        ("cu128", v.NVIDIA, v.NVIDIA, "cuda"),
        ("precompiled/cu128", v.NVIDIA, v.NVIDIA, "cuda"),
        ("precompiled/cu126-pt27", v.NVIDIA, v.NVIDIA, "cuda"),
        ("builds/sm61-sm120", v.NVIDIA, v.NVIDIA, "cuda"),
        ("builds/sm80", v.NVIDIA, v.NVIDIA, "cuda"),
        ("precompiled/rocm70", v.AMD, v.AMD, "rocm"),
        ("precompiled/rocm63", v.AMD, v.AMD, "rocm"),
        ("builds/gfx1030-gfx1100", v.AMD, v.AMD, "rocm"),
        ("builds/gfx942", v.AMD, v.AMD, "rocm"),
        # unknown names: warn-and-assume NVIDIA
        ("builds/mybuild", v.UNKNOWN, v.NVIDIA, "cuda"),
        ("builds/gfx", v.UNKNOWN, v.NVIDIA, "cuda"),
        ("gfx", v.UNKNOWN, v.NVIDIA, "cuda"),
        ("", v.UNKNOWN, v.NVIDIA, "cuda"),
        ("cu", v.UNKNOWN, v.NVIDIA, "cuda"),
        ("sm", v.UNKNOWN, v.NVIDIA, "cuda"),
        ("rocm", v.UNKNOWN, v.NVIDIA, "cuda"),
        ("rocmx70", v.UNKNOWN, v.NVIDIA, "cuda"),
        ("cpux", v.UNKNOWN, v.NVIDIA, "cuda"),
        ("xcu128", v.UNKNOWN, v.NVIDIA, "cuda"),
        # case-sensitive
        ("CU128", v.UNKNOWN, v.NVIDIA, "cuda"),
        ("precompiled/ROCM70", v.UNKNOWN, v.NVIDIA, "cuda"),
        ("CPU", v.UNKNOWN, v.NVIDIA, "cuda"),
        ("GFX942", v.UNKNOWN, v.NVIDIA, "cuda"),
        # only the basename decides
        ("cpu/cu128", v.NVIDIA, v.NVIDIA, "cuda"),
        ("rocm70/cpu", v.CPU, v.CPU, ""),
        ("cu128/mybuild", v.UNKNOWN, v.NVIDIA, "cuda"),
        ("precompiled/rocm70/", v.AMD, v.AMD, "rocm"),
        # digits are ASCII only
        ("cu\u0661\u0662", v.UNKNOWN, v.NVIDIA, "cuda"),
    ],
)
def test_classification_table(arch, klass, vendor, feature):
    assert classify_variant(arch) == klass
    assert variant_vendor(arch) == vendor
    assert variant_feature(arch) == feature


@pytest.mark.parametrize(
    "arch,base",
    [
        ("precompiled/cu128", "cu128"),
        ("cu128", "cu128"),
        ("precompiled/cu128/", "cu128"),
        ("precompiled//cu128", "cu128"),
        ("./cpu", "cpu"),
        ("precompiled/cu128/.", "cu128"),
        ("precompiled/..", ""),
        ("", ""),
        ("/", ""),
        # POSIX Path::file_name: a backslash is an ordinary character
        ("builds\\rocm70", "builds\\rocm70"),
    ],
)
def test_basename_follows_rust_path_file_name(arch, base):
    assert variant_basename(arch) == base


def test_backslash_is_not_a_separator_for_classification():
    # On the Linux controller flodl reads `builds\rocm70` as one odd name.
    assert classify_variant("builds\\rocm70") == v.UNKNOWN
    assert variant_feature("builds\\rocm70") == "cuda"


# ------------------------------------------------- seed: features_from_arch


def test_features_from_arch_picks_the_variant_vendor():
    assert variant_feature("precompiled/cu128") == "cuda"
    assert variant_feature("builds/sm61-sm120") == "cuda"
    assert variant_feature("builds/sm80") == "cuda"
    assert variant_feature("precompiled/cpu") == ""


def test_features_from_arch_no_longer_calls_an_amd_variant_cuda():
    assert variant_feature("builds/gfx1030-gfx1100") == "rocm"
    assert variant_feature("precompiled/rocm63") == "rocm"


# ------------------------------------------------- seed: runtime_ld_path_*


def test_runtime_ld_path_is_libtorch_only_on_nvidia_and_cpu():
    assert runtime_ld_library_path("/home/me/rdl", "precompiled/cu128") == "/home/me/rdl/libtorch/precompiled/cu128/lib"
    assert runtime_ld_library_path("/home/me/rdl", "builds/sm61-sm120") == "/home/me/rdl/libtorch/builds/sm61-sm120/lib"
    assert runtime_ld_library_path("/home/me/rdl", "precompiled/cpu") == "/home/me/rdl/libtorch/precompiled/cpu/lib"


def test_runtime_ld_path_unknown_variant_is_libtorch_only():
    assert runtime_ld_library_path("/p", "builds/mybuild") == "/p/libtorch/builds/mybuild/lib"


@pytest.mark.parametrize("arch", ["precompiled/rocm70", "builds/gfx1030-gfx1100"])
def test_runtime_ld_path_puts_system_rocm_first_on_amd(arch):
    p = runtime_ld_library_path("/home/me/rdl", arch)
    assert p.startswith("/opt/rocm/lib:")
    assert p.endswith(f"/libtorch/{arch}/lib")
    assert p == f"/opt/rocm/lib:/home/me/rdl/libtorch/{arch}/lib"


def test_runtime_ld_path_rocm_is_the_literal_remote_path(monkeypatch):
    # The controller's own ROCm location must not leak into a remote value.
    monkeypatch.setenv("ROCM_PATH", "/usr/local/rocm-6.3")
    monkeypatch.setenv("HIP_PATH", "/opt/hip")
    assert runtime_ld_library_path("/srv", "precompiled/rocm63") == "/opt/rocm/lib:/srv/libtorch/precompiled/rocm63/lib"


def test_runtime_ld_path_normalizes_a_trailing_slash_in_worker_path():
    assert runtime_ld_library_path("/home/me/rdl/", "precompiled/cu128") == "/home/me/rdl/libtorch/precompiled/cu128/lib"
    assert runtime_ld_library_path("/home/me/rdl///", "precompiled/cu128") == "/home/me/rdl/libtorch/precompiled/cu128/lib"
    assert runtime_ld_library_path("/srv/", "precompiled/rocm70") == "/opt/rocm/lib:/srv/libtorch/precompiled/rocm70/lib"


# ------------------------------------------------- seed: cuda_version_from_arch_*


def test_cuda_version_from_arch_extracts_precompiled_version():
    assert cuda_version_from_arch("precompiled/cu128") == "12.8"
    assert cuda_version_from_arch("precompiled/cu126") == "12.6"
    assert cuda_version_from_arch("precompiled/cu118") == "11.8"
    assert cuda_version_from_arch("cu90") == "9.0"


def test_cuda_version_from_arch_none_for_source_builds_and_cpu():
    assert cuda_version_from_arch("builds/sm61-sm120") is None
    assert cuda_version_from_arch("builds/sm80") is None
    assert cuda_version_from_arch("precompiled/cpu") is None


@pytest.mark.parametrize("arch", ["precompiled/rocm70", "builds/gfx942", "cu", "cu1", "cu126-pt27", "cu12a", "CU128", "builds/mybuild", ""])
def test_cuda_version_none_for_anything_not_cu_digits(arch):
    # Rust: rest after `cu` must be >= 2 chars, all ASCII digits.
    assert cuda_version_from_arch(arch) is None


def test_cuda_build_env_appends_patch_and_derives_tag():
    assert cuda_build_env("precompiled/cu128") == {"CUDA_VERSION": "12.8.0", "CUDA_TAG": "12.8"}
    assert cuda_build_env("precompiled/cu118") == {"CUDA_VERSION": "11.8.0", "CUDA_TAG": "11.8"}


@pytest.mark.parametrize("arch", ["builds/sm80", "precompiled/rocm70", "precompiled/cpu", "builds/mybuild"])
def test_cuda_build_env_empty_without_a_cu_tag(arch):
    assert cuda_build_env(arch) == {}


@pytest.mark.parametrize("version, expected", [
    ("12", {"CUDA_VERSION": "12.0", "CUDA_TAG": "12.0"}),
    ("12.8.1", {"CUDA_VERSION": "12.8.1", "CUDA_TAG": "12.8"}),
    ("none", {}),
    (None, {}),
])
def test_cuda_vars_is_the_one_rule_for_build_and_launch(version, expected):
    assert v.cuda_vars(version) == expected


def test_lib_dirs_put_the_system_rocm_first_on_amd_only():
    assert v.lib_dirs("/p/lib", "builds/gfx1030") == ["/opt/rocm/lib", "/p/lib"]
    assert v.lib_dirs("/p/lib", "precompiled/rocm70", rocm_lib="/opt/rocm-7/lib/") == ["/opt/rocm-7/lib", "/p/lib"]
    assert v.lib_dirs("/p/lib", "precompiled/cu128") == ["/p/lib"]
    assert v.lib_dirs("/p/lib", "precompiled/cpu") == ["/p/lib"]


# ------------------------------------------------- seed: arch_slug_*


def test_arch_slug_folds_path_separators_only():
    assert arch_slug("precompiled/cu128") == "precompiled-cu128"
    assert arch_slug("precompiled/cu118") == "precompiled-cu118"
    assert arch_slug("precompiled/cu128") != arch_slug("precompiled/cu118")
    assert arch_slug("builds/sm61-sm120") == "builds-sm61-sm120"
    assert arch_slug("cpu") == "cpu"


def test_arch_slug_folds_backslashes_too():
    assert arch_slug("builds\\cu128") == "builds-cu128"
    assert arch_slug("a/b\\c.d_e") == "a-b-c.d_e"


# ---------------------------------------------------------------- GPU counts from a registered result


@pytest.mark.parametrize("value", [
    None, "2,0", [2, 0], {"nvidia": 2}, {"nvidia": True, "amd": 0}, {"nvidia": -1, "amd": 0},
    {"nvidia": 2.0, "amd": 0}, {"nvidia": "2", "amd": "0"},
])
def test_gpu_counts_come_back_only_as_two_whole_numbers(value):
    assert v.GpuCounts.from_dict(value) is None


def test_gpu_counts_round_trip():
    counts = v.GpuCounts(2, 1)
    assert v.GpuCounts.from_dict(counts.as_dict()) == counts and counts.of(v.AMD) == 1 and counts.of(v.NVIDIA) == 2
