# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight's I/O: the controller's own checks, one parallel ssh per worker, the build host's arch.
A phase wing: it never imports ``_prebuild``, ``_launch`` or ``_walk_in``.
May import: ``_host``, ``_run``, ``_proc``, ``module_utils._preflight`` and the wings below it.

Entry points:
- ``preflight_sweep.sweep``: probe every worker of the play in one parallel sweep
- ``preflight_sweep.build_host_arch``: the build host's CPU arch
"""
