# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run as data: the run model, the phases' knobs, the controller's identity, the actions' argument
specs, the roles' argument specs over a run, Ansible's flags, job artifacts, the run lock's rules, the
prebuild plan and its layout. May import: ``_fdl``, ``_cluster``, ``_ssh``, ``_files``, ``_core``.

Entry points:
- ``run_model.RunContext``: the validated run, and the model it travels as
- ``knobs.knob_findings``: the phases' numeric and boolean knobs checked with the run
- ``identity.controller_user``: who the controller is
- ``action_specs.LAUNCH_ENV``: an action's argument spec, defined once
- ``argspec.run_problems``: the roles' argument specs over every worker in one pass
- ``ansible_flags.launch_verbosity``: Ansible's ``-v`` as the launcher's verbosity
- ``job_artifacts.launch``: a phase's AWX job artifact
- ``runlock.parse_lock``: the run lock's record read back
- ``prebuild.plan_prebuild``: the build plan: which (host, variant) builds
- ``prebuild_layout.envelope_json``: the prebuild envelope's exact JSON bytes
"""
