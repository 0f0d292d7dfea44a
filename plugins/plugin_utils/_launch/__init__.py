# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The launch's I/O on the controller: its inputs, the precheck before contact, the launcher process,
detached runs, orphans, ssh masters, and preflight's part in a launch that follows (the walk-in mode's I/O
is ``_walk_in``, one level up).
A phase wing: it never imports ``_preflight`` or ``_prebuild``.
May import: ``_host``, ``_run``, ``_proc``, ``module_utils._walk_in``, ``module_utils._launch`` and the wings below
them.

Entry points:
- ``launch_io.launch_inputs``: the launch plan's inputs read from the play and from disk
- ``launch_precheck.size_problems``: the launch environment's size checked before contact
- ``launcher_process.run_streamed``: run the launch command, streamed, stopped as a group
- ``detached_io.start_detached``: start a detached run
- ``detached_io.stop_detached``: stop every proven launcher of a detached run
- ``orphans.stop_orphans``: stop leftover ranks on the play's workers
- ``sshreuse_io.masters_for_launch``: the run's ssh masters kept for the launcher
- ``preflight_launch.LaunchFollows``: preflight's part in a launch that follows
"""
