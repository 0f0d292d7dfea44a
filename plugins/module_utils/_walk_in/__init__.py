# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The walk-in launch mode's pure parts: the launcher's window topology, each agent's spec, start and
collect scripts, and the verdict per worker from what the launcher and the agent printed.
A phase wing of the launch: the walk-in is a mode of the launch phase, built on its plans (the cluster JSON),
so it sits one level above ``_launch`` and may import it; like ``_launch`` it never imports ``_preflight`` or
``_prebuild``, at any level. May import: ``_launch``, ``_probe`` and the wings below them.

Entry points:
- ``walk_in.plan``: the walk-in launch's plan: the window topology and each worker's agent
- ``walk_in.start_script``: the script that starts one worker's agent
- ``walk_in.collect_script``: the script that collects one worker's agent
- ``walk_in_verdict.view_of``: the launcher's view of each host, back from its registered form
- ``walk_in_verdict.worker_entry``: one worker's walk-in result
"""
