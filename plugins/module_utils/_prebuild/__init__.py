# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The prebuild on the build host: the runner the module and the in-process action share, each build
step as a process, the build's files, its summary and failures.
A phase wing: it never imports ``_preflight``, ``_launch`` or ``_walk_in``.
May import: ``_probe`` and the wings below it.

Entry points:
- ``build_runner.build``: run the whole prebuild on the build host
- ``build_runner.ARGUMENT_SPEC``: the module's and the in-process action's argument spec
- ``build_runner.DEFAULT_BUILD_TIMEOUT``: a build's time bound when none is given
"""
