#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done by the action plugin of the same name, on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: orphan_cleanup
short_description: Stop leftover rank processes of the prebuilt binary on every remote worker
version_added: "0.1.0"
description:
  - flodl's orphan cleanup (docs/launcher-contract.md §3g) as an operator task, for example after an interrupted run.
  - For every worker that is not the controller's own box and has a prebuilt binary - from the prebuild envelope
    (fact, else C(<project root>/target/cluster/prebuild-envelope.json)), or, without any envelope,
    C(target/cluster/<host>/<variant slug>/release/<flodl_cmd>) - one ssh with the launcher's argv runs
    C(pkill -TERM), waits one second, then C(pkill -KILL) on the absolute binary path. All hosts in parallel.
  - The pattern is anchored to the start of the command line (only processes of the binary match) and puts the
    first C(/) in brackets, so the cleanup's own remote shell does not match it.
  - Idempotent - C(changed) only when a process was found. A host without C(pkill), or one that cannot be reached,
    is a warning, not a failure.
options:
  prebuild_envelope:
    description: The envelope (compact JSON text or dict); defaults as described above.
    type: raw
  timeout:
    description: Seconds allowed per host.
    type: float
    default: 30
  stop_launcher:
    description:
      - First stop the launcher of every recorded detached run (C(flodl_launch_detach)) whose session is still alive
        on its launch host (TERM to the session, KILL after 10 s), one ssh per launch host.
      - A run record is never trusted. The launch host first proves that the recorded pid is that run's launcher
        (the leader of its own session, of the user asking, started when the record says, running the recording
        wrapper of that run's log); a pid of 1 or less, a record naming a host outside the inventory, or a pid that
        fails the proof is refused, nothing of it is signalled, and it is reported in RV(record_problems).
    type: bool
    default: true
attributes:
  check_mode:
    description: Check mode shows what would be stopped and contacts no host.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
author:
  - flodl.cluster contributors (@flodl)
"""

EXAMPLES = r"""
- name: Stop leftover ranks on every worker
  flodl.cluster.orphan_cleanup:
"""

RETURN = r"""
hosts:
  description: Per host - C(bin), C(status) (C(clean), C(cleaned), C(no_pkill), C(unreachable)), C(found), C(left).
  returned: always
  type: dict
skipped_hosts:
  description: Remote workers without a known prebuilt binary.
  returned: always
  type: list
  elements: str
record_problems:
  description:
    - The run records refused, each with its path and why (unreadable, a pid of 1 or less, a launch host outside
      the inventory, or a live process that is not the run's launcher). Nothing of them was signalled. The
      C(flodl.cluster.teardown) playbook fails when this is not empty.
  returned: always
  type: list
  elements: str
launcher:
  description: What was stopped of the detached runs' launchers, or null.
  returned: always
  type: str
run_model_use:
  description: How this step got the run model (C(source), C(validations), C(connections_resolved)); see docs/architecture.md, One run model per run.
  returned: when the run was read
  type: dict
  sample: {source: flodl_preflight_run, validations: 0, connections_resolved: 0}
"""
