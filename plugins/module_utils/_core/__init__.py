# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Foundations every other wing stands on: shell quoting, hex, serde_json's text, safety predicates,
problems as values, phase results, the group watcher, vault redaction and the shared constants.
Imports nothing of the collection: the standard library only.

Entry points:
- ``shell.posix_quote``: quote a word exactly as flodl's two sides quote it
- ``shell.always_quote``: quote a word for the collection's own sh scripts
- ``problems.Problem``: a run's problem as a value: where, what, why, the fix
- ``phase_result.entry``: one worker's per-host entry of a run-once step
- ``safety.default_arg_max``: exec's argument limit, for the launch environment's size
- ``hexcodec.hex_encode``: the hex transport of JSON between fdl-cli's side and the launcher
- ``serde_json_text.serde_pretty``: serde_json's exact pretty text
- ``vault_redact.redact_text``: vaulted values withheld from a text
- ``group_watch.start_watch``: start the watcher that stops process groups when their starter dies
- ``constants.WORKERS_GROUP``: the inventory group of the workers, defined once
"""
