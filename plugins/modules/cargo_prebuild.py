#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build one libtorch-linked binary per remote (host, variant) on the build host."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: cargo_prebuild
short_description: Build a flodl command's binary for every remote worker, per libtorch variant
version_added: "0.1.0"
description:
  - Runs C(cargo build --release --bin <cmd>) on the build host once per remote worker (or once per
    libtorch variant with O(dedupe)), each into its own cargo target dir
    C(<project_root>/target/cluster/<host>/<variant slug>), exactly as C(fdl @cluster <cmd>) does before
    fan-out. The shared project mount then delivers each binary to its worker, which runs it without a
    Rust toolchain.
  - B(Native mode) (O(docker_service) unset) runs C(cargo build --release [--features F] --bin <cmd>)
    through C(sh -c) in C(<project_root>/<cmd_dir>) with C(LIBTORCH_PATH) set to the variant directory and an
    absolute C(CARGO_TARGET_DIR).
  - B(Docker mode) (O(docker_service) set) runs
    C(docker compose run --rm <service> bash -c 'cd /workspace[/<cmd_dir>] && CARGO_TARGET_DIR=/workspace/<target>
    cargo build --release [--features F] --bin <cmd>') through C(sh -c) from O(project_root) with
    C(LIBTORCH_HOST_PATH) (the variant directory) and C(LIBTORCH_CPU_PATH=./libtorch/precompiled/cpu) exported.
    The compose file must mount the project root at C(/workspace) and C(${LIBTORCH_HOST_PATH}) as the libtorch
    the build links against.
  - Both modes export C(CUDA_VERSION) and C(CUDA_TAG) when the variant's basename is C(cuNNN) (C(cu128) gives
    C(12.8.0) and C(12.8)). The cargo feature comes from the variant name, C(cuda), C(rocm) or none for C(cpu).
    Every token of a command is quoted as fdl-cli quotes it.
  - The variant directory C(<project_root>/libtorch/<arch>) must hold a C(lib/) directory on the build host.
  - The first build runs alone (it warms the shared cargo registry), then every other build runs in parallel; when the
    first build's binary is already there (a rebuild, a no-op), all builds run in parallel at once.
    Every build runs to completion or to O(build_timeout); all failures are collected and reported in one message
    naming each host, its variant, the exact command, the tail of its output and the path of its full log
    (C(<target dir>/prebuild.log)).
  - Files in the (possibly shared) project are written without following symlinks - a planted symlink or hard link
    at a build log or the envelope file is refused, never written through - and build logs are created mode
    C(0640), never world-readable. A target dir that resolves outside the checkout (O(project_dir)) is refused.
  - Modes do not depend on the build host's umask. Every build runs under C(umask 022); the directories the
    module creates are C(0755), the envelope C(0644), the rank binary C(0755) (set after every build), and group
    and world write are removed from whatever an earlier build left in the target dir (files of another user,
    such as a container's root when the module is not root, excepted).
  - With O(dedupe), hosts that share a variant share one build, run in the target dir of the first of them; the
    binary is then hard-linked (copied across file systems) to C(target/cluster/<host>/<slug>/release/<cmd>) of
    every other host of the variant, on every run, so each host's envelope entry points at its own path.
  - On success returns the launcher's per-host envelope (C(FLODL_INTERNAL_PREBUILD_PER_HOST)) and writes it to
    O(envelope_file). A failed run removes that file.
  - Reports C(changed) only when a binary was (re)linked or written; a rebuild where cargo had nothing to do
    reports C(ok).
options:
  project_root:
    description:
      - The project root as the build host sees it (C(flodl_controller_path)). Target dirs, the variant
        directories C(libtorch/<arch>) and the envelope file are under it.
    type: path
    required: true
  project_dir:
    description:
      - The checkout holding C(fdl.yml) as the build host sees it (C(flodl_project_dir)), where fdl-cli runs its
        builds; their working directory and C(CARGO_TARGET_DIR) are under it. Defaults to O(project_root); the
        libtorch variants stay under O(project_root).
    type: path
  cmd:
    description: The fdl command name, which is also the cargo C(--bin) target.
    type: str
    required: true
  cmd_dir:
    description:
      - The command's directory relative to O(project_root) (C(flodl_cmd_dir)). Native builds run there, docker
        builds C(cd) to C(/workspace/<cmd_dir>), and it becomes the envelope's C(cwd_subpath).
    type: str
    default: ""
  docker_service:
    description:
      - The docker compose service that builds every host's binary (C(flodl_controller_docker)). Unset or empty
        means native builds.
    type: str
  dedupe:
    description:
      - Build each libtorch variant once and link the binary for the other hosts of that variant.
      - When V(false), every host gets its own build, as fdl-cli does.
    type: bool
    default: true
  workers:
    description:
      - The remote workers to build for, in inventory order (the first one's build runs alone first). The
        controller's own worker entry does not belong here.
    type: list
    elements: dict
    required: true
    suboptions:
      host:
        description: The worker's logical host name (C(flodl_host)); names its target dir and envelope key.
        type: str
        required: true
      path:
        description: The project checkout on that worker (C(flodl_path)); used for its runtime C(LD_LIBRARY_PATH).
        type: str
        required: true
      arch:
        description: The libtorch variant under C(libtorch/) (C(flodl_arch)), for example C(precompiled/cu128).
        type: str
  env:
    description:
      - Extra environment variables for every build (for example C(PATH) or C(CARGO_HOME)), applied on top of
        the build host's environment and below the variables this module sets.
      - Values must be strings; quote numbers in YAML.
    type: dict
    default: {}
  tail_lines:
    description: How many trailing output lines of a failed build the failure message and the result show.
    type: int
    default: 20
  envelope_file:
    description:
      - Where to write the envelope JSON on success, for a later standalone launch. Removed when a build fails or
        when there is no remote worker.
      - Defaults to C(<project_dir>/target/cluster/prebuild-envelope.json) (the checkout; O(project_root) when unset). An empty string disables the file.
      - Written atomically through an unpredictable temporary name; a symlink at this path is refused.
    type: str
  build_timeout:
    description:
      - Seconds one build may run. On expiry the build's whole process group (the shell, cargo, rustc, build
        scripts) gets SIGTERM, then SIGKILL after 10 seconds, and the build is reported as failed with
        C(build timed out after N s).
      - In docker mode this stops the C(docker compose run) client; the compose service should stop its
        container when its client goes.
      - The same stop (SIGTERM, SIGKILL after 10 seconds) comes at once when the module is killed or its ssh
        session to the build host closes (C(ansible-playbook) killed however), from a watcher process
        started before the first build.
    type: float
    default: 3600
attributes:
  check_mode:
    description: Can run in C(check_mode) and return changed status prediction without modifying target.
    support: full
    details: Builds nothing and writes nothing; returns per host the exact command, environment and target dir,
      the dedupe groups and the envelope a successful build would produce.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in C(check_mode)), when in diff mode.
    support: none
notes:
  - Delegate this module to the build host (C(flodl_build_host)); the role C(flodl.cluster.prebuild) does.
  - The build host must see the project at O(project_root); the workers see the same files at their C(path).
  - When C(cargo) is not on the build host's C(PATH) in native mode, C(~/.cargo/bin) is appended to it.
requirements:
  - Python 3.11 or later on the build host.
  - cargo on the build host (native mode), or Docker with the compose v2 plugin (docker mode).
  - GNU coreutils C(timeout) on the build host (bounds every build, see O(build_timeout)).
author:
  - flodl.cluster contributors (@flodl)
"""

EXAMPLES = r"""
- name: Build every remote worker of the inventory (arguments come from the run model)
  flodl.cluster.cargo_prebuild:
  delegate_to: "{{ flodl_build_host }}"
  run_once: true

- name: Build on the build host, in docker compose
  flodl.cluster.cargo_prebuild:
    project_root: /srv/proj
    cmd: train
    docker_service: cuda
    workers:
      - host: gpu-b
        path: /srv/proj
        arch: precompiled/cu128
      - host: gpu-c
        path: /data/proj
        arch: precompiled/rocm63
  delegate_to: buildbox
  register: build

- name: Native builds, one per host, with cargo from a non-default place
  flodl.cluster.cargo_prebuild:
    project_root: /srv/proj
    cmd: train
    cmd_dir: trainer
    dedupe: false
    env:
      PATH: "/opt/rust/bin:/usr/bin:/bin"
    workers:
      - host: gpu-b
        path: /srv/proj
        arch: precompiled/cu128
"""

RETURN = r"""
mode:
  description: C(native) or C(docker).
  returned: always
  type: str
  sample: docker
groups:
  description: The dedupe groups, one per build, in run order.
  returned: always
  type: list
  elements: dict
  sample: [{"arch": "precompiled/cu128", "built_by": "h1", "hosts": ["h1", "h3"]}]
builds:
  description:
    - One entry per build in run order (the first ran alone). Keys C(host), C(arch), C(hosts) (the hosts it
      serves), C(features), C(variant_dir), C(target_dir), C(binary), C(command), C(cwd), C(env), C(log), and
      after running C(status) (C(built), C(up to date), C(failed), C(not run)), C(rc), C(seconds), C(started),
      C(ended) (ISO 8601, UTC), C(changed), C(tail).
  returned: always
  type: list
  elements: dict
hosts:
  description:
    - Per worker host. C(arch), C(features), C(bin) (relative to the worker path), C(binary) and C(target_dir)
      (build-host paths), C(built_by) (the host whose build produced the binary), C(command), C(cwd) and C(env)
      of that build, C(log), C(status) (C(built), C(up to date), C(linked), C(failed), C(would build),
      C(would link)), and when run C(rc), C(seconds), C(started), C(ended), C(tail), C(changed).
  returned: always
  type: dict
  sample:
    h1:
      arch: precompiled/cu128
      bin: target/cluster/h1/precompiled-cu128/release/train
      built_by: h1
      command: cargo build --release --features cuda --bin train
      cwd: /srv/proj
      env:
        CARGO_TARGET_DIR: /srv/proj/target/cluster/h1/precompiled-cu128
        CUDA_TAG: "12.8"
        CUDA_VERSION: "12.8.0"
        LIBTORCH_PATH: /srv/proj/libtorch/precompiled/cu128
      status: built
      rc: 0
      changed: true
per_host:
  description:
    - One entry per worker (added by the action), keyed by inventory host, which M(flodl.cluster.worker_result)
      turns into that worker's own result. A built worker's entry is C(status), C(msg) and C(host), the key
      of its build in RV(hosts) (held once, not copied per entry); a skipped worker's has C(data).
    - Run by the playbooks (the action reads the run), a run refused as a whole passes this run-once task with
      RV(refused) and every worker's entry failed with the reason; a prebuild that fails as a whole (no failed
      host of its own) passes it with C(builds_failed) and every worker's entry failed with its message, so no
      launch starts and PLAY RECAP charges every worker rather than the one this task ran on.
  returned: when run by the playbooks
  type: dict
refused:
  description: The run was refused before any build; each worker's entry says why.
  returned: when refused
  type: bool
envelope:
  description: The launcher's per-host envelope. In check mode, the envelope a successful build would produce.
  returned: success
  type: dict
  sample: {"h1": {"bin": "target/cluster/h1/precompiled-cu128/release/train",
           "ld_library_path": "/srv/proj/libtorch/precompiled/cu128/lib"}}
envelope_json:
  description:
    - RV(envelope) as C(FLODL_INTERNAL_PREBUILD_PER_HOST) carries it, compact JSON with sorted keys.
    - An empty string when there is no remote worker (fdl-cli does not set the variable then).
  returned: success
  type: str
  sample: '{"h1":{"bin":"target/cluster/h1/precompiled-cu128/release/train","ld_library_path":"/srv/proj/libtorch/precompiled/cu128/lib"}}'
envelope_file:
  description: The file the envelope was written to (empty when disabled).
  returned: always
  type: str
failed_hosts:
  description: Hosts without a binary, in inventory order.
  returned: failure
  type: list
  elements: str
summary:
  description: One line per host saying what happened (or would happen in check mode).
  returned: always
  type: list
  elements: str
summary_rows:
  description:
    - The same per-host lines as data, problems first. C(state) is the line without the host's own paths and
      times; above 32 workers and without C(-v), the step prints healthy hosts folded by it, one line per state.
  returned: when the step planned builds
  type: list
  elements: dict
  contains:
    host: {description: The inventory host., type: str, returned: always}
    line: {description: The host's own summary line., type: str, returned: always}
    state: {description: What healthy hosts are folded by., type: str, returned: always}
    problem: {description: Whether the host cannot build or its build failed., type: bool, returned: always}
run_model_use:
  description: How this step got the run model (C(source), C(validations), C(connections_resolved)); see docs/architecture.md, One run model per run.
  returned: when the run was read
  type: dict
  sample: {source: flodl_preflight_run, validations: 0, connections_resolved: 0}
ansible_stats:
  description: >-
    The job artifact C(flodl_prebuild_result) (envelope, summary, failed_hosts) in the shape of M(ansible.builtin.set_stats)' result,
    which Ansible publishes as custom stats (AWX artifacts): no set_stats task runs after a step that passes.
  returned: when the step passes
  type: dict
"""


import os
import signal

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.flodl.cluster.plugins.module_utils._prebuild.build_runner import ARGUMENT_SPEC, build
from ansible_collections.flodl.cluster.plugins.module_utils._core.group_watch import start_channel_watch


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    # Run as a module on the build host: Ansible's death closes the ssh channel (our stdout) and
    # nothing else tells us. End at once then; the builds' watcher sees us go and stops their groups.
    start_channel_watch(1, lambda: os.kill(os.getpid(), signal.SIGKILL))
    result = build(module.params, module.check_mode)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
