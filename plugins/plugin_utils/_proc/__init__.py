# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller processes: one-shot commands and parallel ssh sweeps, the parent watcher, and three
standalone scripts (the run lock's holder, the ssh-master watcher, the stdin holder of a walk-in launcher's ssh).
May import: ``module_utils`` wings only (``probe_here`` imports ``_probe``).

Entry points:
- ``processes.run_parallel``: parallel ssh under one deadline
- ``processes.run_probes``: preflight's probes, bounded per CPU
- ``processes.run_for_output``: a short local command's stdout, or None
- ``processes.run_sh``: a probe's script run here with ``sh`` (its exit code, stdout, or why not)
- ``probe_here.probe_here``: the probe parts an ``Ask`` turns on, run here and parsed
- ``processes.effective_user``: the user this process runs as
- ``parent_watch.exit_with_parent``: end this worker with ansible-playbook
- ``sshreuse_watch.start_watcher``: start the script that closes the run's ssh masters
- ``lock_holder.process_start``: a process's start time, to tell a pid reused
- ``stdin_holder.main``: run a command with its stdin held open until it ends
"""
