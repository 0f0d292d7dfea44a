# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The libtorch variables fdl-cli puts on the command it launches.

fdl-cli resolves one libtorch variant for the controller itself and exports
where it lives (``LIBTORCH_PATH``, ``LIBTORCH_HOST_PATH``), how to load it
(``LD_LIBRARY_PATH``), which cargo feature it needs (``FDL_GPU_FEATURE``)
and the CUDA toolkit it was built for (``CUDA_VERSION``/``CUDA_TAG``). The
controller's own rank and any native ``cargo run`` fail to build or load
without them, so a launch must carry them natively and under compose.

Resolution order: the worker entry whose ``host`` is this machine, when
``<worker.path>/libtorch/<arch>`` is a directory; else the variant named by
the checkout's ``libtorch/.active``. :func:`libtorch_env` is pure (file
contents and a directory test are injected); :func:`read_libtorch_env`
does the reads for an action.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ansible_collections.flodl.cluster.plugins.module_utils._core.constants import LIBTORCH_CPU_REL as CPU_PATH
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.model import Worker
from ansible_collections.flodl.cluster.plugins.module_utils._files.safe_reads import POINTER_MAX, read_capped_text
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.variants import (
    ROCM_LIB,
    cuda_vars,
    lib_dirs,
    variant_feature,
)

ACTIVE_FILE = "libtorch/.active"
CASE_VAR = "FDL_LIBTORCH_CASE"

DirExists = Callable[[str], bool]


@dataclass(frozen=True)
class Variant:
    """A resolved variant: its name (for the vendor), the host path and the libtorch directory."""

    name: str
    host_path: str
    libtorch_path: str
    source: str  # "worker" or "active"


def path_join(base: str, part: str) -> str:
    """Rust ``Path::join`` as displayed: an absolute part replaces, else one ``/`` between.

    No normalisation: ``/p`` + ``./libtorch/x`` stays ``/p/./libtorch/x``,
    which is the string upstream exports.
    """
    if part.startswith("/") or not base:
        return part
    return base + part if base.endswith("/") else f"{base}/{part}"


def resolve_variant(
    checkout: str,
    identity: str,
    workers: Sequence[Worker],
    active: str | None,
    dir_exists: DirExists,
) -> Variant | None:
    """The variant this machine uses, or ``None`` when neither source names one."""
    entry = next((w for w in workers if w.host == identity), None)
    if entry is not None and entry.arch:
        arch = entry.arch
        variant_dir = path_join(path_join(entry.path, "libtorch"), arch)
        if dir_exists(variant_dir):
            return Variant(name=arch, host_path=variant_dir, libtorch_path=variant_dir, source="worker")
    name = (active or "").strip()
    if not name:
        return None
    host_path = f"./libtorch/{name}"
    return Variant(name=name, host_path=host_path, libtorch_path=path_join(checkout, host_path), source="active")


def arch_cuda(arch_text: str | None) -> str | None:
    """The ``cuda=`` value of a ``.arch`` file (the last such line), untrimmed like upstream."""
    found = None
    for line in (arch_text or "").splitlines():
        if line.startswith("cuda="):
            found = line[len("cuda="):]
    return found


def gpu_feature(name: str) -> str:
    """The build's feature (:func:`variants.variant_feature`), except that a CPU variant gets ``cuda`` at launch."""
    return variant_feature(name) or "cuda"


def ld_library_path(libtorch_path: str, name: str, inherited: str | None, rocm_lib: str = ROCM_LIB) -> str:
    """libtorch's ``lib`` (:func:`variants.lib_dirs`: system ROCm first on AMD) ahead of the inherited value.

    Entries the inherited value already holds are not repeated.
    """
    own = lib_dirs(path_join(libtorch_path, "lib"), name, rocm_lib)
    current = inherited or ""
    if not current:
        return ":".join(own)
    present = current.split(":")
    if all(entry in present for entry in own):
        return current
    return ":".join(own) + ":" + current


def libtorch_env(
    checkout: str,
    identity: str,
    workers: Sequence[Worker],
    active: str | None,
    arch_text: str | None,
    dir_exists: DirExists,
    inherited_ld_library_path: str | None = None,
    rocm_lib: str = ROCM_LIB,
) -> dict[str, str]:
    """The libtorch variables for the launched process.

    ``checkout`` is the directory holding ``fdl.yml``; ``identity`` this
    machine's cluster name; ``active`` the content of ``libtorch/.active``
    (or ``None``); ``arch_text`` the resolved variant's ``.arch`` (or
    ``None``; see :func:`resolve_variant` for which directory). Only
    ``LIBTORCH_CPU_PATH`` is set when nothing resolves.
    """
    env = {"LIBTORCH_CPU_PATH": CPU_PATH}
    variant = resolve_variant(checkout, identity, workers, active, dir_exists)
    if variant is None:
        return env
    env["LIBTORCH_HOST_PATH"] = variant.host_path
    env["LIBTORCH_PATH"] = variant.libtorch_path
    env["LD_LIBRARY_PATH"] = ld_library_path(variant.libtorch_path, variant.name, inherited_ld_library_path, rocm_lib)
    env["FDL_GPU_FEATURE"] = gpu_feature(variant.name)
    env.update(cuda_vars(arch_cuda(arch_text)))
    return env


# --------------------------------------------------------------------------
# the reads, for an action running on the controller
# --------------------------------------------------------------------------


def _read_text(path: str) -> str | None:
    try:
        # Bounded: a FIFO or a huge file planted in the shared project reads as no pointer, at once.
        return read_capped_text(path, POINTER_MAX)
    except (OSError, UnicodeDecodeError):
        return None


def active_pointer(checkout: str, environ: Mapping[str, str]) -> str:
    """``libtorch/.active``, or ``libtorch/.active.<case>`` when ``FDL_LIBTORCH_CASE`` is set.

    A named case whose file is missing resolves nothing (no fallback to
    ``.active``), as in fdl-cli: the operator asked for that variant.
    """
    case = (environ.get(CASE_VAR) or "").strip()
    return path_join(checkout, f"{ACTIVE_FILE}.{case}" if case else ACTIVE_FILE)


def read_libtorch_env(
    checkout: str,
    identity: str,
    workers: Sequence[Worker],
    environ: Mapping[str, str],
) -> dict[str, str]:
    """:func:`libtorch_env` with the controller's files: the pointer, the variant's ``.arch``, ``isdir``."""
    active = _read_text(active_pointer(checkout, environ))
    variant = resolve_variant(checkout, identity, workers, active, os.path.isdir)
    arch_text = None
    if variant is not None:
        arch_dir = variant.libtorch_path if variant.source == "worker" else path_join(
            path_join(checkout, "libtorch"), variant.name
        )
        arch_text = _read_text(path_join(arch_dir, ".arch"))
    return libtorch_env(
        checkout, identity, workers, active, arch_text, os.path.isdir, environ.get("LD_LIBRARY_PATH")
    )
