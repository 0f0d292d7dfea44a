# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The launch host: where the launch runs and how it is reached, its one session, and the run lock's
I/O on this machine.
May import: ``_run``, ``_proc`` and the ``module_utils`` wings.

Entry points:
- ``launch_target.launch_host_of``: the launch host of a run
- ``launch_target.launch_ssh``: the launch host's ssh block
- ``launch_target.launch_docker``: the launch's compose service
- ``launch_target.remote_launch_argv``: the argv that runs the launch on the launch host
- ``launch_host.start``: start the launch host's session before the sweep
- ``launch_host.finish``: what the session said, as problems, after the sweep
- ``launch_host.launch_host_facts``: what the launch step takes from the session
- ``runlock_io.lock_for_action``: take the run lock for this ansible-playbook run
"""
