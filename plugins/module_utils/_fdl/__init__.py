# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An fdl project's files read as fdl-cli reads them (YAML, the inherit-from chain, the overlay,
``commands:``), and its ``cluster:`` block mapped onto inventory variables for the inventory plugin.
May import: ``_cluster``, ``_ssh``, ``_files``, ``_core``.

Entry points:
- ``fdl_inventory.build_inventory``: an fdl project to inventory hosts and variables
- ``fdl_config.DEFAULT_ENV``: the overlay (``fdl.<env>.yml``) read when none is named
- ``fdl_error.FdlConfigError``: an fdl problem with its files, key path and fix
"""
