#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done by the action plugin of the same name, on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: preflight_check
short_description: Check every flodl cluster host in one parallel round trip before any build
version_added: "0.1.0"
description:
  - Validates the whole run first (topology, reserved C(env) keys, C(flodl_net_timeout_scale) or
    C(FLODL_NET_TIMEOUT_SCALE), the variables the requested O(phases) need). An invalid run is refused here
    and no host is contacted; each worker's C(per_host) entry fails with its own problems and those of the
    run itself (a worker with none of either is skipped), so every worker fails in its own report.
  - Checks the controller's data path (C(flodl_controller_data_path), else the convention C(/flodl/data))
    locally, without ssh. A worker whose logical host is the controller's identity is covered by that check.
  - With C(flodl_launch_host) in a play that launches, the launch host is the controller. One ssh session
    there, in parallel with the workers' probes and with C(StrictHostKeyChecking=yes) after that host's own
    options, takes the run lock on its filesystem, checks the controller's data path and GPU count there,
    reads its identity and checks that the launcher there reaches every worker. The session holds the lock,
    renewing its lease every C(flodl_run_lock_ttl)/6 seconds, until ansible-playbook ends, then removes it. A
    refused lock, an unknown or changed key, or no answer fails every worker's entry.
  - Runs exactly one ssh per remote worker, all in parallel, with flodl's own ssh argv
    (C(-p), C(-l), C(-i), the user's C(-o) options, then C(-T -o BatchMode=yes -o ConnectTimeout=5)) and a
    POSIX C(sh) probe (no Python on the hosts). The probe reports whether the data path is a directory and
    readable, whether the worker's project path (C(flodl_path)) is a directory it can enter; when
    C(flodl_prebuild) is true also C(uname -m), the first line of C(ldd --version) and whether
    C(pkill) exists; when C(flodl_local_devices) is C(all), the NVIDIA and AMD GPU counts; when
    C(flodl_preflight_min_free_gb) (a task variable) is above 0, the free space on the data path's file system
    (the same C(df -Pk) part runs on the launch host, on this machine and for the build's target dir on the
    build host).
  - "Policy: a missing declared data path, an unreadable data path, a missing or unenterable project path, a
    CPU arch different from the build host's, musl libc, or C(all) devices with no usable GPU are errors. A
    missing convention data path, an empty C(uname -m), an absent C(pkill) and an unreachable host or failed
    probe are warnings; with C(flodl_preflight_require_all) true (a task variable, default false) an
    unreachable host or failed probe is an error of that host. A glibc banner is an advisory note."
  - A host's error does not fail this run-once task. It is filed in that host's C(per_host) entry, which the
    host's own report (M(flodl.cluster.worker_result)) turns into its failure. A problem of the run as a whole
    (the controller's own, its variables, the run lock) fails every worker's entry instead (RV(refused)), so
    PLAY RECAP shows every worker and charges none to the one this task ran on. This task fails only for a
    play with no worker at all.
  - The probe changes nothing, so it also runs in check mode.
  - "Each host's probe may take C(flodl_preflight_timeout) seconds (a task variable, default 30) from its own
    start before it counts as unreachable. At most 16 probes per controller CPU run at once, and at most
    C(flodl_preflight_max_parallel) (default 64); a larger sweep runs in rounds, bounded by one timeout per
    round to start them all. Both are read and checked with the run, before any host is contacted."
options:
  phases:
    description:
      - Phases of the run, to decide which variables are required. C(preflight) is always added.
    type: list
    elements: str
    choices: [preflight, prebuild, launch, teardown]
    default: [preflight]
  build_arch:
    description:
      - The build host's C(uname -m). Default is the controller's own arch when C(flodl_build_host) is the
        controller, else it is read over ssh from the build host (its inventory connection variables),
        in the same parallel sweep as the workers.
    type: str
attributes:
  check_mode:
    description: Check mode prints the plan and changes nothing.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
notes:
  - Runs on the controller (play on C(localhost)); the inventory group C(flodl_workers) lists the workers.
seealso:
  - module: flodl.cluster.topology
author:
  - flodl.cluster contributors (@flodl)
"""

EXAMPLES = r"""
- name: Check every host before the build
  flodl.cluster.preflight_check:
  register: flodl_preflight_run

- name: Check with the phases that will follow, and a known build host arch
  flodl.cluster.preflight_check:
    phases: [preflight, prebuild, launch]
    build_arch: aarch64
"""

RETURN = r"""
ok:
  description: No host has an error.
  returned: when the configuration is valid
  type: bool
check_mode:
  description: Whether the step ran in check mode.
  returned: when the configuration is valid
  type: bool
controller_identity:
  description:
    - The controller's cluster name (C(FLODL_HOST_NAME), else its hostname); with C(flodl_launch_host), the
      launch host's, as its session told it.
  returned: when the configuration is valid
  type: str
prebuild:
  description: Whether the ABI gate ran (C(flodl_prebuild)).
  returned: when the configuration is valid
  type: bool
build_host:
  description: C(flodl_build_host).
  returned: when the configuration is valid
  type: str
build_arch:
  description: The build host's CPU arch the workers were compared with, or null when unknown.
  returned: when the configuration is valid
  type: str
  sample: x86_64
controller:
  description:
    - The controller's own check (same keys as a host, plus C(controller=true)). With C(flodl_launch_host) it
      ran on the launch host (C(launch_host) names it), and its C(errors) include the run lock's refusal and a
      failed session (an unknown host key, no answer).
  returned: when the configuration is valid
  type: dict
launch_host:
  description:
    - What the launch step takes from the launch host's session, with C(flodl_launch_host) in a play that
      launches; C(host) (inventory name), C(identity) (exported as C(HOSTNAME)), C(gpus) (C({nvidia, amd}) or
      null).
  returned: when the launch host's session answered
  type: dict
  sample: {host: ctl, identity: ctl-box, gpus: {nvidia: 0, amd: 0}}
hosts:
  description:
    - Per worker of the play (inventory order), keyed by logical host name. C(status) is ok, warning, error or
      unreachable; C(arch), C(libc) (short), C(ldd) (banner line) and C(pkill) are null when not probed;
      C(data_path) has C(path), C(declared) and C(state) (ok, missing, unreadable, unknown);
      C(gpus) is C({nvidia, amd}) for C(local_devices=all) workers, else null; C(errors), C(warnings) and
      C(notes) are lists of messages; C(target) and C(probe_command) (the exact ssh command line, quoted)
      are set for probed hosts.
  returned: when the configuration is valid
  type: dict
  sample:
    h1:
      status: ok
      arch: x86_64
      libc: glibc 2.36
      pkill: present
      data_path: {path: /flodl/data, declared: false, state: ok}
      gpus: {nvidia: 2, amd: 0}
      errors: []
      warnings: []
failure:
  description: The failure message, one list item per line (header, one line per failing host, warnings).
  returned: when a host or the controller has an error
  type: list
  elements: str
failed_hosts:
  description: Hosts with at least one error; with RV(refused) before contact, the workers whose entry fails.
  returned: always, but for a play with no worker
  type: list
  elements: str
warnings:
  description: Every warning, one per line.
  returned: when the configuration is valid
  type: list
  elements: str
advisory:
  description: The glibc note, when the workers' glibc versions call for one, else null.
  returned: when the configuration is valid
  type: str
summary:
  description: One line per host.
  returned: when the configuration is valid
  type: list
  elements: str
  sample: ["h1: ok — x86_64, glibc 2.36, data /flodl/data ok, gpus 2 nvidia / 0 amd"]
per_host:
  description:
    - One entry per worker of the play, keyed by inventory host, which M(flodl.cluster.worker_result) turns
      into that worker's own result. A probed worker's entry is C(status), C(msg) and C(host), the key of its
      report in C(hosts) (held once, not copied per entry); a worker refused before contact has C(data)
      with its C(problems) instead.
  returned: always, but for a play with no worker
  type: dict
ssh_control_dir:
  description: The directory of the ssh master connections the probe left for the launch (C(flodl_ssh_reuse)).
  returned: when a launch follows and the masters are kept
  type: str
refused:
  description: The run was refused (before contact, or by the controller's own checks); each worker's entry says why.
  returned: when refused
  type: bool
run_model:
  description:
    - The run model this step built, for the later phases of this run (join token redacted, each vaulted value a
      placeholder with its ciphertext beside); internal, see docs/architecture.md, One run model per run.
  returned: when this step built the model
  type: dict
problems:
  description: Configuration problems, when the run is invalid (no host was contacted).
  returned: when the run is refused
  type: list
  elements: str
run_model_use:
  description: How this step got the run model (C(source), C(validations), C(connections_resolved)); see docs/architecture.md, One run model per run.
  returned: when the run was read
  type: dict
  sample: {source: flodl_preflight_run, validations: 0, connections_resolved: 0}
ansible_stats:
  description: >-
    The job artifact C(flodl_preflight), this result without C(run_model), in the shape of M(ansible.builtin.set_stats)' result,
    which Ansible publishes as custom stats (AWX artifacts): no set_stats task runs after a step that passes.
  returned: when the step passes
  type: dict
"""
