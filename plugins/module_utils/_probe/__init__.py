# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one probe protocol: the preflight probe's script and its one parser and statuses, the registry of probe
checks every host runs (the threshold-style free space; the parts what a probe asks turns on: the data path, CPU
arch, libc, pkill, project checkout, GPU count, live ranks), and the launch host's session script (run lock,
identity, data path, GPU count, reach).
May import: ``_run`` and the wings below it.

Entry points:
- ``preflight_probe.probe_script``: the POSIX-sh probe of one host, the parts its ``probe_check.Ask`` turns on
- ``probe_check.Ask``: what one probe asks a host (each part reads its own field)
- ``check_registry.scripts``: the parts an ask turns on and the armed checks', for any host's script
- ``preflight_probe.parse_probe``: the probe's sentinel-delimited output parsed
- ``gpu_count.parse_gpu_counts``: the GPU counts (a ``GpuCounts``) from the count script
- ``preflight_probe.STATUS_OK``: a host's preflight status, shared by every caller
- ``check_registry.armed``: the probe checks a run makes at a place (their knobs set above 0)
- ``check_registry.findings``: each armed check's judgement of a host's answers
- ``probe_check.Finding``: what any preflight check notices, with its levels (``probe_check.ERROR``)
- ``launch_host.session_script``: the launch host's one sh session
- ``launch_host.parse_session``: that session's output parsed
- ``launch_host.SessionFacts``: what the session found on the launch host
"""
