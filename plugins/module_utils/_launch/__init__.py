# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The launch's plans: the launcher's environment and its size, the cluster JSON, the command, the
compose overlay, libtorch variables, detached runs, teardown and what the launch output means (the walk-in
mode builds on them in ``_walk_in``, one level up).
A phase wing: it never imports ``_preflight`` or ``_prebuild``. May import: ``_probe`` and the wings below it.

Entry points:
- ``launch_env.LaunchInputs``: what the launch plan is made from
- ``launch_size.render_checked``: one render of the launch, checked against exec's limits
- ``launch_text.plan_fields``: the launch plan as printed and returned
- ``libtorch_env.read_libtorch_env``: the libtorch variables of the controller's own variant
- ``cluster_json.ordered_cluster``: the cluster in flodl's key order
- ``prepared_launch.prepared_args``: run_launcher's inputs from a registered launch_env result
- ``launch_outcome.reported``: the launch step's result with each worker's entry
- ``detached.status_script``: what ``status`` asks the launch host about a detached run
- ``teardown.cleanup_script``: the orphan cleanup script: TERM, a grace, KILL
"""
