#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done by the action plugin of the same name, on the controller, over the host's own connection.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: walk_in_agent
short_description: Start or collect this worker's flodl walk-in agent
version_added: "0.3.0"
description:
  - Used by the C(flodl.cluster.launch) role when C(flodl_launch_mode=walk_in). Each worker's agent is started
    over that worker's own Ansible connection (ssh with its jump hosts, C(local), C(community.docker.docker),
    ...), with C(become) honoured, as one shell command. No Python is needed on the worker.
  - O(stage=start) reads the agent planned for this host in the prepared launch (O(prepared_var)), sends its
    environment (the hex agent spec with the run's join token, C(FLODL_HOST_NAME), the library path, the
    worker's C(env) and NCCL interface) on the command's stdin, never on its command line, and starts the
    prebuilt binary in a clean environment and a session of its own, its output in a private file in the
    connection user's temporary directory. It returns at once with the agent's pid.
  - O(stage=start) starts nothing when the launcher's join window did not open (the result registered as
    O(window_var) failed, was skipped or is missing); each worker then fails at once, naming O(launch_host) and
    pointing at the launch step's output.
  - Each worker reads only its own entries of the registered results (its agent, the launcher's view of its
    host), never the other workers', so the cost per worker does not grow with the cluster.
  - O(stage=collect), after the launcher ended, stops what is left of the agent's session, reads its exit code
    and last lines, removes its file, and decides this worker's entry from what the launcher reported about
    its host (joined, a rank's exit code) and how its agent ended. It does not fail the task itself; a
    C(flodl.cluster.worker_result) task turns the entry into the worker's own result.
options:
  stage:
    description: V(start) the agent, or V(collect) it.
    type: str
    required: true
    choices: [start, collect]
  prepared_var:
    description: The registered result of C(flodl.cluster.launch_env) that planned the agents.
    type: str
    default: flodl_launch_env
  started_var:
    description: For O(stage=collect), the registered result of this module's O(stage=start) task.
    type: str
    default: flodl_agent_start
  launcher_var:
    description: For O(stage=collect), the registered result of the launcher's follow step.
    type: str
    default: flodl_launch_follow
  window_var:
    description: For O(stage=start), the registered result of the launcher's open step (its join window).
    type: str
    default: flodl_launch_window
  launch_host:
    description: Where the launcher runs (C(flodl_launch_host)), named when its window did not open.
    type: str
    default: localhost
attributes:
  check_mode:
    description: Check mode contacts no host and starts nothing.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
author:
  - flodl.cluster contributors (@flodl)
"""

EXAMPLES = r"""
- name: Start this worker's agent
  flodl.cluster.walk_in_agent:
    stage: start
  register: flodl_agent_start

- name: Collect it once the launcher ended
  flodl.cluster.walk_in_agent:
    stage: collect
  register: flodl_agent_end
"""

RETURN = r"""
pid:
  description: The agent's session id on the worker (O(stage=start)).
  returned: when the agent started
  type: int
per_host:
  description: This worker's entry (C(status), C(msg), C(data) with C(agent_rc), C(ranks), C(agent_tail)), for
    C(flodl.cluster.worker_result) (O(stage=collect)).
  returned: when collected
  type: dict
"""
