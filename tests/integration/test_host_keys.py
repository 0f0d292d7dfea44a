"""Host keys: a worker whose key ssh will not accept fails preflight with the fix, never "unreachable".

Runs the installed collection's ``flodl.cluster.preflight`` against namespace sshd hosts. Each
worker gets its own known_hosts file and strict checking through ``ansible_ssh_common_args``
(user options come first in the probe argv, so they win over the harness defaults).
"""
from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from conftest import Collection, run_ansible
from netns_cluster import Cluster, HostSpec


def _foreign_key(tmp_path: Path) -> str:
    """A real ed25519 public key that no namespace host holds."""
    key = tmp_path / "foreign"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return (tmp_path / "foreign.pub").read_text().split()[:2]


def _strict(cluster: Cluster, name: str, known_hosts: Path) -> str:
    base = cluster.hostvars(name)["ansible_ssh_common_args"]
    return f"-o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking=yes " + base


def test_changed_unknown_and_revoked_host_keys_fail_preflight_with_the_fix(
    installed_collection: Collection, netns_cluster_factory: Callable[..., Cluster], tmp_path: Path,
    netns_shared_dir: Path,
):
    # The project on the shared directory (the hosts' /tmp is their own): only the host keys may fail.
    cluster = netns_cluster_factory([HostSpec("h1"), HostSpec("h2"), HostSpec("h3"), HostSpec("h4")],
                                    shared_root=netns_shared_dir)
    changed = tmp_path / "known_hosts_changed"
    changed.write_text(" ".join([cluster["h1"].ip, *_foreign_key(tmp_path)]) + "\n")
    empty = tmp_path / "known_hosts_empty"
    empty.write_text("")
    host_vars = {
        h.name: {"flodl_path": str(netns_shared_dir), "flodl_local_devices": [0], "flodl_nccl_socket_ifname": "eth0"}
        for h in cluster
    }
    host_vars["h1"]["ansible_ssh_common_args"] = _strict(cluster, "h1", changed)
    host_vars["h2"]["ansible_ssh_common_args"] = _strict(cluster, "h2", empty)
    # issue 38: h4's real key, marked @revoked (it was reported as "no host key", with an ssh-keyscan fix)
    revoked = tmp_path / "known_hosts_revoked"
    h4_key = (cluster.runtime_dir / "h4" / "ssh_host_ed25519_key.pub").read_text().split()[:2]
    revoked.write_text(" ".join(["@revoked", cluster["h4"].ip, *h4_key]) + "\n")
    host_vars["h4"]["ansible_ssh_common_args"] = _strict(cluster, "h4", revoked)
    inv = cluster.write_inventory(
        tmp_path / "inventory.json",
        group_vars={
            "flodl_controller_host": cluster.controller_ip,
            "flodl_controller_path": str(netns_shared_dir),
            "flodl_cmd": "train",
            "flodl_prebuild": False,
        },
        host_vars=host_vars,
    )
    proc = run_ansible(installed_collection, ["ansible-playbook", "flodl.cluster.preflight", "-i", str(inv)])
    assert proc.returncode != 0

    # Each failing worker fails with its own message; the healthy one is not among them.
    fails = {m.group(1): json.loads(m.group(2))["msg"] for m in re.finditer(
        r"fatal: \[([^\]]+)\]: FAILED! => (\{.*\})\s*$", proc.stdout, re.M)}
    assert sorted(fails) == ["h1", "h2", "h4"], proc.stdout
    lines = {host: str(msg) for host, msg in fails.items()}
    ip1, ip2 = cluster["h1"].ip, cluster["h2"].ip
    assert "differs from the one in known_hosts" in lines["h1"]
    assert f"`ssh-keygen -R {ip1}`" in lines["h1"]
    assert f"`ssh-keyscan -H {ip1} >> ~/.ssh/known_hosts`" in lines["h1"]
    assert f"no host key for {ip2} is in the controller's known_hosts" in lines["h2"]
    assert f"`ssh-keyscan -H {ip2} >> ~/.ssh/known_hosts`" in lines["h2"]
    for name in ("h1", "h2"):
        assert "StrictHostKeyChecking=accept-new" in lines[name]
        assert "execution environment" in lines[name]
    assert "h3" not in lines
    ip4 = cluster["h4"].ip
    assert f"the host key {ip4} presented is marked @revoked" in lines["h4"], lines["h4"]
    assert "no host key" not in lines["h4"] and "`ssh-keygen -A`" in lines["h4"]
    # The verdicts: errors, not "unreachable"; the healthy host still checked.
    summary = dict(re.findall(r"^  (h\d): (ok|warning|error|unreachable)\b", proc.stdout, re.M))
    # (h3 only warns about the absent convention data path /flodl/data)
    assert summary == {"h1": "error", "h2": "error", "h3": "warning", "h4": "error"}, proc.stdout
    # The wrong known_hosts entry was neither replaced nor accepted.
    assert changed.read_text().startswith(f"{ip1} ssh-ed25519 ")
    assert empty.read_text() == ""
    assert revoked.read_text().startswith("@revoked ")
