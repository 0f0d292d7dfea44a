# -*- coding: utf-8 -*-
# Copyright: flodl.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: fdl_cluster
short_description: Build the flodl cluster inventory from an fdl project's fdl.yml and overlay
version_added: "0.1.0"
author:
  - flodl.cluster contributors (@flodl)
description:
  - Reads an fdl project's base manifest (the first of C(fdl.yaml), C(fdl.yml), C(fdl.json) in
    O(project_dir)) and the environment overlay C(fdl.<env>.yaml), C(fdl.<env>.yml) or
    C(fdl.<env>.json) next to it, expanding C(inherit-from:) chains and deep-merging them exactly as
    fdl-cli does (maps merge, scalars and lists replace, C(null) in an overlay deletes the key).
  - The merged C(cluster:) block is checked strictly (unknown keys, required keys and value types at
    every level, C(ranks:) refused); any problem fails the inventory with a message naming the files
    and the key path.
  - Yields group C(flodl_workers) with one host per C(cluster.workers[]) entry in file order, which is
    rank order. Each host gets the worker variables C(flodl_host), C(flodl_path),
    C(flodl_local_devices), C(flodl_nccl_socket_ifname) and, when the file sets them, C(flodl_arch),
    C(flodl_data_path), C(flodl_env), C(flodl_gpu_ram_share), C(flodl_tunnel), C(flodl_docker) and
    C(flodl_ssh) (the raw C(ssh) block, as flodl ships it).
  - Each host also gets C(ansible_host) (C(ssh.target), else C(host)) and, from its C(ssh) block,
    C(ansible_port), C(ansible_user), C(ansible_ssh_private_key_file) (a relative C(identity_file)
    is resolved against O(project_dir)) and C(ansible_ssh_common_args) (one C(-o) per C(ssh.options)
    entry), so Ansible reaches each host the way flodl's launcher will.
  - Group C(all) gets the cluster variables C(flodl_controller_host), C(flodl_controller_path) and,
    when set, C(flodl_controller_port), C(flodl_controller_docker), C(flodl_controller_arch),
    C(flodl_controller_data_path), C(flodl_controller_join), C(flodl_cluster_env),
    C(flodl_cluster_gpu_ram_share), plus C(flodl_fdl_env) (the overlay name).
  - C(flodl_cmd) is set when exactly one top-level entry of the merged C(commands:) map resolves to
    C(cluster=true) (its own flag or one of its nested commands); C(flodl_cmd_dir) is set when that
    command points at a sub-directory of the project holding its own fdl manifest. Otherwise set them
    yourself (extra vars or group vars).
  - A configuration error makes this source fail to parse. Ansible only warns about unparsed sources
    unless C(ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED=true) (C([inventory] any_unparsed_is_failed));
    set it so a broken fdl file stops the run instead of leaving C(flodl_workers) empty.
  - The inventory source must be a file whose name ends in C(.fdl_cluster.yml) or
    C(.fdl_cluster.yaml).
options:
  plugin:
    description: Token that marks the file as a source for this plugin.
    required: true
    type: str
    choices: ["flodl.cluster.fdl_cluster"]
  project_dir:
    description:
      - The fdl project root, the directory holding C(fdl.yml).
      - A relative path is resolved against the directory of the inventory source file; C(~) is
        expanded.
      - Defaults to the directory of the inventory source file.
    type: str
  env:
    description:
      - Name of the overlay to merge, C(fdl.<env>.yml); also exported to the run as C(FDL_ENV)
        through C(flodl_fdl_env).
      - A requested overlay that does not exist is an error naming the expected file.
      - Set to an empty string to read the base manifest alone (it must then hold the C(cluster:)
        block).
    type: str
    default: cluster
extends_documentation_fragment:
  - constructed
notes:
  - Values from the fdl files are data, never templates.
  - The inventory hostname of a worker is its C(host), which must be unique across workers.
seealso:
  - name: flodl cluster guide
    description: The fdl cluster configuration this plugin reads.
    link: https://github.com/fab2s/floDl/blob/main/docs/ddp/02-cluster-guide.md
"""

EXAMPLES = r"""
# inventory/train.fdl_cluster.yml, next to the project's fdl.yml and fdl.cluster.yml
plugin: flodl.cluster.fdl_cluster
---
# another project, another overlay (reads /srv/proj/fdl.yml + /srv/proj/fdl.lab.yml)
plugin: flodl.cluster.fdl_cluster
project_dir: /srv/proj
env: lab
---
# with constructed groups: one group per libtorch variant (arch_precompiled_cu128, ...)
plugin: flodl.cluster.fdl_cluster
keyed_groups:
  - key: flodl_arch | default('none')
    prefix: arch
groups:
  tunneled: flodl_tunnel | default(false)

# then, e.g.:
#   ansible-inventory -i train.fdl_cluster.yml --graph
#   ansible-playbook -i train.fdl_cluster.yml flodl.cluster.cluster_train
"""

import os

from ansible.errors import AnsibleParserError
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable

from ansible_collections.flodl.cluster.plugins.module_utils._core.constants import WORKERS_GROUP
from ansible_collections.flodl.cluster.plugins.module_utils._fdl.fdl_config import DEFAULT_ENV
from ansible_collections.flodl.cluster.plugins.module_utils._fdl.fdl_error import FdlConfigError
from ansible_collections.flodl.cluster.plugins.module_utils._fdl.fdl_inventory import build_inventory

SOURCE_SUFFIXES = (".fdl_cluster.yml", ".fdl_cluster.yaml")


class InventoryModule(BaseInventoryPlugin, Constructable):
    """Inventory of flodl workers from an fdl project's cluster configuration."""

    NAME = "flodl.cluster.fdl_cluster"

    def verify_file(self, path):
        return super().verify_file(path) and str(path).endswith(SOURCE_SUFFIXES)

    def _project_dir(self, source):
        base = os.path.dirname(os.path.abspath(source))
        configured = self.get_option("project_dir")
        if configured is None or not str(configured).strip():
            return base
        configured = os.path.expanduser(str(configured))
        return configured if os.path.isabs(configured) else os.path.normpath(os.path.join(base, configured))

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)

        env = self.get_option("env")
        env = DEFAULT_ENV if env is None else str(env)
        project_dir = self._project_dir(path)
        warnings = []
        try:
            workers, cluster_vars = build_inventory(project_dir, env or None, warnings=warnings)
        except FdlConfigError as exc:
            raise AnsibleParserError("fdl_cluster inventory %s: %s" % (to_native(path), to_native(exc)))
        for warning in warnings:
            self.display.warning("fdl_cluster inventory %s: %s" % (to_native(path), to_native(warning)))

        for name, value in cluster_vars.items():
            self.inventory.set_variable("all", name, value)

        self.inventory.add_group(WORKERS_GROUP)
        strict = self.get_option("strict")
        for host, hostvars in workers:
            self.inventory.add_host(host, group=WORKERS_GROUP)
            for name, value in hostvars.items():
                self.inventory.set_variable(host, name, value)
            # constructed features see the cluster vars as well as the host's own
            variables = dict(cluster_vars)
            variables.update(self.inventory.get_host(host).get_vars())
            self._set_composite_vars(self.get_option("compose"), variables, host, strict=strict)
            self._add_host_to_composed_groups(self.get_option("groups"), variables, host, strict=strict)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), variables, host, strict=strict)
