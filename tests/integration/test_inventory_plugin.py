"""The ``flodl.cluster.fdl_cluster`` inventory plugin, through the real CLIs.

The collection is built and installed from its tarball (``installed_collection``)
and ``ansible-inventory``/``ansible-doc`` of the interpreter running pytest are
used, so each supported ansible-core line is exercised.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from conftest import run_ansible

BASE_YML = """\
description: demo project
commands:
  train:
    cluster: true
  lint:
    run: cargo clippy
"""

CLUSTER_YML = """\
cluster:
  controller:
    host: 192.168.1.10        # an IP is shipped as-is
    path: /opt/proj           # port omitted -> 1337
    docker: cuda
  env:
    NCCL_DEBUG: WARN
  workers:
    - host: gpu-c             # deliberately not alphabetical: order is rank order
      local_devices: [0, 1]
      nccl_socket_ifname: enp1s0
      path: /opt/proj
      arch: precompiled/cu128
    - host: gpu-a
      ssh:
        user: alice
        port: 2222
        identity_file: .fdl/keys/gpu-a
        options: ["ConnectTimeout=5", "ProxyCommand=ssh -W %h:%p bastion"]
      local_devices: all      # counted over ssh at launch
      nccl_socket_ifname: enp1s0
      path: /srv/proj
      arch: precompiled/rocm70
      data_path: /mnt/datasets
      env:
        OMP_NUM_THREADS: "8"
    - host: gpu-b
      ssh: { target: 10.0.0.12, identity_file: ~/.ssh/id_gpu_b }
      local_devices: [3]
      nccl_socket_ifname: enp1s0
      path: /srv/proj
      tunnel: true
      gpu_ram_share: 0.5
"""

OTHER_YML = """\
cluster:
  controller:
    host: head.lab
    port: 2000
    path: /lab/proj
  workers:
    - host: lab-1
      local_devices: all
      nccl_socket_ifname: ""
      path: /lab/proj
"""


def unwrap(value: Any) -> Any:
    """Drop ansible-inventory's ``{"__ansible_unsafe": ...}`` wrappers."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unwrap(v) for v in value]
    return value


def make_project(root: Path, *, source: str = "plugin: flodl.cluster.fdl_cluster\n") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "fdl.yml").write_text(BASE_YML)
    (root / "fdl.cluster.yml").write_text(CLUSTER_YML)
    (root / "fdl.other.yml").write_text(OTHER_YML)
    src = root / "my.fdl_cluster.yml"
    src.write_text(source)
    return src


def inventory_list(collection, source: Path) -> dict:
    proc = run_ansible(collection, ["ansible-inventory", "-i", str(source), "--list"], cwd=source.parent,
                       env={"ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "true"})
    assert proc.returncode == 0, proc.stderr
    return unwrap(json.loads(proc.stdout))


def test_list_example_project(installed_collection, tmp_path):
    source = make_project(tmp_path / "proj")
    data = inventory_list(installed_collection, source)

    assert data["flodl_workers"]["hosts"] == ["gpu-c", "gpu-a", "gpu-b"]
    hostvars = data["_meta"]["hostvars"]

    c, a, b = hostvars["gpu-c"], hostvars["gpu-a"], hostvars["gpu-b"]
    assert c["flodl_host"] == "gpu-c"
    assert c["flodl_local_devices"] == [0, 1]
    assert c["flodl_nccl_socket_ifname"] == "enp1s0"
    assert c["flodl_path"] == "/opt/proj"
    assert c["flodl_arch"] == "precompiled/cu128"
    assert c["ansible_host"] == "gpu-c"
    for absent in ("flodl_ssh", "flodl_data_path", "flodl_env", "flodl_tunnel", "ansible_port",
                   "ansible_user", "ansible_ssh_private_key_file", "ansible_ssh_common_args"):
        assert absent not in c, absent

    assert a["flodl_local_devices"] == "all"
    assert a["flodl_data_path"] == "/mnt/datasets"
    assert a["flodl_env"] == {"OMP_NUM_THREADS": "8"}
    assert a["flodl_ssh"]["identity_file"] == ".fdl/keys/gpu-a"  # raw, as flodl ships it
    assert a["flodl_ssh"]["options"] == ["ConnectTimeout=5", "ProxyCommand=ssh -W %h:%p bastion"]
    assert a["ansible_host"] == "gpu-a"
    assert a["ansible_port"] == 2222
    assert a["ansible_user"] == "alice"
    assert a["ansible_ssh_private_key_file"] == str(source.parent / ".fdl/keys/gpu-a")
    assert shlex.split(a["ansible_ssh_common_args"]) == [
        "-o", "ConnectTimeout=5", "-o", "ProxyCommand=ssh -W %h:%p bastion",
    ]

    assert b["ansible_host"] == "10.0.0.12"
    assert b["flodl_host"] == "gpu-b"
    assert b["ansible_ssh_private_key_file"] == "~/.ssh/id_gpu_b"
    assert b["flodl_tunnel"] is True
    assert b["flodl_gpu_ram_share"] == 0.5

    # cluster vars live on group all; --list folds them into each host
    for host in (a, b, c):
        assert host["flodl_controller_host"] == "192.168.1.10"
        assert host["flodl_controller_path"] == "/opt/proj"
        assert host["flodl_controller_docker"] == "cuda"
        assert host["flodl_cluster_env"] == {"NCCL_DEBUG": "WARN"}
        assert host["flodl_fdl_env"] == "cluster"
        assert host["flodl_cmd"] == "train"
        assert "flodl_controller_port" not in host


def test_cluster_vars_on_group_all(installed_collection, tmp_path):
    source = make_project(tmp_path / "proj")
    proc = run_ansible(installed_collection, ["ansible-inventory", "-i", str(source), "--list", "--export"],
                       env={"ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "true"})
    assert proc.returncode == 0, proc.stderr
    data = unwrap(json.loads(proc.stdout))
    assert data["all"]["vars"]["flodl_controller_host"] == "192.168.1.10"
    assert data["all"]["vars"]["flodl_cmd"] == "train"
    assert "flodl_controller_host" not in data["_meta"]["hostvars"]["gpu-a"]


def test_other_env_and_project_dir(installed_collection, tmp_path):
    make_project(tmp_path / "proj")
    inv_dir = tmp_path / "inventories"
    inv_dir.mkdir()
    source = inv_dir / "lab.fdl_cluster.yaml"
    source.write_text("plugin: flodl.cluster.fdl_cluster\nproject_dir: ../proj\nenv: other\n")
    data = inventory_list(installed_collection, source)
    assert data["flodl_workers"]["hosts"] == ["lab-1"]
    lab = data["_meta"]["hostvars"]["lab-1"]
    assert lab["flodl_local_devices"] == "all"
    assert lab["flodl_nccl_socket_ifname"] == ""
    assert lab["flodl_controller_host"] == "head.lab"
    assert lab["flodl_controller_port"] == 2000
    assert lab["flodl_fdl_env"] == "other"
    assert "flodl_controller_docker" not in lab  # fdl.cluster.yml is not merged for env: other


def test_constructed_keyed_groups(installed_collection, tmp_path):
    source = make_project(
        tmp_path / "proj",
        source=(
            "plugin: flodl.cluster.fdl_cluster\n"
            "keyed_groups:\n  - key: flodl_arch | default('none')\n    prefix: arch\n"
            "groups:\n  tunneled: flodl_tunnel | default(false)\n"
            "compose:\n  rank_hint: flodl_controller_host\n"
        ),
    )
    data = inventory_list(installed_collection, source)
    assert data["arch_precompiled_cu128"]["hosts"] == ["gpu-c"]
    assert data["arch_none"]["hosts"] == ["gpu-b"]
    assert data["tunneled"]["hosts"] == ["gpu-b"]
    assert data["_meta"]["hostvars"]["gpu-c"]["rank_hint"] == "192.168.1.10"


def _failing(installed_collection, source: Path):
    proc = run_ansible(installed_collection, ["ansible-inventory", "-i", str(source), "--list"],
                       env={"ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "true"})
    assert proc.returncode != 0
    return " ".join((proc.stdout + proc.stderr).split())


def test_unknown_key_fails_naming_file_and_key(installed_collection, tmp_path):
    source = make_project(tmp_path / "proj")
    overlay = source.parent / "fdl.cluster.yml"
    overlay.write_text(CLUSTER_YML.replace("      data_path: /mnt/datasets\n",
                                           "      data_path: /mnt/datasets\n      gpus: 2\n"))
    text = _failing(installed_collection, source)
    assert str(overlay) in text
    assert 'cluster.workers[1] ("gpu-a").gpus: unknown key' in text


def test_ranks_refused(installed_collection, tmp_path):
    source = make_project(tmp_path / "proj")
    overlay = source.parent / "fdl.cluster.yml"
    overlay.write_text(CLUSTER_YML.replace("      tunnel: true\n", "      tunnel: true\n      ranks: [3]\n"))
    text = _failing(installed_collection, source)
    assert str(overlay) in text
    assert 'cluster.workers[2] ("gpu-b").ranks' in text
    assert "not user configuration" in text and "; remove the key" in text


def test_missing_overlay(installed_collection, tmp_path):
    source = make_project(tmp_path / "proj", source="plugin: flodl.cluster.fdl_cluster\nenv: nope\n")
    text = _failing(installed_collection, source)
    assert "environment `nope` not found (expected fdl.nope.yml next to" in text


def test_ansible_doc_renders(installed_collection):
    proc = run_ansible(installed_collection, ["ansible-doc", "-t", "inventory", "flodl.cluster.fdl_cluster"])
    assert proc.returncode == 0, proc.stderr
    assert "project_dir" in proc.stdout
    assert "flodl_workers" in proc.stdout
    assert "EXAMPLES" in proc.stdout
