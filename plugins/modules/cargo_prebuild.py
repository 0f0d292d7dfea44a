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
  description:
    - How this step got the run model. C(source) is C(built) when it read and validated the run itself, else the
      registered result it took the model from (C(flodl_preflight_run), C(flodl_topology_run), C(flodl_launch_env)).
    - C(validations) is 1 when it validated the run, 0 otherwise; C(connections_resolved) counts the workers whose
      connection it resolved through Ansible's ssh plugin (0 when the model came from an earlier step).
  returned: when the run was read
  type: dict
  sample: {source: flodl_preflight_run, validations: 0, connections_resolved: 0}
"""

import datetime
import errno
import os
import pwd
import shutil
import signal
import stat
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.flodl.cluster.plugins.module_utils.group_watch import (
    GroupWatch,
    start_channel_watch,
    start_group,
    start_watch,
)
from ansible_collections.flodl.cluster.plugins.module_utils.prebuild import (
    BuildStep,
    PrebuildError,
    PrebuildPlan,
    envelope_json,
    plan_prebuild,
)
from ansible_collections.flodl.cluster.plugins.module_utils.prebuild_failures import (
    HostFailure,
    exit_reason,
    format_failure,
    format_failures,
    missing_variant_reason,
    tail_lines,
    timeout_reason,
)
from ansible_collections.flodl.cluster.plugins.module_utils.project_dirs import link_escape_problem, make_dirs_under
from ansible_collections.flodl.cluster.plugins.module_utils.safe_files import atomic_write, open_log, temp_name
from ansible_collections.flodl.cluster.plugins.module_utils.safe_reads import ENVELOPE_MAX, read_capped_text

# After SIGTERM, how long a build's process group gets before SIGKILL.
KILL_GRACE_SECONDS = 10
DEFAULT_BUILD_TIMEOUT = 3600


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")


def _file_id(path: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _build_environ(extra: dict[str, str], step_env: dict[str, str], native: bool) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    env.update(step_env)
    if native and shutil.which("cargo", path=env.get("PATH", "")) is None:
        home = os.environ.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir
        rustup_bin = os.path.join(home, ".cargo", "bin")
        if os.path.isfile(os.path.join(rustup_bin, "cargo")):
            env["PATH"] = f"{env['PATH']}:{rustup_bin}" if env.get("PATH") else rustup_bin
    return env


def _os_error_text(exc: OSError) -> str:
    text = exc.strerror if isinstance(exc.strerror, str) else str(exc)
    return f"{exc.filename}: {text}" if exc.filename else text


def _run_bounded(argv: list[str], cwd: str, env: dict[str, str], log: Any, timeout: float,
                 watch: GroupWatch | None = None) -> int | None:
    """Run ``argv`` under GNU ``timeout``; None when it ran out of time.

    ``timeout`` puts the build in its own process group and signals the whole group on expiry
    (the shell, cargo, rustc, build scripts), then SIGKILLs it after the grace period. The group is
    its own session too, and ``watch`` (started before any build) stops it if this process dies.
    """
    tool = shutil.which("timeout", path=env.get("PATH") or os.defpath) or shutil.which("timeout")
    if tool is None:
        raise OSError(errno.ENOENT, "the build host has no `timeout` command (GNU coreutils), which bounds every "
                      "build; install coreutils there")
    started = time.monotonic()
    # Not module.run_command: builds run concurrently in threads, each
    # streaming straight into its own log file rather than into memory.
    proc = start_group([tool, "--signal=TERM", f"--kill-after={KILL_GRACE_SECONDS}", f"{timeout:g}", *argv],
                       cwd, env, log)
    if watch is not None:
        watch.add(proc.pid)
    try:
        # Backstop only: should `timeout` itself hang, stop waiting for it.
        rc = proc.wait(timeout=timeout + KILL_GRACE_SECONDS + 60)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        proc.wait()
        return None
    finally:
        if watch is not None:
            watch.remove(proc.pid)
    elapsed = time.monotonic() - started
    # 124: timed out; 137 (128 + KILL): still running after the grace period.
    if rc in (124, 137, -9) and elapsed >= timeout:
        return None
    return rc


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _run_step(
    step: BuildStep, extra_env: dict[str, str], native: bool, tail_count: int, timeout: float, project_root: str,
    watch: GroupWatch | None = None,
) -> dict[str, Any]:
    """Run one build to completion or its timeout, logging everything to ``<target dir>/prebuild.log``."""
    out = step.as_dict()
    before = _file_id(step.binary)
    started_mono = time.monotonic()
    out["started"] = _now()
    output = ""
    rc: int | None = 127
    log = None
    try:
        # Every component checked before the next is created: never through a link out of the checkout.
        make_dirs_under(project_root, step.target_rel)
        # Created without following links and never world-readable (flodl_safe_files).
        log = open_log(step.log_path, truncate=True)
        log.write(f"# flodl prebuild for {', '.join(step.hosts)} ({step.arch})\n")
        log.write(f"# started: {out['started']}\n# cwd: {step.cwd}\n")
        for key in sorted(step.env):
            log.write(f"# env: {key}={step.env[key]}\n")
        log.write(f"# command: {step.command}\n")
        log.flush()
        offset = log.tell()
        rc = _run_bounded(["sh", "-c", step.command], step.cwd, _build_environ(extra_env, step.env, native), log, timeout,
                          watch)
        log.flush()
        log.seek(offset)
        output = log.read()
        if rc is None:
            error = timeout_reason(timeout)
        elif rc != 0:
            error = exit_reason(rc)
        elif not os.path.isfile(step.binary):
            error = f"build exited 0 but did not produce {step.binary}"
        else:
            error = None
    except OSError as exc:
        rc = 127
        error = f"could not run the build: {_os_error_text(exc)}"
        output = output or error
    out["ended"] = _now()
    out["seconds"] = round(time.monotonic() - started_mono, 3)
    if log is not None:
        try:
            log.write(f"\n# ended: {out['ended']} rc={rc} ({out['seconds']}s){'' if error is None else ' ' + error}\n")
            log.close()
        except OSError:
            pass
    out["rc"] = rc
    out["tail"] = tail_lines(output, tail_count)
    out["error"] = error
    out["changed"] = error is None and _file_id(step.binary) != before
    if error is not None:
        out["status"] = "failed"
    else:
        out["status"] = "built" if out["changed"] else "up to date"
    return out


def _link_binary(source: str, dest: str) -> bool:
    """Make ``dest`` the same file as ``source`` (hard link, else copy); True when it changed."""
    if os.path.exists(dest):
        if os.path.samefile(source, dest):
            return False
        s, d = os.stat(source), os.stat(dest)
        if s.st_dev != d.st_dev and (s.st_size, s.st_mtime_ns) == (d.st_size, d.st_mtime_ns):
            return False
    directory, name = os.path.split(dest)
    os.makedirs(directory, exist_ok=True)
    if os.path.islink(dest):
        raise OSError(errno.ELOOP, f"{dest} is a symbolic link; remove it (and check who planted it), then run again")
    # link() never follows or overwrites; the name is unpredictable so nobody can plant it first.
    tmp = os.path.join(directory, temp_name(name))
    try:
        os.link(source, tmp)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EMLINK, errno.EACCES):
            raise
        with open(source, "rb") as src:
            atomic_write(directory, name, src, stat.S_IMODE(os.stat(source).st_mode))
        return True
    os.replace(tmp, dest)
    return True


def _host_entry(plan: PrebuildPlan, host: str) -> dict[str, Any]:
    target = next(t for t in plan.targets if t.host == host)
    entry: dict[str, Any] = {"host": host, "arch": target.arch, "path": target.path}
    if target.target_rel:
        entry.update(
            bin=f"{target.target_rel}/release/{plan.cmd}",
            binary=target.binary,
            target_dir=target.target_dir,
        )
    step = plan.step_for(host)
    if step is not None:
        entry.update(
            built_by=step.host,
            features=step.feature,
            command=step.command,
            cwd=step.cwd,
            env=dict(step.env),
            log=step.log_path,
        )
    return entry


def _env_text(env: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(env.items()))


# The module's arguments (also validated in-process when the build host is the controller itself).
ARGUMENT_SPEC: dict[str, Any] = {
    "project_root": {"type": "path", "required": True},
    "project_dir": {"type": "path"},
    "cmd": {"type": "str", "required": True},
    "cmd_dir": {"type": "str", "default": ""},
    "docker_service": {"type": "str"},
    "dedupe": {"type": "bool", "default": True},
    "workers": {
        "type": "list",
        "elements": "dict",
        "required": True,
        "options": {
            "host": {"type": "str", "required": True},
            "path": {"type": "str", "required": True},
            "arch": {"type": "str"},
        },
    },
    "env": {"type": "dict", "default": {}},
    "tail_lines": {"type": "int", "default": 20},
    "envelope_file": {"type": "str"},
    "build_timeout": {"type": "float", "default": DEFAULT_BUILD_TIMEOUT},
}


def _failed(msg: str, **result: Any) -> dict[str, Any]:
    return dict(result, failed=True, msg=msg)


def build(p: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    """Run the prebuild for validated arguments ``p``; the module result (``failed`` and ``msg`` on failure)."""
    if not p["build_timeout"] > 0:
        return _failed(
            msg=f"build_timeout must be a positive number of seconds, got {p['build_timeout']}; "
            f"use e.g. {DEFAULT_BUILD_TIMEOUT} for an hour"
        )
    bad_env = [k for k, v in (p["env"] or {}).items() if not isinstance(v, str)]
    if bad_env:
        return _failed(msg=f"env values must be strings; quote these in YAML: {', '.join(sorted(map(str, bad_env)))}")
    extra_env = {str(k): v for k, v in (p["env"] or {}).items()}
    try:
        plan = plan_prebuild(
            p["project_root"],
            p["cmd"],
            p["workers"],
            cmd_dir=p["cmd_dir"] or "",
            docker_service=p["docker_service"] or None,
            dedupe=p["dedupe"],
            project_dir=p["project_dir"] or None,
        )
    except PrebuildError as exc:
        return _failed(msg=f"flodl prebuild: {exc}")
    envelope_file = p["envelope_file"]
    if envelope_file is None:
        envelope_file = plan.envelope_file
    order = [t.host for t in plan.targets]
    hosts = {h: _host_entry(plan, h) for h in order}
    failures: dict[str, HostFailure] = {}
    runnable = _runnable_steps(plan, hosts, failures)
    result: dict[str, Any] = {
        "changed": False,
        "mode": plan.mode,
        "dedupe": plan.dedupe,
        "groups": plan.groups(),
        "envelope_file": envelope_file or "",
    }

    escapes = _link_escapes(plan, envelope_file)
    if escapes:
        # Before anything is written or removed (the envelope, a log, a target dir).
        return _failed(msg="flodl prebuild: " + "; ".join(escapes), **result)
    if check_mode:
        for step in runnable:
            for host in step.hosts:
                hosts[host]["status"] = "would build" if host == step.host else "would link"
        result.update(builds=[s.as_dict() for s in plan.steps], hosts=hosts, summary=_summary(plan, hosts, check=True),
                      summary_rows=_summary_rows(hosts, check=True))
        if failures:
            return _with_failures(result, order, failures)
        envelope = plan.envelope()
        result.update(envelope=envelope, envelope_json=envelope_json(envelope) if envelope else "")
        return result

    previous_envelope = _take_envelope(envelope_file)
    ran = _run_steps(runnable, plan, extra_env, p["tail_lines"], p["build_timeout"])
    builds = [ran.get(step.host) or dict(step.as_dict(), status="not run", changed=False) for step in plan.steps]
    changed = _settle(runnable, ran, hosts, failures)
    result.update(builds=builds, hosts=hosts, summary=_summary(plan, hosts, check=False),
                  summary_rows=_summary_rows(hosts, check=False))
    if failures:
        result["changed"] = changed or previous_envelope is not None
        built = sum(1 for b in builds if b.get("status") in ("built", "up to date"))
        return _with_failures(result, order, failures, built)

    envelope = plan.envelope()
    # No remote worker: fdl-cli leaves FLODL_INTERNAL_PREBUILD_PER_HOST unset, so hand over "" (= unset).
    text = envelope_json(envelope) if envelope else ""
    if envelope_file:
        if envelope:
            try:
                _write(envelope_file, text)
            except OSError as exc:
                return _failed(msg=f"flodl prebuild: every build succeeded but the envelope file could not be "
                               f"written: {_os_error_text(exc)}", **result)
            changed = changed or previous_envelope != text
        else:
            changed = changed or previous_envelope is not None
    result.update(changed=changed, envelope=envelope, envelope_json=text)
    return result


def _runnable_steps(plan: PrebuildPlan, hosts: dict[str, dict[str, Any]],
                    failures: dict[str, HostFailure]) -> list[BuildStep]:
    """The steps that can run; a host with a problem in its plan, or no variant directory, fails instead."""
    for target in plan.targets:
        if target.problem is not None:
            failures[target.host] = HostFailure(target.host, target.arch, target.problem)
            hosts[target.host]["status"] = "failed"
    runnable: list[BuildStep] = []
    for step in plan.steps:
        if os.path.isdir(os.path.join(step.variant_dir, "lib")):
            runnable.append(step)
            continue
        for host in step.hosts:
            failures[host] = HostFailure(host, step.arch, missing_variant_reason(step.variant_dir))
            hosts[host]["status"] = "failed"
    return runnable


def _with_failures(result: dict[str, Any], order: list[str], failures: dict[str, HostFailure],
                   built: int = 0) -> dict[str, Any]:
    """The failed module result: every failing host, in worker order."""
    failing = [h for h in order if h in failures]
    result.update(failed_hosts=failing, failures={h: format_failure(failures[h]) for h in failing})
    return _failed(msg=format_failures([failures[h] for h in failing], built), **result)


def _take_envelope(envelope_file: str) -> str | None:
    """The previous envelope's text (None when there was none); the file is removed until every build passed."""
    if not envelope_file:
        return None
    try:
        previous = read_capped_text(envelope_file, ENVELOPE_MAX, follow=False)
    except (OSError, UnicodeDecodeError):
        previous = None  # a FIFO or a huge file is not read: it is removed like any envelope
    _remove(envelope_file)
    return previous


def _run_steps(runnable: list[BuildStep], plan: PrebuildPlan, extra_env: dict[str, Any], tail_count: int,
               timeout: float) -> dict[str, dict[str, Any]]:
    """Every runnable build; host -> its outcome."""
    ran: dict[str, dict[str, Any]] = {}
    if not runnable:
        return ran
    native = plan.docker_service is None
    # Before any build: stops every build's group if this process dies (killed, or its parent is gone).
    watch = start_watch(KILL_GRACE_SECONDS, os.getppid())
    try:
        return _run_all(runnable, ran, lambda step: _run_step(
            # Target dirs live under the checkout (flodl_project_dir), which is their root, not controller.path.
            step, extra_env, native, tail_count, timeout, plan.project_dir or plan.project_root, watch))
    finally:
        if watch is not None:
            watch.done()


def _run_all(runnable: list[BuildStep], ran: dict[str, dict[str, Any]], run: Any) -> dict[str, dict[str, Any]]:
    """``run`` each step into ``ran``, in the order below."""
    # A first build fills the shared cargo registry, so it runs alone; once its binary exists (a rebuild,
    # a no-op) every build runs at once, as cargo's own locks keep concurrent builds safe.
    rest = runnable
    if not os.path.isfile(runnable[0].binary):
        first = run(runnable[0])
        ran[first["host"]] = first
        rest = runnable[1:]
    if rest:
        with ThreadPoolExecutor(max_workers=len(rest)) as pool:
            for out in pool.map(run, rest):
                ran[out["host"]] = out
    return ran


def _settle(runnable: list[BuildStep], ran: dict[str, dict[str, Any]], hosts: dict[str, dict[str, Any]],
            failures: dict[str, HostFailure]) -> bool:
    """Each host's entry from its step's outcome (hosts sharing a build get a link); whether anything changed."""
    changed = False
    for step in runnable:
        out = ran[step.host]
        for host in step.hosts:
            entry = hosts[host]
            entry.update({k: out[k] for k in ("rc", "seconds", "started", "ended", "tail")})
            if out["error"] is not None:
                entry["status"] = "failed"
                entry["changed"] = False
                if host == step.host:
                    failures[host] = HostFailure(host, step.arch, out["error"], command=step.command, cwd=step.cwd,
                                                 log=step.log_path, tail=tuple(out["tail"]))
                else:
                    failures[host] = HostFailure(
                        host, step.arch, f"shares the build of host {step.host} (same variant), which failed"
                    )
                continue
            if host == step.host:
                entry["status"] = out["status"]
                entry["changed"] = out["changed"]
            else:
                dest = hosts[host]["binary"]
                try:
                    linked = _link_binary(step.binary, dest)
                except OSError as exc:
                    failures[host] = HostFailure(host, step.arch, f"could not link {step.binary} to {dest}: {exc}")
                    entry["status"] = "failed"
                    entry["changed"] = False
                    continue
                entry["status"] = "linked"
                entry["changed"] = linked
            changed = changed or entry["changed"]
    return changed


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    # Run as a module on the build host: Ansible's death closes the ssh channel (our stdout) and
    # nothing else tells us. End at once then; the builds' watcher sees us go and stops their groups.
    start_channel_watch(1, lambda: os.kill(os.getpid(), signal.SIGKILL))
    result = build(module.params, module.check_mode)
    if result.pop("failed", False):
        module.fail_json(**result)
    module.exit_json(**result)


def _link_escapes(plan: PrebuildPlan, envelope_file: str) -> list[str]:
    """The directories the builds would create under a link out of their root (target dirs: the checkout)."""
    checkout = plan.project_dir or plan.project_root
    found = [link_escape_problem(checkout, t.target_rel) for t in plan.targets if t.target_rel]
    if envelope_file:
        directory = os.path.dirname(envelope_file)
        root = checkout.rstrip("/") or "/"  # the envelope lives beside the target dirs
        if directory.startswith(root + "/"):
            found.append(link_escape_problem(root, directory[len(root) + 1:]))
    return list(dict.fromkeys(p for p in found if p))


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _write(path: str, text: str) -> None:
    directory, name = os.path.split(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    atomic_write(directory, name, text, 0o644)


def _summary(plan: PrebuildPlan, hosts: dict[str, dict[str, Any]], *, check: bool) -> list[str]:
    """The header, then one line per host (the ones that cannot build or failed first)."""
    return [_summary_header(plan, hosts)] + [row["line"] for row in _summary_rows(hosts, check=check)]


def _summary_header(plan: PrebuildPlan, hosts: dict[str, dict[str, Any]]) -> str:
    return (f"{plan.mode} prebuild of --bin {plan.cmd} for {len(hosts)} remote host(s): "
            f"{len(plan.steps)} build(s), dedupe {'on' if plan.dedupe else 'off'}")


def _summary_rows(hosts: dict[str, dict[str, Any]], *, check: bool) -> list[dict[str, Any]]:
    """Per host: its line, its state without the host's own paths (what healthy hosts fold by), a problem or not."""
    ok = ("built", "up to date", "linked", "would build", "would link")
    rows = []
    for host, entry in sorted(hosts.items(), key=lambda item: item[1].get("status", "planned") in ok):
        head = f"{host} [{entry.get('arch') or 'no flodl_arch'}]"
        status = entry.get("status", "planned")
        state = f"[{entry.get('arch') or 'no flodl_arch'}] {status}"
        if check:
            if status == "would build":
                line = (f"{head}: would run in {entry['cwd']}: {_env_text(entry['env'])} sh -c {entry['command']!r} "
                        f"-> {entry['bin']}")
            elif status == "would link":
                line = f"{head}: would link the binary built for {entry['built_by']} -> {entry['bin']}"
            else:
                line = f"{head}: cannot build"
        elif status in ("built", "up to date"):
            line = f"{head}: {status} in {entry['seconds']}s -> {entry['bin']}"
        elif status == "linked":
            what = "linked" if entry.get("changed") else "already linked"
            line = f"{head}: {what} from the build of {entry['built_by']} -> {entry['bin']}"
            state = f"[{entry.get('arch') or 'no flodl_arch'}] {what} from another host's build"
        else:
            line = f"{head}: FAILED"
        rows.append({"host": host, "line": line, "state": state, "problem": status not in ok})
    return rows


if __name__ == "__main__":
    main()
