# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prebuild planning: one libtorch-linked binary per remote (host, variant).

Pure functions only (no process, no filesystem): the plan, built from the paths,
commands and envelope entries of prebuild_layout. Failure reports live in
prebuild_failures; build_runner executes a plan on the build host.

Dedupe (not in fdl-cli): hosts sharing a variant need the same binary, so by
default a variant is built once, in the target dir of its first host, and the
other hosts get that binary linked into their own
``target/cluster/<host>/<slug>/release/<cmd>``. The envelope therefore keeps
fdl-cli's per-host layout (and the launcher's per-host ``pkill`` pattern).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.flodl.cluster.plugins.module_utils._run.prebuild_layout import (
    ENVELOPE_FILE_REL,
    LOG_NAME,
    build_env,
    cargo_build_command,
    controller_variant_dir,
    docker_build_command,
    envelope_entry,
    normalise_cmd_dir,
    path_under,
    root_path,
    target_subdir,
)
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.variants import variant_feature


class PrebuildError(ValueError):
    """The build inputs themselves are unusable (not a per-host build failure)."""


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
        return path_under(self.project_dir or self.project_root, ENVELOPE_FILE_REL)

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
    target_dir = path_under(checkout, target_rel)
    if docker_service:
        command = docker_build_command(docker_service, cmd, cmd_dir, target_rel, feature)
        cwd = root_path(checkout)
    else:
        command = cargo_build_command(cmd, feature)
        cwd = path_under(checkout, cmd_dir)
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
        target_dir = path_under(project_dir or project_root, rel)
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
        project_root=root_path(project_root),
        cmd=cmd,
        cmd_dir=cmd_dir,
        docker_service=docker_service,
        dedupe=dedupe,
        targets=targets,
        steps=steps,
        built_by=built_by,
        project_dir=root_path(project_dir or project_root),
    )
