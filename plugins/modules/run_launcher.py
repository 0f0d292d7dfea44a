#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done by the action plugin of the same name, on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: run_launcher
short_description: Run the flodl launch command on the controller with live output
version_added: "0.1.0"
description:
  - Runs O(command) with C(/bin/sh -c) on the controller, in O(chdir), with the controller's environment plus O(env)
    (normally the output of M(flodl.cluster.launch_env)).
  - Every output line (stdout and stderr, merged) is shown in the ansible-playbook output while the command runs,
    and written to C(<log_dir>/launch-<timestamp>-<pid>.log) (mode C(0640); a directory it creates is C(0750),
    its missing parents C(0755), whatever the umask). The command runs under the caller's umask with group and
    world write added (C(umask 000) becomes C(022)), locally and on the launch host; a detached run under C(umask 027).
  - The task fails when the command exits non-zero; C(rc) and the message carry the exit code and the last lines.
    With O(prepared_var), the failure goes to the workers instead, in C(per_host), and the task passes with
    RV(launch_failed) (it runs once, on one worker, which is not to blame). flodl's launcher names the host and
    rank of a rank that exits non-zero (C(host "h2" reports rank 2 exited with code 7)); every output line is
    read for that, and those workers fail, the others are ok. A failure that names no worker fails every worker.
  - A O(prepared_var) result that refused the run (RV(refused)) starts nothing; this task passes with it, each
    worker's entry failing with the refusal.
  - The command runs in its own session. Ctrl-C (SIGINT), SIGTERM (an AWX cancel) or SIGHUP sends SIGTERM to its
    whole process group, waits O(grace_seconds), then sends SIGKILL to whatever is left.
  - In check mode nothing runs.
  - A blank string given for an option means the option is left out, so its default applies (AWX survey answers
    are strings, blank ones too).
options:
  command:
    description:
      - Shell command line to run.
      - Required, with O(chdir), unless O(prepared_var) is given.
    type: str
  chdir:
    description: Working directory on the controller.
    type: path
  env:
    description: Variables added to (and overriding) the controller environment.
    type: dict
    default: {}
  prepared_var:
    description:
      - Name of a variable that holds the registered result of M(flodl.cluster.launch_env). The command, its
        directory, its environment, O(log_dir) and O(ssh_control_dir) are taken from it, read as registered.
        Nothing is templated between the two steps, so the launch gets exactly the bytes launch_env measured.
      - Mutually exclusive with O(command), O(chdir) and O(env). An explicit O(log_dir) or O(ssh_control_dir) wins.
      - The task fails, and starts nothing, when that result failed or was skipped.
    type: str
    version_added: "0.2.0"
  log_dir:
    description:
      - Where the log file goes.
      - When unset, C(target/cluster/logs) under O(chdir).
    type: path
  grace_seconds:
    description: Seconds between SIGTERM and SIGKILL when the run is interrupted.
    type: float
    default: 10
  launch_host:
    description:
      - Inventory host where the command runs, reached with Ansible's connection for it (C(flodl_launch_host)).
        C(localhost) (or a host on the local connection) runs it here.
      - On another host the added variables travel on ssh's stdin (never in argv), O(chdir) is a directory on
        that host, output streams back live, and closing the session (a cancel) makes that host stop the
        command's whole session (TERM, then KILL after O(grace_seconds)).
      - O(forward_agent) forwards the job's ssh-agent there.
    type: str
    default: localhost
  forward_agent:
    description:
      - Forward the job's ssh-agent to O(launch_host) (the launcher there then reaches the workers with the job's
        own key, an AWX machine credential for example).
      - With O(prepared_var), the prepared launch's own value applies (C(flodl_launch_forward_agent) as the run
        read it); the two are mutually exclusive.
    type: bool
    default: false
    version_added: "0.2.0"
  project_dir:
    description:
      - For O(detach), the project directory whose C(target/cluster/runs/) records the detached run, so that
        the C(flodl.cluster.status) and C(flodl.cluster.teardown) playbooks find it. When unset, O(chdir).
      - With O(prepared_var), the run's project directory (C(flodl_project_dir), else the controller's path); the
        two are mutually exclusive.
    type: path
    version_added: "0.2.0"
  timeout:
    description:
      - Seconds the command may run before it is stopped as an interrupt would stop it, and the task fails
        with C(timed_out). V(0) means no limit.
    type: float
    default: 0
  output_batch_seconds:
    description:
      - The command's output is shown in batches, each one display call (one job event under ansible-runner and
        AWX) - a line waits at most this many seconds before it is shown, and a batch also goes out once it holds
        500 lines or 64 KiB. The launch log gets every line as it comes. V(0) shows every line at once.
    type: float
    default: 2.0
  walk_in_stage:
    description:
      - For a launch prepared with C(launch_mode=walk_in) (O(prepared_var)). V(open) starts the launcher on this
        machine in a session of its own (output to the launch log, its exit code recorded beside it) and returns
        once its join window listens, within 60 s; a watcher stops it when ansible-playbook is gone. V(follow)
        streams its log to its end (or O(timeout)) and reads what it says of each host; it fails only when the
        launcher failed and no worker's result can say why.
    type: str
    choices: [open, follow]
  window_var:
    description: For O(walk_in_stage=follow), the registered result of the V(open) stage.
    type: str
    default: flodl_launch_window
  detach:
    description:
      - Start the command detached on the launch host (its own session, output appended to a log under
        O(log_dir)), record it under C(<project dir>/target/cluster/runs/<run id>.json) (O(project_dir)) and return at once
        with the run id, pid and log path. The run lock is not held by a detached run, but the preflight probe of a
        later run still finds its ranks on the workers.
    type: bool
    default: false
  shell:
    description: Shell used to run O(command).
    type: str
    default: /bin/sh
  ssh_control_dir:
    description:
      - The directory of this run's ssh master connections (the C(ssh_control_dir) that
        M(flodl.cluster.launch_env) returns when C(flodl_ssh_reuse) is on). Every master in it is closed with
        C(ssh -O exit) and the directory removed when the launch command ends, however it ends.
    type: path
    version_added: "0.2.0"
attributes:
  check_mode:
    description: Check mode shows the command and runs nothing.
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
  run_once: true
  register: flodl_launch

- name: Run the training command flodl.cluster.launch_env prepared
  flodl.cluster.run_launcher:
    prepared_var: flodl_launch
    timeout: 3600
  run_once: true

- name: Run a command of your own with the prepared environment
  flodl.cluster.run_launcher:
    command: "{{ flodl_launch.command }} --resume"
    chdir: "{{ flodl_launch.cwd }}"
    env: "{{ flodl_launch.env }}"
  run_once: true
"""

RETURN = r"""
rc:
  description: Exit code of the command (128+N when killed by signal N).
  returned: when the command ran
  type: int
log_file:
  description: The full output.
  returned: when the command ran
  type: str
seconds:
  description: Run time.
  returned: when the command ran
  type: float
stdout_tail:
  description: The last 30 output lines.
  returned: when the command ran
  type: list
  elements: str
interrupted:
  description: The signal name when the run was interrupted.
  returned: when interrupted
  type: str
rank_exits:
  description: >-
    Every rank exit flodl's launcher reported non-zero, in order (C(host) as the launcher names it, C(rank),
    C(code)).
  returned: when the command ran
  type: list
  elements: dict
per_host:
  description: >-
    With O(prepared_var), each worker's launch entry by inventory name (C(status) ok or failed, C(msg), C(data) with its
    C(ranks), C(host) and its C(rank_exits)); each worker's M(flodl.cluster.worker_result) turns it into its own result.
  returned: with O(prepared_var)
  type: dict
refused:
  description: The prepared launch refused the run; nothing was started.
  returned: when the prepared launch was refused
  type: bool
launch_failed:
  description: The launch failed; with O(prepared_var) the task passes and the failing workers' entries carry it.
  returned: when the launch failed with O(prepared_var)
  type: bool
ansible_stats:
  description: >-
    The job artifact C(flodl_launch) (command, rc, log_file, run_id, failed) in the shape of M(ansible.builtin.set_stats)' result,
    which Ansible publishes as custom stats (AWX artifacts): no set_stats task runs after a step that passes.
  returned: when the step passes
  type: dict
"""
