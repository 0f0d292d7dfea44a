#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# The work is done by the action plugin of the same name, on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: prebuild_plan
short_description: Validate a flodl cluster run and derive its prebuild arguments
version_added: "0.1.0"
description:
  - Builds and validates the cluster topology from the inventory, as M(flodl.cluster.topology) does, with the
    variables the prebuild phase needs (C(flodl_cmd), and C(flodl_arch) on every remote worker). Any problem
    fails the task before a host is contacted.
  - Selects the workers to build for, that is every worker whose logical host C(flodl_host) differs from the
    controller's identity (C(FLODL_HOST_NAME), else C(hostname)). The comparison is by label, not by address,
    so a container or VM on the controller's machine is still built for.
  - Returns the arguments of M(flodl.cluster.cargo_prebuild) (O(flodl.cluster.cargo_prebuild#module:workers),
    C(project_root), C(cmd), C(cmd_dir), C(docker_service), C(dedupe)) and the dedupe groups.
  - Reads C(flodl_controller_path), C(flodl_controller_docker), C(flodl_cmd), C(flodl_cmd_dir),
    C(flodl_prebuild), C(flodl_prebuild_dedupe) and C(flodl_build_host) from the play host, and the worker
    variables of group C(flodl_workers).
  - Runs on the controller only and contacts no host.
options: {}
attributes:
  check_mode:
    description: Can run in C(check_mode) and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in C(check_mode)), when in diff mode.
    support: none
seealso:
  - module: flodl.cluster.cargo_prebuild
  - module: flodl.cluster.topology
author:
  - flodl.cluster contributors (@flodl)
"""

EXAMPLES = r"""
- name: Plan the per-host builds
  flodl.cluster.prebuild_plan:
  register: prebuild_plan

- name: Build them on the build host
  flodl.cluster.cargo_prebuild:
    project_root: "{{ prebuild_plan.project_root }}"
    cmd: "{{ prebuild_plan.cmd }}"
    cmd_dir: "{{ prebuild_plan.cmd_dir }}"
    docker_service: "{{ prebuild_plan.docker_service }}"
    dedupe: "{{ prebuild_plan.dedupe }}"
    workers: "{{ prebuild_plan.workers }}"
  delegate_to: "{{ prebuild_plan.build_host }}"
"""

RETURN = r"""
enabled:
  description: The value of C(flodl_prebuild).
  returned: success
  type: bool
build_host:
  description: Where the builds run (C(flodl_build_host), default C(localhost)).
  returned: success
  type: str
  sample: localhost
controller_identity:
  description: The controller's logical host name.
  returned: success
  type: str
skipped_hosts:
  description: Workers that are the controller's own box (no prebuild for them).
  returned: success
  type: list
  elements: str
project_root:
  description: C(flodl_controller_path).
  returned: success
  type: str
cmd:
  description: C(flodl_cmd), the cargo C(--bin) target.
  returned: success
  type: str
cmd_dir:
  description: C(flodl_cmd_dir) without leading or trailing slashes.
  returned: success
  type: str
docker_service:
  description: C(flodl_controller_docker), or null for native builds.
  returned: success
  type: str
dedupe:
  description: C(flodl_prebuild_dedupe).
  returned: success
  type: bool
workers:
  description: Remote workers in inventory order, each C(host), C(path) and C(arch).
  returned: success
  type: list
  elements: dict
  sample: [{"host": "gpu-b", "path": "/srv/proj", "arch": "precompiled/cu128"}]
mode:
  description: C(native) or C(docker).
  returned: success
  type: str
groups:
  description: The planned builds, each C(arch), C(built_by) and the C(hosts) it serves.
  returned: success
  type: list
  elements: dict
"""
