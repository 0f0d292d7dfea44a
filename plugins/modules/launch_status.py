#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done by the action plugin of the same name, on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: launch_status
short_description: Report on a detached flodl run
version_added: "0.2.0"
description:
  - For a run started with C(flodl_launch_detach=true), reads its record under
    C(<flodl_project_dir>/target/cluster/runs/), asks the launch host whether the launcher's session is still
    alive and for the last lines of its log, and asks every worker of the play how many processes of its
    prebuilt rank binary run there, all in one parallel round.
  - Reports the launch command's exit code, which the detached session records beside its log when the command
    ends. Fails when the run failed - it ended with a non-zero code, it ended without recording one (stopped by
    teardown, or its session was killed), or the launch host did not answer - so a workflow's next step can
    branch on it. A running run passes, unless O(wait_seconds) ran out first.
  - The record is never trusted. Before the pid is reported as the launcher, the launch host proves it is this
    run's (the leader of its own session, of the user asking, started when the record says, running the recording
    wrapper of this run's log). A record naming a launch host outside the inventory is refused before any contact.
  - Changes nothing. Used by the C(flodl.cluster.status) playbook.
options:
  run_id:
    description:
      - The run to report on. Default C(flodl_run_id), else the C(run_id) of the C(flodl_launch) artifact the start
        job published (what an AWX workflow passes to the next job), else the most recently started run. Blank
        values count as unset.
    type: str
  wait_seconds:
    description:
      - Wait up to this many seconds for the run to end (asking every 5 s), then report. A run still running then
        fails the task. V(0) reports at once.
    type: float
    default: 0
  lines:
    description: How many log lines to show.
    type: int
    default: 20
attributes:
  check_mode:
    description: Only reads.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
author:
  - flodl.cluster contributors (@flodl)
"""

EXAMPLES = r"""
- name: State of the latest detached run
  flodl.cluster.launch_status:
    lines: 50
  run_once: true

- name: Wait up to an hour for the run the start job published, fail unless it exited 0
  flodl.cluster.launch_status:
    run_id: "{{ flodl_launch.run_id }}"
    wait_seconds: 3600
  run_once: true
"""

RETURN = r"""
run_id:
  description: The run reported on.
  returned: when a run was found
  type: str
launcher:
  description: C(running), C(ended), or C(unknown (...)) when the launch host did not answer.
  returned: when a run was found
  type: str
state:
  description: C(running), C(succeeded), C(failed) (non-zero exit code), C(stopped) (ended without an exit code),
    C(unproven) (the record's pid is a live process that is not this run's launcher - a forged record, or a pid
    reused after the run ended - reported, never signalled) or C(unknown).
  returned: when a run was found
  type: str
rc:
  description: The launch command's exit code, once the run has ended and recorded it; null otherwise.
  returned: when a run was found
  type: int
record_problems:
  description: Run records refused while looking for the latest run (unreadable, a pid of 1 or less); the task
    fails when there is any.
  returned: when a run was found
  type: list
  elements: str
log_file:
  description: The run's log on the launch host.
  returned: success
  type: str
log_tail:
  description: The last lines of the log.
  returned: success
  type: list
  elements: str
per_host:
  description: Per worker, how many rank processes run there.
  returned: success
  type: dict
run_model_use:
  description: How this step got the run model (C(source), C(validations), C(connections_resolved)); see docs/architecture.md, One run model per run.
  returned: when the run was read
  type: dict
  sample: {source: flodl_preflight_run, validations: 0, connections_resolved: 0}
"""
