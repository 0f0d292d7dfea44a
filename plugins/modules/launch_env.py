#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done by the action plugin of the same name, on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: launch_env
short_description: Prepare the environment flodl's launcher reads
version_added: "0.1.0"
description:
  - Builds, on the controller, exactly the variables fdl-cli sets before it starts a cluster training command
    (flodl docs/launcher-contract.md §1a) - C(FLODL_INTERNAL_FULL_CLUSTER_JSON) (controller host resolved, ranks populated,
    relative C(ssh.identity_file) made absolute as the launched command sees the project, pretty JSON, lowercase
    hex), C(FLODL_INTERNAL_FDL_CMD), C(FDL_ENV) when non-blank, C(FLODL_INTERNAL_HOST_USER) when known,
    C(FLODL_INTERNAL_CLUSTER_EXTRA_HOSTS) when any worker has an address, C(FLODL_INTERNAL_PREBUILD_PER_HOST) after
    a successful prebuild, C(FLODL_NET_TIMEOUT_SCALE) after validation, and C(FLODL_TESTING_CLUSTER_JSON) when
    C(flodl_testing_cluster) is true.
  - Validates the whole run first (same rules as M(flodl.cluster.topology)); nothing is contacted when it is invalid.
  - A refused run (invalid, too large an environment, an unsafe log directory, ...) does not fail this run-once task,
    which ran on one worker; it returns RV(refused) and every worker's C(per_host) entry failed with the reason,
    which M(flodl.cluster.run_launcher) carries on without starting anything. An earlier refusal in the play
    (C(flodl_topology_run), C(flodl_preflight_run)) is carried on the same way, the run not read again.
  - GPU counts of C(flodl_local_devices=all) workers come from the preflight result (C(flodl_preflight_run)); workers it
    does not cover are counted by one parallel ssh sweep (the fdl-cli GPU script).
  - With O(launch_host) another machine, C(HOSTNAME) is that host's identity and the controller's own GPU count is
    that host's, both from its preflight session (C(flodl_preflight_run.launch_host)); without one in the play,
    no C(HOSTNAME) is exported (never the play machine's).
  - Recursion guard - when the controller environment already holds C(FLODL_INTERNAL_CLUSTER_JSON) or
    C(FLODL_INTERNAL_AGENT_JSON), nothing is prepared and the command runs plainly, with a warning.
  - When the launch command runs through C(docker compose) and workers have addresses, writes
    C(<project root>/.fdl-cluster-overlay.yml) (extra_hosts for services cuda, dev, bench) and splices
    C(-f docker-compose.yml -f <overlay>) after C(docker compose); also exports C(HOSTNAME), C(LIBTORCH_CPU_PATH) and
    (with C(flodl_controller_arch)) C(LIBTORCH_HOST_PATH) for the compose file.
  - The launch command is C(flodl_launch_command), else the command's C(run:) line (C(flodl_cmd_run)) from the
    project root, else C(cargo run --release --bin <flodl_cmd>) in the command's directory. With a compose
    service (O(launch_docker), default C(flodl_controller_docker)) a C(run:) line becomes
    C(docker compose run --rm <service> bash -c '<line>') and the cargo command fdl-cli's entry wrapping,
    C(docker compose run --rm -e FDL_PROJECT_ROOT=/workspace <service> bash -c 'cd /workspace/<dir> && ... ').
  - Measures every added variable as it will be exported (C(NAME=value) and its NUL against the kernel's 131072-byte
    limit, the whole environment against C(ARG_MAX)). A topology variable whose pretty JSON is over the limit is
    shipped as compact JSON when that fits (with a warning); otherwise the run is refused and nothing is started. The
    variables returned in C(env) are the ones measured.
  - Looks up C(flodl_controller_host) and every worker's C(flodl_host) at once, waiting 2 seconds in total; a name
    without an answer by then is treated as unresolved, with a warning.
  - Prints the plan. Without C(-v), a summary (command, cwd, log, each variable with its value or its size, one line
    per worker); with C(-v) also the decoded topology, the envelope and the overlay. In check mode the plan shows
    every value in full and nothing is written.
  - A blank string given for an option means the option's default (AWX survey answers are strings, blank ones too).
options:
  preflight:
    description: The preflight result; defaults to the registered C(flodl_preflight_run). Its C(hosts.<host>.gpus) are used.
    type: raw
  prebuild_envelope:
    description:
      - The prebuild envelope, as compact JSON text or a dict. Defaults to the fact C(flodl_prebuild_envelope_json)
        (or C(flodl_prebuild_envelope)), else C(<project root>/target/cluster/prebuild-envelope.json) when an earlier
        prebuild left it. Ignored when C(flodl_prebuild) is false.
    type: raw
  launch_docker:
    description:
      - Compose service of the default launch command. Defaults to C(flodl_launch_docker), else
        C(flodl_controller_docker). C(false) or an empty string forces a native launch.
    type: raw
  testing_cluster:
    description:
      - Set C(FLODL_TESTING_CLUSTER_JSON) (ranks from the controller's local GPU count), as fdl-cli does on every
        cluster run. Defaults to C(flodl_testing_cluster), else true.
    type: bool
  launch_host:
    description:
      - Where the launch command will run (C(flodl_launch_host)). On another host than this one, the controller
        user the launcher falls back to for workers without an ssh user is the one Ansible logs in with there,
        and a C(docker compose) launch (whose overlay file is written here) is refused.
    type: str
    default: localhost
  launch_mode:
    description:
      - V(fanout) prepares what fdl-cli hands flodl's launcher. V(walk_in) then turns it into a roster-free,
        token-protected join window for the launcher, and plans one agent per worker (its spec, binary, directory
        and environment, in the result's C(walk_in), which holds the token - register this task with C(no_log)).
        See docs/launch.md, Two launch modes. A walk-in launcher runs on this machine.
    type: str
    choices: [fanout, walk_in]
    default: fanout
  launch_timeout:
    description: The launch's own bound in seconds (C(flodl_launch_timeout), V(0) none); a walk-in agent is killed
      at this bound plus the join timeout plus 60 s.
    type: float
    default: 0
  container_root:
    description: Where the compose file mounts the project (the launcher's project root for a compose launch).
    type: str
    default: /workspace
  log_dir:
    description:
      - Directory for launch logs (returned for M(flodl.cluster.run_launcher)).
      - When unset, C(target/cluster/logs) under the project root.
    type: str
  show_plan:
    description: Print the launch plan.
    type: bool
    default: true
attributes:
  check_mode:
    description: Check mode prints the full plan (every value in full) and writes nothing.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
author:
  - flodl.cluster contributors (@flodl)
"""

EXAMPLES = r"""
- name: Prepare the launcher environment
  flodl.cluster.launch_env:
  register: flodl_launch

- name: Show the decoded topology
  ansible.builtin.debug:
    var: flodl_launch.topology
"""

RETURN = r"""
launch_mode:
  description: V(fanout) or V(walk_in), as prepared.
  returned: success
  type: str
walk_in:
  description:
    - For V(walk_in), the plan the later steps follow - C(run_id), the window's C(port), C(open_timeout),
      C(join_timeout), C(agent_timeout), and C(agents) per inventory host (C(host), C(cwd), C(binary), C(devices),
      C(env)). The agents' environments hold the run's join token. Null for V(fanout).
  returned: success
  type: dict
env:
  description:
    - Variables to add to the controller environment of the launch command (all strings).
    - Registered whole (flodl.cluster.run_launcher runs these bytes); when this or the command holds a value that came
      from Ansible Vault, the whole result is C(no_log), so callbacks and job events get it censored.
  returned: success
  type: dict
vaulted:
  description:
    - The ciphertexts of the run's vaulted values, for flodl.cluster.run_launcher, which withholds them from the
      launcher's output and log. Every other field of this result shows them as C(<vaulted value withheld>).
  returned: when the run holds a value that came from Ansible Vault
  type: list
  elements: str
command:
  description: The command to run (compose overlay flags included).
  returned: success
  type: str
cwd:
  description: Where it runs (project root, or the command's directory for a native launch).
  returned: success
  type: str
guarded:
  description: True when the recursion guard applied and nothing was prepared.
  returned: success
  type: bool
topology:
  description: The shipped topology, decoded (what the hex in C(env) holds).
  returned: success unless guarded
  type: dict
topology_json:
  description:
    - The topology's pretty JSON text, as fdl-cli renders it (C(env) holds its compact form instead when the pretty
      one would be over the kernel's limit for one environment string).
  returned: success unless guarded
  type: str
prebuild_envelope:
  description: The decoded prebuild envelope, when one is shipped.
  returned: success
  type: dict
extra_hosts:
  description: C(host:ip) pairs of C(FLODL_INTERNAL_CLUSTER_EXTRA_HOSTS).
  returned: success
  type: list
  elements: str
overlay_path:
  description: The compose overlay written (or planned in check mode), when any.
  returned: success
  type: str
overlay:
  description: Its content.
  returned: success
  type: str
log_dir:
  description: Directory for launch logs.
  returned: success
  type: str
plan:
  description: The printed plan, one line per item.
  returned: success
  type: list
  elements: str
launch_warnings:
  description: Resolution and preparation warnings (also shown as warnings).
  returned: success
  type: list
  elements: str
run_model:
  description:
    - The run model this step built, for the later phases of this run (join token redacted, each vaulted value a
      placeholder with its ciphertext beside); internal, see docs/architecture.md, One run model per run.
  returned: when this step built the model
  type: dict
ssh_control_dir:
  description:
    - The directory of the ssh master connections the preflight probe left for this run (C(flodl_ssh_reuse), on by
      default), whose C(ControlPath) was added to each remote worker's C(ssh.options) in the topology; null when the
      connections are not shared. Hand it to M(flodl.cluster.run_launcher), which closes them.
  returned: success
  type: str
per_host:
  description: >-
    Each worker's entry by inventory name: C(status), C(msg), C(data) (its C(ranks) and flodl C(host) in the launched
    run; for a refused run, failed with its C(problems)).
  returned: always
  type: dict
refused:
  description: The run was refused; nothing is to be launched, and C(per_host) says why for each worker.
  returned: when refused
  type: bool
problems:
  description: Every problem of a refused run.
  returned: when refused
  type: list
  elements: str
failed_hosts:
  description: The workers whose entry fails, for a refused run.
  returned: when refused
  type: list
  elements: str
run_model_use:
  description: How this step got the run model (C(source), C(validations), C(connections_resolved)); see docs/architecture.md, One run model per run.
  returned: when the run was read
  type: dict
  sample: {source: flodl_preflight_run, validations: 0, connections_resolved: 0}
"""
