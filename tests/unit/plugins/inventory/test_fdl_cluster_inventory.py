"""The fdl_cluster inventory plugin on Ansible's own inventory objects, reading real fdl files.

The plugin's options come from its DOCUMENTATION, registered the way Ansible's plugin loader does.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from ansible.errors import AnsibleParserError
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import inventory_loader

from ansible_collections.flodl.cluster.plugins.inventory import fdl_cluster

CLUSTER_YML = """\
cluster:
  controller: {host: 192.168.1.10, path: /opt/proj}
  env: {NCCL_DEBUG: 1}
  workers:
    - host: gpu-a
      local_devices: [0, 1]
      nccl_socket_ifname: enp1s0
      path: /opt/proj
      arch: precompiled/cu128
    - host: gpu-b
      ssh: {user: alice, port: 2222}
      local_devices: all
      nccl_socket_ifname: enp1s0
      path: /srv/proj
"""


def parse(source: Path) -> InventoryData:
    inventory_loader._load_config_defs(fdl_cluster.InventoryModule.NAME, fdl_cluster, fdl_cluster.__file__)
    plugin = fdl_cluster.InventoryModule()
    plugin._load_name = fdl_cluster.InventoryModule.NAME
    inventory = InventoryData()
    assert plugin.verify_file(str(source))
    plugin.parse(inventory, DataLoader(), str(source), cache=False)
    return inventory


def write_project(where: Path, overlay: str = "cluster", text: str = CLUSTER_YML) -> None:
    where.mkdir(parents=True, exist_ok=True)
    (where / "fdl.yml").write_text("commands:\n  train:\n    run: cargo run --release\n", encoding="utf-8")
    (where / f"fdl.{overlay}.yml").write_text(text, encoding="utf-8")


def test_every_worker_is_a_host_of_flodl_workers_in_file_order_with_keyed_groups(tmp_path):
    write_project(tmp_path)
    source = tmp_path / "lab.fdl_cluster.yml"
    source.write_text("plugin: flodl.cluster.fdl_cluster\nkeyed_groups:\n  - key: flodl_arch | default('none')\n"
                      "    prefix: arch\ncompose:\n  rank_host: flodl_host ~ '@' ~ flodl_controller_host\n",
                      encoding="utf-8")
    inventory = parse(source)
    assert [h.name for h in inventory.groups["flodl_workers"].get_hosts()] == ["gpu-a", "gpu-b"]
    assert [h.name for h in inventory.groups["arch_precompiled_cu128"].get_hosts()] == ["gpu-a"]
    assert [h.name for h in inventory.groups["arch_none"].get_hosts()] == ["gpu-b"]
    gpu_b = inventory.get_host("gpu-b").vars
    assert (gpu_b["ansible_port"], gpu_b["ansible_user"], gpu_b["flodl_local_devices"]) == (2222, "alice", "all")
    assert gpu_b["rank_host"] == "gpu-b@192.168.1.10"  # compose sees the cluster's variables too
    cluster = inventory.groups["all"].vars
    assert cluster["flodl_controller_path"] == "/opt/proj" and cluster["flodl_project_dir"] == str(tmp_path)


def test_project_dir_and_env_options_pick_another_project_and_overlay(tmp_path, capsys):
    write_project(tmp_path / "proj", overlay="lab")
    source = tmp_path / "inv" / "x.fdl_cluster.yaml"
    source.parent.mkdir()
    source.write_text("plugin: flodl.cluster.fdl_cluster\nproject_dir: ../proj\nenv: lab\n", encoding="utf-8")
    inventory = parse(source)
    assert inventory.groups["all"].vars["flodl_project_dir"] == str(tmp_path / "proj")
    assert inventory.groups["all"].vars["flodl_fdl_env"] == "lab"
    # The loader's warning (a number where fdl-cli wants a string) names the source; a string is kept.
    assert inventory.groups["all"].vars["flodl_cluster_env"] == {"NCCL_DEBUG": "1"}
    warned = " ".join(capsys.readouterr().err.split())
    assert f"fdl_cluster inventory {source}:" in warned and "cluster.env.NCCL_DEBUG is written as a number" in warned


def test_a_broken_cluster_block_fails_the_inventory_naming_the_source_and_key(tmp_path):
    write_project(tmp_path, text=CLUSTER_YML.replace("local_devices: all", "local_devices: every"))
    source = tmp_path / "lab.fdl_cluster.yml"
    source.write_text("plugin: flodl.cluster.fdl_cluster\n", encoding="utf-8")
    with pytest.raises(AnsibleParserError) as raised:
        parse(source)
    text = str(raised.value)
    assert f"fdl_cluster inventory {source}:" in text and "local_devices" in text and "fdl.cluster.yml" in text


def test_only_fdl_cluster_sources_are_claimed(tmp_path):
    other = tmp_path / "hosts.yml"
    other.write_text("all: {}\n", encoding="utf-8")
    assert fdl_cluster.InventoryModule().verify_file(str(other)) is False
