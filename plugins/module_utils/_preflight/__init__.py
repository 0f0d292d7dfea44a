# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight's meaning: each check's finding, one host's verdict, the run's report.
A phase wing: it never imports ``_prebuild``, ``_launch`` or ``_walk_in``.
May import: ``_probe`` and the wings below it.

Entry points:
- ``preflight_verdict.evaluate_remote``: one remote worker's verdict from its probe
- ``preflight_verdict.controller_report``: the controller's own checks as a report
- ``preflight_verdict.local_worker_report``: the controller's own worker as a report
- ``preflight_verdict.add_findings``: another host's findings (the build host's) added to a report
- ``preflight_report.run_report``: the whole run's report and the step's result
- ``preflight_report.failure_message``: the one failure text of a failed preflight
"""
