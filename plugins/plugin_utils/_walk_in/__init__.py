# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The walk-in launch mode's I/O on the controller: the launcher started here or on the launch host, its
window awaited, its log followed; what one worker's agent task reads of the run-once results.
A phase wing of the launch, one level above ``plugin_utils._launch`` (a mode of that phase); like it, it
never imports ``_preflight`` or ``_prebuild``, at any level.
May import: ``_launch``, ``_host``, ``_run``, ``_proc``, ``module_utils._walk_in`` and the wings below them.

Entry points:
- ``walk_in_steps.run_stage``: the launch step's walk-in stages, ``open`` and ``follow``
- ``walk_in_vars.own_agent``: this worker's planned agent from the registered launch plan
- ``walk_in_vars.own_view``: the launcher's view of this worker alone, and its exit code
"""
