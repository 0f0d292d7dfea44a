# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prebuild planning: one libtorch-linked binary per remote (host, variant).

Pure functions only (no process, no filesystem): the plan, the exact command
strings fdl-cli runs (docs/launcher-contract.md §3a step 5), the environment of each
build and the launcher's per-host envelope (§1a ``FLODL_INTERNAL_PREBUILD_PER_HOST``).
Failure reports live in prebuild_failures; build_runner executes a plan on the
build host.

Dedupe (not in fdl-cli): hosts sharing a variant need the same binary, so by
default a variant is built once, in the target dir of its first host, and the
other hosts get that binary linked into their own
``target/cluster/<host>/<slug>/release/<cmd>``. The envelope therefore keeps
fdl-cli's per-host layout (and the launcher's per-host ``pkill`` pattern).
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils.shell import posix_quote
from ansible_collections.flodl.cluster.plugins.module_utils.variants import (
    arch_slug,
    cuda_build_env,
    runtime_ld_library_path,
    variant_feature,
)

CONTAINER_ROOT = "/workspace"
LIBTORCH_CPU_REL = "./libtorch/precompiled/cpu"
TARGET_CLUSTER_REL = "target/cluster"
ENVELOPE_FILE_REL = f"{TARGET_CLUSTER_REL}/prebuild-envelope.json"
LOG_NAME = "prebuild.log"


class PrebuildError(ValueError):
    """The build inputs themselves are unusable (not a per-host build failure)."""


# --------------------------------------------------------------------------
# small path/command helpers
# --------------------------------------------------------------------------


def _root(project_root: str) -> str:
    stripped = project_root.rstrip("/")
    return stripped or "/"


def _under(root: str, rel: str) -> str:
    root = _root(root)
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
    return _under(project_root, f"libtorch/{arch}")


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


# --------------------------------------------------------------------------
# the plan
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class HostTarget:
    """One remote worker and where its binary lands (build-host paths)."""

    host: str
    path: str
    arch: str | None
    target_rel: str | None = None
    target_dir: str | None = None
    binary: str | None = None
    problem: str | None = None

    @property
    def buildable(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class BuildStep:
    """One ``cargo build``; serves ``hosts`` (its own host first)."""

    host: str
    arch: str
    hosts: tuple[str, ...]
    feature: str
    variant_dir: str
    target_rel: str
    target_dir: str
    binary: str
    command: str
    cwd: str
    env: dict[str, str]

    @property
    def log_path(self) -> str:
        return f"{self.target_dir}/{LOG_NAME}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "arch": self.arch,
            "hosts": list(self.hosts),
            "features": self.feature,
            "variant_dir": self.variant_dir,
            "target_dir": self.target_dir,
            "binary": self.binary,
            "command": self.command,
            "cwd": self.cwd,
            "env": dict(self.env),
            "log": self.log_path,
        }


@dataclass
class PrebuildPlan:
    project_root: str
    cmd: str
    cmd_dir: str
    docker_service: str | None
    dedupe: bool
    targets: list[HostTarget]
    steps: list[BuildStep]
    # host -> the host whose build it uses (itself when it builds)
    built_by: dict[str, str] = field(default_factory=dict)
    # the checkout the builds run in (controller.path unless told otherwise)
    project_dir: str = ""

    @property
    def mode(self) -> str:
        return "docker" if self.docker_service else "native"

    @property
    def envelope_file(self) -> str:
        # Beside the target dirs, in the checkout (controller.path only holds the libtorch variants).
        return _under(self.project_dir or self.project_root, ENVELOPE_FILE_REL)

    def step_for(self, host: str) -> BuildStep | None:
        owner = self.built_by.get(host)
        for step in self.steps:
            if step.host == owner:
                return step
        return None

    def groups(self) -> list[dict[str, Any]]:
        """The dedupe groups: which build serves which hosts."""
        return [{"arch": s.arch, "built_by": s.host, "hosts": list(s.hosts)} for s in self.steps]

    def envelope(self) -> dict[str, dict[str, str]]:
        """Envelope entries for every buildable host, keyed and sorted by host."""
        entries = {
            t.host: envelope_entry(t.path, t.arch, t.host, self.cmd, self.cmd_dir)
            for t in self.targets
            if t.buildable and t.arch
        }
        return dict(sorted(entries.items()))


def build_env(project_root: str, arch: str, target_dir: str, docker_service: str | None) -> dict[str, str]:
    """Variables exported to one build, on top of the build host's own environment."""
    variant_dir = controller_variant_dir(project_root, arch)
    if docker_service:
        env = {"LIBTORCH_HOST_PATH": variant_dir, "LIBTORCH_CPU_PATH": LIBTORCH_CPU_REL}
    else:
        env = {"LIBTORCH_PATH": variant_dir, "CARGO_TARGET_DIR": target_dir}
    env.update(cuda_build_env(arch))
    return env


def _make_step(
    project_root: str,
    cmd: str,
    cmd_dir: str,
    docker_service: str | None,
    host: str,
    arch: str,
    hosts: list[str],
    project_dir: str | None = None,
) -> BuildStep:
    # fdl-cli builds in the checkout; only the libtorch variant is found under controller.path.
    checkout = project_dir or project_root
    feature = variant_feature(arch)
    target_rel = target_subdir(host, arch)
    target_dir = _under(checkout, target_rel)
    if docker_service:
        command = docker_build_command(docker_service, cmd, cmd_dir, target_rel, feature)
        cwd = _root(checkout)
    else:
        command = cargo_build_command(cmd, feature)
        cwd = _under(checkout, cmd_dir)
    return BuildStep(
        host=host,
        arch=arch,
        hosts=tuple(hosts),
        feature=feature,
        variant_dir=controller_variant_dir(project_root, arch),
        target_rel=target_rel,
        target_dir=target_dir,
        binary=f"{target_dir}/release/{cmd}",
        command=command,
        cwd=cwd,
        env=build_env(project_root, arch, target_dir, docker_service),
    )


def plan_prebuild(
    project_root: str,
    cmd: str,
    workers: Iterable[Mapping[str, Any]],
    *,
    cmd_dir: str = "",
    docker_service: str | None = None,
    dedupe: bool = True,
    project_dir: str | None = None,
) -> PrebuildPlan:
    """The builds for ``workers`` (remote workers, in inventory order).

    ``project_dir`` is the checkout holding ``fdl.yml`` (default
    ``project_root``, i.e. ``controller.path``): builds run there and their
    target directories live under it; the libtorch variant is still
    ``<project_root>/libtorch/<arch>``.

    A worker without ``arch`` gets a per-host problem instead of a build. With
    ``dedupe`` the first host of each variant builds for all hosts of that
    variant; steps are in inventory order of their building host, so
    ``steps[0]`` is the one that runs alone first.
    """
    if not project_root or not str(project_root).strip():
        raise PrebuildError("project_root (flodl_controller_path) is required")
    if not cmd or not str(cmd).strip():
        raise PrebuildError("cmd (flodl_cmd, the cargo --bin target) is required")
    cmd_dir = normalise_cmd_dir(cmd_dir)
    docker_service = docker_service or None
    targets: list[HostTarget] = []
    seen: set[str] = set()
    for worker in workers:
        host = str(worker.get("host") or "")
        if not host.strip():
            raise PrebuildError("every worker needs a host name")
        if host in seen:
            raise PrebuildError(f"host {host} is listed twice")
        seen.add(host)
        path = str(worker.get("path") or "")
        arch = worker.get("arch")
        arch = str(arch) if arch is not None and str(arch).strip() else None
        if arch is None:
            targets.append(
                HostTarget(
                    host=host,
                    path=path,
                    arch=None,
                    problem="flodl_arch is not set: prebuild needs the libtorch variant under <path>/libtorch/ "
                    "(e.g. precompiled/cu128)",
                )
            )
            continue
        rel = target_subdir(host, arch)
        target_dir = _under(project_dir or project_root, rel)
        targets.append(
            HostTarget(
                host=host,
                path=path,
                arch=arch,
                target_rel=rel,
                target_dir=target_dir,
                binary=f"{target_dir}/release/{cmd}",
            )
        )

    built_by: dict[str, str] = {}
    # (building host, arch, hosts served) in inventory order of the building host
    order: list[tuple[str, str, list[str]]] = []
    owner_of: dict[str, int] = {}
    for target in targets:
        if target.arch is None or not target.buildable:
            continue
        if dedupe and target.arch in owner_of:
            index = owner_of[target.arch]
            order[index][2].append(target.host)
            built_by[target.host] = order[index][0]
            continue
        owner_of[target.arch] = len(order)
        built_by[target.host] = target.host
        order.append((target.host, target.arch, [target.host]))
    steps = [
        _make_step(project_root, cmd, cmd_dir, docker_service, host, arch, hosts, project_dir)
        for host, arch, hosts in order
    ]
    return PrebuildPlan(
        project_root=_root(project_root),
        cmd=cmd,
        cmd_dir=cmd_dir,
        docker_service=docker_service,
        dedupe=dedupe,
        targets=targets,
        steps=steps,
        built_by=built_by,
        project_dir=_root(project_dir or project_root),
    )
