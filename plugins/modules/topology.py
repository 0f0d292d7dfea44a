#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done by the action plugin of the same name, on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: topology
short_description: Validate a flodl cluster run and return its topology
version_added: "0.1.0"
description:
  - Builds flodl's C(cluster:) block from the inventory (group C(flodl_workers) in inventory order, plus the
    cluster variables of the play host) and validates it exactly as fdl-cli and flodl's launcher do.
  - Also validates C(flodl_net_timeout_scale) (or C(FLODL_NET_TIMEOUT_SCALE) from the controller environment)
    and the variables the requested O(phases) need, so that a bad inventory fails before any host is contacted.
  - Every problem is reported at once, one line per host and variable.
  - A refused run (its variables, the launch environment's size, the run lock) does not fail this run-once task,
    which ran on one worker only. It returns RV(refused) with a C(per_host) entry per worker of the play, failed
    with that worker's own problems and those of the run; the launch role's steps carry the refusal on without
    starting anything, and each worker's report fails with its entry. On a host that is not a worker (a runbook
    validating on C(localhost)), or with no worker in the play, the task fails.
  - Runs on the controller only and contacts no host.
options:
  phases:
    description: Phases that will run; decides which variables are required.
    type: list
    elements: str
    choices: [preflight, prebuild, launch, teardown]
    default: [preflight, prebuild, launch]
  lock:
    description:
      - Take the project's run lock (C(<flodl_project_dir>/target/cluster/run.lock)) for this ansible-playbook run,
        or refuse the run at once, naming the holder, when another live run holds it. A second start would kill the first
        run's ranks (the launcher's pre-spawn cleanup stops every process of the same binary).
      - The lock is a lease named after the controller's identity (C(FLODL_HOST_NAME), else the host name) and
        this run's id. A holder process renews it every C(flodl_run_lock_ttl)/6 seconds while ansible-playbook
        lives and removes it when ansible-playbook ends, however it ends; a run killed with its holder (a deleted
        pod) leaves a lock that any controller takes over once it has not been renewed for C(flodl_run_lock_ttl)
        seconds (60 by default). Not taken in check mode, nor when C(flodl_run_lock) is false (a deliberate
        replacement of a live run).
    type: bool
    default: false
attributes:
  check_mode:
    description: Can run in check mode; it only reads the inventory.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
author:
  - flodl.cluster contributors (@flodl)
"""

EXAMPLES = r"""
- name: Fail fast on a bad inventory
  flodl.cluster.topology:
    phases: [preflight, prebuild, launch]
  register: flodl_topology
"""

RETURN = r"""
run_lock:
  description: Whether this run took the project's run lock.
  returned: success
  type: bool
cluster:
  description:
    - The validated C(cluster:) block, in flodl's key order, ranks not yet populated.
    - A C(controller.join.token) is replaced by a placeholder; it is the session salt.
  returned: success
  type: dict
controller_identity:
  description: The controller's logical host name (C(FLODL_HOST_NAME), else C(hostname)).
  returned: success
  type: str
  sample: gpu-a
remote_hosts:
  description: Workers that are not the controller's own box, in inventory order.
  returned: success
  type: list
  elements: str
  sample: [gpu-b, gpu-c]
run_model:
  description:
    - The run model this step built, for the later phases of this run (join token redacted, each vaulted value a
      placeholder with its ciphertext beside); internal, see docs/architecture.md, One run model per run.
  returned: when this step built the model
  type: dict
prebuild:
  description: Whether prebuild (and the preflight ABI gate) is enabled.
  returned: success
  type: bool
refused:
  description: The run was refused before contact; C(per_host) says why for each worker.
  returned: when refused
  type: bool
problems:
  description: Every problem of a refused run, one line each.
  returned: when refused
  type: list
  elements: str
failed_hosts:
  description: The workers whose entry fails.
  returned: when refused
  type: list
  elements: str
per_host:
  description: Each worker's entry (C(status) failed or skipped, C(msg), C(data) with its C(problems)).
  returned: when refused
  type: dict
run_model_use:
  description: How this step got the run model (C(source), C(validations), C(connections_resolved)); see docs/architecture.md, One run model per run.
  returned: when the run was read
  type: dict
  sample: {source: flodl_preflight_run, validations: 0, connections_resolved: 0}
"""
