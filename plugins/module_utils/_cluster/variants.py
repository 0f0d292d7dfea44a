# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""libtorch variant naming (docs/launcher-contract.md §4)."""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

CPU = "cpu"
NVIDIA = "nvidia"
AMD = "amd"
UNKNOWN = "unknown"


class GpuCounts(NamedTuple):
    """A host's GPUs by vendor, as the count script prints them (docs/launcher-contract.md §7a): one type
    from the probe's parse to the rank count and the launcher's environment."""

    nvidia: int
    amd: int

    def of(self, vendor: str) -> int:
        return self.amd if vendor == AMD else self.nvidia

    def as_dict(self) -> dict[str, int]:
        """The result and artifact shape: ``{"nvidia": n, "amd": a}``."""
        return {NVIDIA: self.nvidia, AMD: self.amd}

    @classmethod
    def from_dict(cls, value: Any) -> GpuCounts | None:
        """Back from :meth:`as_dict` (a registered result): None unless both counts are whole numbers."""
        if not isinstance(value, Mapping):
            return None
        found = [value.get(NVIDIA), value.get(AMD)]
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in found):
            return None
        return cls(found[0], found[1])

    @classmethod
    def one_rank(cls, vendor: str) -> GpuCounts:
        """One GPU of ``vendor`` (an AMD variant: AMD, anything else: NVIDIA)."""
        return cls(0, 1) if vendor == AMD else cls(1, 0)


# The system ROCm of the host a rank runs on (a remote path, never looked up here).
ROCM_LIB = "/opt/rocm/lib"

_NVIDIA_NAME = re.compile(r"(?:cu|sm)[0-9]")
_AMD_NAME = re.compile(r"(?:rocm|gfx)[0-9]")
_CUDA_TAG_NAME = re.compile(r"cu([0-9]{2,})")


def variant_basename(arch: str) -> str:
    """Last path segment of an ``arch`` value; only it decides the class.

    Same as Rust's ``Path::file_name`` on the (POSIX) controller: only ``/``
    separates, trailing slashes and ``.`` segments are ignored, and a path
    ending in ``..`` has no basename. A backslash is an ordinary character
    there, so ``builds\\rocm70`` is not an AMD name for flodl either.
    """
    parts = [p for p in (arch or "").split("/") if p not in ("", ".")]
    if not parts or parts[-1] == "..":
        return ""
    return parts[-1]


def classify_variant(arch: str) -> str:
    """``cpu``, ``nvidia``, ``amd`` or ``unknown`` (case-sensitive, like flodl)."""
    base = variant_basename(arch)
    if base == "cpu" or base.startswith("cpu-"):
        return CPU
    if _NVIDIA_NAME.match(base):
        return NVIDIA
    if _AMD_NAME.match(base):
        return AMD
    return UNKNOWN


def variant_vendor(arch: str) -> str:
    """The vendor a build targets: unknown names are treated as NVIDIA, as flodl does."""
    kind = classify_variant(arch)
    return NVIDIA if kind == UNKNOWN else kind


def variant_feature(arch: str) -> str:
    """cargo feature for the variant: ``cuda``, ``rocm`` or ``""`` for CPU."""
    return {CPU: "", AMD: "rocm"}.get(variant_vendor(arch), "cuda")


def cuda_version_from_arch(arch: str) -> str | None:
    """``cu128`` -> ``12.8``; ``None`` for anything that is not ``cu`` + digits."""
    match = _CUDA_TAG_NAME.fullmatch(variant_basename(arch))
    if not match:
        return None
    digits = match.group(1)
    return f"{digits[:-1]}.{digits[-1]}"


def cuda_vars(version: str | None) -> dict[str, str]:
    """``CUDA_VERSION`` (``.0`` added below two dots) and ``CUDA_TAG`` (its first two fields).

    ``{}`` for no version or ``none`` (a CPU variant's ``.arch``). The build
    image and the launched process both get their toolkit from this rule.
    """
    if version is None or version == "none":
        return {}
    full = version if version.count(".") >= 2 else f"{version}.0"
    return {"CUDA_VERSION": full, "CUDA_TAG": ".".join(full.split(".")[:2])}


def cuda_build_env(arch: str) -> dict[str, str]:
    """``CUDA_VERSION``/``CUDA_TAG`` for the build image, from a ``cu<digits>`` variant name, or ``{}``."""
    return cuda_vars(cuda_version_from_arch(arch))


def arch_slug(arch: str) -> str:
    """One path segment per variant, so each (host, variant) gets its own target dir."""
    return arch.replace("/", "-").replace("\\", "-")


def lib_dirs(libtorch_lib: str, arch: str, rocm_lib: str = ROCM_LIB) -> list[str]:
    """The directories a process of variant ``arch`` loads libtorch from, in order.

    On AMD the system ROCm comes first: libtorch-rocm bundles its own ROCm
    userspace, and when that copy wins over the host's driver stack the
    process crashes at its first GPU op.
    """
    if variant_vendor(arch) == AMD:
        return [rocm_lib.rstrip("/") or "/", libtorch_lib]
    return [libtorch_lib]


def runtime_ld_library_path(worker_path: str, arch: str) -> str:
    """``LD_LIBRARY_PATH`` a rank needs on its own host (:func:`lib_dirs` of its variant's ``lib``)."""
    return ":".join(lib_dirs(f"{worker_path.rstrip('/')}/libtorch/{arch}/lib", arch))
