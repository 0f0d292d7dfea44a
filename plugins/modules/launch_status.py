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
  - Changes nothing. Used by the C(flodl.cluster.status) playbook.
options:
  run_id:
    description: The run to report on; default the most recently started one.
    type: str
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
"""

RETURN = r"""
run_id:
  description: The run reported on.
  returned: success
  type: str
launcher:
  description: C(running), C(ended), or C(unknown (...)) when the launch host did not answer.
  returned: success
  type: str
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
"""
