#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done by the action plugin of the same name, on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: worker_result
short_description: Report a flodl phase's outcome as this worker's own task result
version_added: "0.2.0"
description:
  - The phases of flodl.cluster run once on the controller, reaching every worker in one parallel sweep, and
    file one entry per inventory host. This module turns the entry of the host it runs for into that host's
    own task result, so that PLAY RECAP, ansible-runner events and AWX host summaries show every worker.
  - An entry C(failed) fails the host with its own message; C(unreachable) (the probe could not connect)
    skips it with the reason, so the run goes on as flodl's does; C(skipped) skips it; C(ok) and C(changed)
    pass.
  - On a play host that is not in group C(flodl_workers) (an operator's runbook on C(localhost)), the result
    is the verdict of the whole run. It fails when any worker's entry failed, one line per failed worker, and
    passes otherwise, naming the unreachable workers.
  - Contacts no host.
options:
  phase:
    description: The phase name; the host's data is returned under this key.
    type: str
    required: true
  result:
    description:
      - The registered result of the run-once phase step (it holds C(per_host)). An entry that names a host
        (C(host)) has its data in the result's C(hosts), under that name.
      - Exactly one of O(result) and O(result_var) is required.
    type: dict
  result_var:
    description:
      - The name of the variable the run-once phase step was registered as, e.g. V(flodl_preflight_run).
      - Only this host's entry (and the C(hosts) entry it names) is read, as registered (nothing is templated).
        With many workers this is cheaper than O(result), which templates the expression for every host.
    type: str
    version_added: "0.2.0"
  prior_phase:
    description:
      - An earlier phase of the same play that this report also speaks for, e.g. V(prebuild) in
        C(cluster_train), whose builds are reported with the launch (one report task per worker, not two).
      - The worker fails with its own entry there when that failed (the playbook did not launch); a worker the
        later phase did not reach reports the earlier phase; otherwise the later phase decides and the
        earlier one's data is returned beside it. Ignored when O(prior_result_var) is not set in the play.
      - Requires O(prior_result_var).
    type: str
  prior_result_var:
    description: The name of the variable the earlier phase's run-once step was registered as, read like O(result_var).
    type: str
attributes:
  check_mode:
    description: Only reports.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
author:
  - flodl.cluster contributors (@flodl)
"""

EXAMPLES = r"""
- name: Preflight | Result of this worker
  flodl.cluster.worker_result:
    phase: preflight
    result_var: flodl_preflight_run

- name: The same, from a result built in the play
  flodl.cluster.worker_result:
    phase: teardown
    result: "{{ flodl_teardown_run }}"
"""

RETURN = r"""
msg:
  description: What the phase found on this host.
  returned: always
  type: str
preflight:
  description:
    - For O(phase=preflight), the host's report (status, arch, libc, pkill, gpus, data path, probe).
    - On a play host that is not a worker, C(workers) instead, mapping each worker to its status (for every phase).
  returned: when O(phase=preflight)
  type: dict
prebuild:
  description: For O(phase=prebuild) or O(prior_phase=prebuild), the host's build (variant, binary, envelope entry, log).
  returned: when O(phase=prebuild) or O(prior_phase=prebuild)
  type: dict
"""
