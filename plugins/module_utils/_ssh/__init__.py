# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ssh as flodl uses it: the launcher's and probes' argv, an Ansible connection turned into flodl's
``ssh`` block, master reuse, the connect bound, the launch and cleanup run on the launch host, host-key failures.
May import: ``_files``, ``_core``.

Entry points:
- ``ssh.probe_argv``: the argv of a collection probe, shaped like the launcher's ssh
- ``ssh.launcher_argv``: the argv flodl's launcher uses to reach a worker
- ``ssh.host_key_failure``: which host-key failure an ssh error names, if any
- ``sshargs.connection_from_vars``: a connection from the classic ``ansible_*`` host variables
- ``sshargs.ResolvedConnection``: a connection as Ansible resolved it
- ``sshreuse.with_reuse``: ssh options that open or ride the run's master
- ``connect_bound.cluster_with_connect_bound``: the ConnectTimeout put into each remote worker's ssh options
- ``remote_launch.wrapper_script``: the wrapper that runs the launch on the launch host
- ``remote_launch.RemoteLaunchError``: why the launch host cannot run the launch
- ``remote_cleanup.render_plan``: the launch host's own orphan cleanup plan, sent on stdin
"""
