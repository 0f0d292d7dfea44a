# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run on the controller: the context an action reads first, the one reader, the run's rules,
the model's handoff between tasks, refusals, task variables, vaulted values, inventory sources, connections.
May import: ``_proc`` and the ``module_utils`` wings.

Entry points:
- ``context.read_run``: the run model handed on, else a new one from the reader
- ``context.is_local_host``: whether an inventory host is this machine
- ``context.as_bool``: a boolean by Ansible's rules
- ``run_handoff.fields``: how a step took its model, for ``run_model_use``
- ``run_refusal.refuse``: refuse the whole run: every worker fails in its own report
- ``task_vars.registered``: a result this collection registered, as plain values
- ``vault_values.withholding``: an action's result with vaulted values withheld
- ``vault_values.RedactingDisplay``: a display that withholds vaulted values
- ``run_rules.WORKERS_GROUP``: the workers' group, as the run's rules use it
"""
