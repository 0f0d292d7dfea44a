# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a prebuild's files go and the exact strings of a build (pure functions).

The per-host target dirs and binaries, the libtorch variant as the build host sees it, the command
fdl-cli runs (docs/launcher-contract.md §3a step 5) with its environment, and the launcher's per-host
envelope entry and bytes (§1a ``FLODL_INTERNAL_PREBUILD_PER_HOST``). The plan (prebuild.py) puts them
together; launch and teardown read the same paths from here.
"""
from __future__ import annotations

import json
from collections.abc import Mapping

from ansible_collections.flodl.cluster.plugins.module_utils._core.constants import CONTAINER_ROOT, LIBTORCH_CPU_REL
from ansible_collections.flodl.cluster.plugins.module_utils._core.shell import posix_quote
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.variants import (
    arch_slug,
    cuda_build_env,
    runtime_ld_library_path,
)

TARGET_CLUSTER_REL = "target/cluster"
ENVELOPE_FILE_REL = f"{TARGET_CLUSTER_REL}/prebuild-envelope.json"
LOG_NAME = "prebuild.log"


def root_path(project_root: str) -> str:
    stripped = project_root.rstrip("/")
    return stripped or "/"


def path_under(root: str, rel: str) -> str:
    root = root_path(root)
    if not rel:
        return root
    return f"{root}{rel}" if root.endswith("/") else f"{root}/{rel}"


def normalise_cmd_dir(cmd_dir: str | None) -> str:
    """The command's directory relative to the project root, without edge slashes."""
    return (cmd_dir or "").strip().strip("/")


def target_subdir(host: str, arch: str) -> str:
    """``target/cluster/<host>/<slug>``: one cargo target dir per (host, variant)."""
    return f"{TARGET_CLUSTER_REL}/{host}/{arch_slug(arch)}"


def binary_subpath(host: str, arch: str, cmd: str) -> str:
    """The binary relative to a project checkout (the envelope's ``bin``)."""
    return f"{target_subdir(host, arch)}/release/{cmd}"


def controller_variant_dir(project_root: str, arch: str) -> str:
    """The variant as the build host sees it: ``<controller path>/libtorch/<arch>``."""
    return path_under(project_root, f"libtorch/{arch}")


def docker_build_command(service: str, cmd: str, cmd_dir: str, target_rel: str, feature: str) -> str:
    """``docker compose run --rm <svc> bash -c '<cd … && CARGO_TARGET_DIR=… cargo build …>'``."""
    sub = normalise_cmd_dir(cmd_dir)
    cwd = f"{CONTAINER_ROOT}/{sub}" if sub else CONTAINER_ROOT
    inner = f"cd {posix_quote(cwd)} && CARGO_TARGET_DIR={posix_quote(f'{CONTAINER_ROOT}/{target_rel}')} "
    inner += cargo_build_command(cmd, feature)
    return f"docker compose run --rm {posix_quote(service)} bash -c {posix_quote(inner)}"


def cargo_build_command(cmd: str, feature: str) -> str:
    """``cargo build --release [--features F] --bin <cmd>`` (native mode, and the docker inner command)."""
    features = f" --features {posix_quote(feature)}" if feature else ""
    return f"cargo build --release{features} --bin {posix_quote(cmd)}"


def envelope_entry(worker_path: str, arch: str, host: str, cmd: str, cmd_dir: str) -> dict[str, str]:
    """What the launcher needs to exec a prebuilt binary on ``host``; ``cwd_subpath`` only when set."""
    entry = {
        "bin": binary_subpath(host, arch, cmd),
        "ld_library_path": runtime_ld_library_path(worker_path, arch),
    }
    sub = normalise_cmd_dir(cmd_dir)
    if sub:
        entry["cwd_subpath"] = sub
    return entry


def envelope_json(envelope: Mapping[str, Mapping[str, str]]) -> str:
    """``FLODL_INTERNAL_PREBUILD_PER_HOST``: compact JSON, keys sorted at every level."""
    return json.dumps(envelope, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def build_env(project_root: str, arch: str, target_dir: str, docker_service: str | None) -> dict[str, str]:
    """Variables exported to one build, on top of the build host's own environment."""
    variant_dir = controller_variant_dir(project_root, arch)
    if docker_service:
        env = {"LIBTORCH_HOST_PATH": variant_dir, "LIBTORCH_CPU_PATH": LIBTORCH_CPU_REL}
    else:
        env = {"LIBTORCH_PATH": variant_dir, "CARGO_TARGET_DIR": target_dir}
    env.update(cuda_build_env(arch))
    return env
