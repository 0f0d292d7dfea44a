"""Unit tests for the fdl config loader (flodl-contract.md §2a-§2e)."""
from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils import fdl_config as fc
from ansible_collections.flodl.cluster.plugins.module_utils.fdl_config import FdlConfigError

BASE_YML = """\
description: demo project
commands:
  train:
    cluster: true
  test:
    run: cargo test
"""

CLUSTER_YML = """\
cluster:
  controller:
    host: 192.168.1.10
    path: /opt/proj
    docker: cuda
  env:
    NCCL_DEBUG: WARN
  workers:
    - host: gpu-a
      local_devices: [0, 1]
      nccl_socket_ifname: enp1s0
      path: /opt/proj
      arch: precompiled/cu128
    - host: gpu-b
      ssh:
        user: alice
        port: 2222
        identity_file: .fdl/keys/gpu-b
        options: ["ConnectTimeout=5", "ProxyCommand=ssh -W %h:%p bastion"]
      local_devices: all
      nccl_socket_ifname: enp1s0
      path: /srv/proj
      arch: precompiled/rocm70
      data_path: /mnt/datasets
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def minimal_cluster(**worker_extra):
    worker = {"host": "gpu-a", "local_devices": [0], "nccl_socket_ifname": "eth0", "path": "/p"}
    worker.update(worker_extra)
    return {"controller": {"host": "10.0.0.1", "path": "/p"}, "workers": [worker]}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path / "fdl.yml", BASE_YML)
    write(tmp_path / "fdl.cluster.yml", CLUSTER_YML)
    return tmp_path


# ---------------------------------------------------------------- merge rules


class TestDeepMerge:
    def test_maps_merge_recursively_overlay_wins(self):
        base = {"a": {"x": 1, "y": {"k": "base", "keep": True}}, "b": 1}
        over = {"a": {"y": {"k": "over"}, "z": 3}}
        assert fc.deep_merge(base, over) == {"a": {"x": 1, "y": {"k": "over", "keep": True}, "z": 3}, "b": 1}

    def test_scalars_replace(self):
        assert fc.deep_merge({"port": 1337, "host": "a"}, {"port": 29500}) == {"port": 29500, "host": "a"}

    def test_lists_replace_entirely(self):
        base = {"workers": [{"host": "a"}, {"host": "b"}, {"host": "c"}]}
        over = {"workers": [{"host": "z"}]}
        assert fc.deep_merge(base, over) == {"workers": [{"host": "z"}]}

    def test_null_deletes_key(self):
        base = {"cluster": {"controller": {"host": "h", "docker": "cuda"}}}
        over = {"cluster": {"controller": {"docker": None}}}
        assert fc.deep_merge(base, over) == {"cluster": {"controller": {"host": "h"}}}

    def test_null_for_absent_key_is_noop(self):
        assert fc.deep_merge({"a": 1}, {"b": None}) == {"a": 1}

    def test_type_change_replaces(self):
        assert fc.deep_merge({"a": {"x": 1}}, {"a": "all"}) == {"a": "all"}
        assert fc.deep_merge({"a": "all"}, {"a": {"x": 1}}) == {"a": {"x": 1}}

    def test_inputs_not_mutated(self):
        base = {"a": {"x": 1}}
        over = {"a": {"y": 2}}
        snapshot = copy.deepcopy((base, over))
        fc.deep_merge(base, over)
        assert (base, over) == snapshot

    def test_merge_layers_left_to_right(self):
        assert fc.merge_layers([{"a": 1, "b": 1}, {"b": 2, "c": 2}, {"c": 3}]) == {"a": 1, "b": 2, "c": 3}
        assert fc.merge_layers([]) == {}


# ---------------------------------------------------------------- discovery


class TestDiscovery:
    def test_base_preference_order(self, tmp_path):
        write(tmp_path / "fdl.json", "{}")
        assert fc.find_base_manifest(tmp_path).name == "fdl.json"
        write(tmp_path / "fdl.yml", "")
        assert fc.find_base_manifest(tmp_path).name == "fdl.yml"
        write(tmp_path / "fdl.yaml", "")
        assert fc.find_base_manifest(tmp_path).name == "fdl.yaml"

    def test_missing_base(self, tmp_path):
        with pytest.raises(FdlConfigError) as err:
            fc.find_base_manifest(tmp_path)
        assert str(tmp_path) in str(err.value)
        assert "fdl.yaml, fdl.yml, fdl.json" in str(err.value)

    def test_overlay_preference_order(self, tmp_path):
        base = write(tmp_path / "fdl.yml", "")
        assert fc.find_overlay(base, "lab") is None
        write(tmp_path / "fdl.lab.json", "{}")
        assert fc.find_overlay(base, "lab").name == "fdl.lab.json"
        write(tmp_path / "fdl.lab.yml", "")
        assert fc.find_overlay(base, "lab").name == "fdl.lab.yml"
        write(tmp_path / "fdl.lab.yaml", "")
        assert fc.find_overlay(base, "lab").name == "fdl.lab.yaml"

    def test_missing_overlay_error_names_expected_file(self, tmp_path):
        base = write(tmp_path / "fdl.yml", "")
        with pytest.raises(FdlConfigError) as err:
            fc.require_overlay(base, "gpu")
        text = str(err.value)
        assert "environment `gpu` not found" in text
        assert "expected fdl.gpu.yml next to %s" % base in text

    def test_missing_overlay_via_load_config(self, tmp_path):
        write(tmp_path / "fdl.yml", "")
        with pytest.raises(FdlConfigError, match=r"expected fdl\.cluster\.yml next to"):
            fc.load_config(tmp_path)

    @pytest.mark.parametrize("env", ["../x", "a/b", "..", ""])
    def test_env_name_must_be_plain(self, tmp_path, env):
        base = write(tmp_path / "fdl.yml", "")
        with pytest.raises(FdlConfigError):
            fc.find_overlay(base, env)

    def test_no_env_reads_base_alone(self, tmp_path):
        write(tmp_path / "fdl.yml", "cluster: {a: 1}\n")
        config = fc.load_config(tmp_path, None)
        assert config.overlay is None and config.env is None
        assert config.data == {"cluster": {"a": 1}}

    def test_json_manifest_and_overlay(self, tmp_path):
        write(tmp_path / "fdl.json", json.dumps({"a": {"x": 1}}))
        write(tmp_path / "fdl.cluster.json", json.dumps({"a": {"y": 2}}))
        assert fc.load_config(tmp_path).data == {"a": {"x": 1, "y": 2}}

    def test_overlay_merges_over_base(self, tmp_path):
        write(tmp_path / "fdl.yml", "cluster:\n  controller: {host: a, path: /p, docker: cuda}\n  workers: [1, 2]\n")
        write(tmp_path / "fdl.cluster.yml", "cluster:\n  controller: {host: b, docker: null}\n  workers: [3]\n")
        config = fc.load_config(tmp_path)
        assert config.data == {"cluster": {"controller": {"host": "b", "path": "/p"}, "workers": [3]}}
        assert [p.name for p in config.files] == ["fdl.yml", "fdl.cluster.yml"]

    def test_empty_files_are_empty_maps(self, tmp_path):
        write(tmp_path / "fdl.yml", "# only a comment\n")
        write(tmp_path / "fdl.cluster.yml", "")
        assert fc.load_config(tmp_path).data == {}

    def test_non_mapping_document(self, tmp_path):
        path = write(tmp_path / "fdl.yml", "- a\n- b\n")
        with pytest.raises(FdlConfigError) as err:
            fc.load_document(path)
        assert str(path) in str(err.value) and "mapping" in str(err.value)

    def test_yaml_syntax_error_names_file(self, tmp_path):
        path = write(tmp_path / "fdl.yml", "a: [1\n")
        with pytest.raises(FdlConfigError) as err:
            fc.load_document(path)
        assert str(path) in str(err.value)


# ---------------------------------------------------------------- inherit-from


class TestInheritFrom:
    def test_chain_order_deepest_first(self, tmp_path):
        write(tmp_path / "shared" / "root.yml", "a: root\nroot_only: 1\n")
        write(tmp_path / "shared" / "mid.yml", "inherit-from: root.yml\na: mid\n")
        leaf = write(tmp_path / "fdl.yml", "inherit-from: shared/mid.yml\nleaf: 1\n")
        chain = fc.resolve_chain(leaf)
        assert [p.name for p, unused in chain] == ["root.yml", "mid.yml", "fdl.yml"]
        assert all(fc.INHERIT_KEY not in doc for unused, doc in chain)
        assert fc.merge_layers([d for unused, d in chain]) == {"a": "mid", "root_only": 1, "leaf": 1}

    def test_relative_to_declaring_file(self, tmp_path):
        write(tmp_path / "a" / "b" / "parent.yml", "p: 1\n")
        write(tmp_path / "a" / "child.yml", "inherit-from: b/parent.yml\n")
        leaf = write(tmp_path / "fdl.yml", "inherit-from: a/child.yml\n")
        assert [p.name for p, unused in fc.resolve_chain(leaf)] == ["parent.yml", "child.yml", "fdl.yml"]

    def test_absolute_parent_inside_the_project(self, tmp_path):
        parent = write(tmp_path / "proj" / "shared" / "p.yml", "x: 1\n")
        leaf = write(tmp_path / "proj" / "fdl.yml", "inherit-from: %s\n" % parent)
        assert fc.merge_layers([d for unused, d in fc.resolve_chain(leaf)]) == {"x": 1}

    def test_absolute_parent_outside_needs_an_explicit_root(self, tmp_path):
        parent = write(tmp_path / "elsewhere" / "p.yml", "x: 1\n")
        leaf = write(tmp_path / "proj" / "fdl.yml", "inherit-from: %s\n" % parent)
        with pytest.raises(FdlConfigError, match="is outside the project"):
            fc.resolve_chain(leaf)
        chain = fc.resolve_chain(leaf, roots=[tmp_path / "proj", tmp_path / "elsewhere"])
        assert fc.merge_layers([d for unused, d in chain]) == {"x": 1}

    SECRET = "-----BEGIN OPENSSH PRIVATE KEY-----\n  b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"

    @pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink", "home"])
    def test_outside_parent_is_refused_before_it_is_read(self, tmp_path, monkeypatch, how):
        secret = write(tmp_path / "home" / ".ssh" / "id_ed25519", self.SECRET)
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        value = {
            "dotdot": "../home/.ssh/id_ed25519",
            "absolute": str(secret),
            "symlink": "innocent.yml",
            "home": "~/.ssh/id_ed25519",
        }[how]
        (tmp_path / "proj").mkdir()
        (tmp_path / "proj" / "innocent.yml").symlink_to(secret)
        leaf = write(tmp_path / "proj" / "fdl.yml", "inherit-from: %s\n" % value)
        with pytest.raises(FdlConfigError) as err:
            fc.resolve_chain(leaf)
        text = str(err.value)
        assert "is outside the project (%s)" % (tmp_path / "proj") in text
        assert str(secret) in text
        assert "BEGIN" not in text and "b3Bl" not in text
        assert err.value.files == [str(leaf)] and err.value.key == "inherit-from"

    def test_a_parent_that_is_a_yaml_string_reports_type_and_size_only(self, tmp_path):
        parent = write(tmp_path / "notes.yml", self.SECRET)
        leaf = write(tmp_path / "fdl.yml", "inherit-from: notes.yml\n")
        with pytest.raises(FdlConfigError) as err:
            fc.resolve_chain(leaf)
        size = len(self.SECRET.encode())
        assert str(err.value) == (
            "%s: inherit-from: inherit-from target `%s` (%d bytes) is not a mapping at its top level; its content "
            "is not shown (fix: point inherit-from at an fdl config file (`key: value` entries) inside the project)"
            % (leaf, parent, size)
        )

    def test_a_parent_with_a_yaml_error_reports_the_position_only(self, tmp_path):
        write(tmp_path / "bad.yml", "a: 1\ntoken: [hunter2\n")
        leaf = write(tmp_path / "fdl.yml", "inherit-from: bad.yml\n")
        with pytest.raises(FdlConfigError, match=r"is not valid YAML \(line \d+, column \d+\)") as err:
            fc.resolve_chain(leaf)
        assert "hunter2" not in str(err.value)

    def test_a_json_parent_error_reports_the_position_only(self, tmp_path):
        # The trailing comma: column 21 (the brace) up to Python 3.11, 20 (the comma) from 3.13.
        write(tmp_path / "bad.json", '{"token": "hunter2",}')
        leaf = write(tmp_path / "fdl.yml", "inherit-from: bad.json\n")
        with pytest.raises(FdlConfigError, match=r"is not valid JSON \(line 1, column 2[01]\)") as err:
            fc.resolve_chain(leaf)
        assert "hunter2" not in str(err.value)

    def test_non_string_inherit_from_reports_type_and_size(self, tmp_path):
        leaf = write(tmp_path / "fdl.yml", "inherit-from: [secret-one, secret-two]\n")
        with pytest.raises(FdlConfigError, match="must be a string path, got a list of 2 items") as err:
            fc.resolve_chain(leaf)
        assert "secret" not in str(err.value)

    def test_url_value_is_not_echoed(self, tmp_path):
        leaf = write(tmp_path / "fdl.yml", "inherit-from: https://user:token@example.invalid/x.yml\n")
        with pytest.raises(FdlConfigError, match="remote parents") as err:
            fc.resolve_chain(leaf)
        assert "token" not in str(err.value)

    def test_overlay_chain_and_dedupe_first_kept(self, tmp_path):
        write(tmp_path / "common.yml", "cluster: {env: {A: common}}\nshared: common\n")
        write(tmp_path / "fdl.yml", "inherit-from: common.yml\nshared: base\n")
        # The overlay inherits the same common.yml: it must not be re-applied
        # (which would clobber `shared: base`).
        write(tmp_path / "fdl.cluster.yml", "inherit-from: common.yml\nextra: 1\n")
        config = fc.load_config(tmp_path)
        assert [p.name for p in config.files] == ["common.yml", "fdl.yml", "fdl.cluster.yml"]
        assert config.data["shared"] == "base"
        assert config.data["extra"] == 1

    def test_dedupe_by_canonical_path(self, tmp_path):
        write(tmp_path / "real" / "common.yml", "x: 1\n")
        (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
        write(tmp_path / "fdl.yml", "inherit-from: real/common.yml\n")
        write(tmp_path / "fdl.cluster.yml", "inherit-from: link/common.yml\n")
        config = fc.load_config(tmp_path)
        assert [p.name for p in config.files] == ["common.yml", "fdl.yml", "fdl.cluster.yml"]

    def test_cycle_detected(self, tmp_path):
        write(tmp_path / "a.yml", "inherit-from: b.yml\n")
        write(tmp_path / "b.yml", "inherit-from: a.yml\n")
        leaf = write(tmp_path / "fdl.yml", "inherit-from: a.yml\n")
        with pytest.raises(FdlConfigError, match="inherit-from cycle detected") as err:
            fc.resolve_chain(leaf)
        assert "a.yml -> " in str(err.value)

    def test_self_inheritance_is_a_cycle(self, tmp_path):
        leaf = write(tmp_path / "fdl.yml", "inherit-from: fdl.yml\n")
        with pytest.raises(FdlConfigError, match="cycle"):
            fc.resolve_chain(leaf)

    def test_missing_parent_names_declaring_file(self, tmp_path):
        leaf = write(tmp_path / "fdl.yml", "inherit-from: nope.yml\n")
        with pytest.raises(FdlConfigError) as err:
            fc.resolve_chain(leaf)
        assert str(leaf) in str(err.value) and "nope.yml" in str(err.value)

    @pytest.mark.parametrize("value", ["3", "''", "[a.yml]", "https://example.invalid/fdl.yml"])
    def test_bad_values(self, tmp_path, value):
        leaf = write(tmp_path / "fdl.yml", "inherit-from: %s\n" % value)
        with pytest.raises(FdlConfigError, match="inherit-from"):
            fc.resolve_chain(leaf)

    def test_null_inherit_from_is_ignored(self, tmp_path):
        leaf = write(tmp_path / "fdl.yml", "inherit-from: null\na: 1\n")
        assert fc.resolve_chain(leaf)[0][1] == {"a": 1}


# ---------------------------------------------------------------- validation


def error_for(cluster, files=("/p/fdl.yml", "/p/fdl.cluster.yml")) -> str:
    with pytest.raises(FdlConfigError) as err:
        fc.validate_cluster(cluster, files)
    return str(err.value)


class TestValidation:
    def test_valid_minimal(self):
        cluster = minimal_cluster()
        assert fc.validate_cluster(cluster) is cluster

    def test_unknown_worker_key_names_file_and_key_path(self, tmp_path):
        write(tmp_path / "fdl.yml", "")
        text = CLUSTER_YML.replace("      data_path: /mnt/datasets\n", "      data_path: /mnt/datasets\n      gpus: 2\n")
        write(tmp_path / "fdl.cluster.yml", text)
        config = fc.load_config(tmp_path)
        with pytest.raises(FdlConfigError) as err:
            fc.cluster_block(config)
        message = str(err.value)
        assert str(tmp_path / "fdl.yml") in message
        assert str(tmp_path / "fdl.cluster.yml") in message
        assert 'cluster.workers[1] ("gpu-b").gpus' in message
        assert "unknown key" in message and "local_devices" in message  # lists allowed keys
        assert err.value.key == 'cluster.workers[1] ("gpu-b").gpus'

    @pytest.mark.parametrize(
        "mutate, key",
        [
            (lambda c: c.update(hosts=[]), "cluster.hosts"),
            (lambda c: c["controller"].update(master_port=29500), "cluster.controller.master_port"),
            (lambda c: c["controller"].update(ranks=[0]), "cluster.controller.ranks"),
            (lambda c: c["controller"].update(join={"windw": 3}), "cluster.controller.join.windw"),
            (lambda c: c["workers"][0].update(ssh={"host": "x"}), 'cluster.workers[0] ("gpu-a").ssh.host'),
        ],
    )
    def test_unknown_keys_every_level(self, mutate, key):
        cluster = minimal_cluster()
        mutate(cluster)
        message = error_for(cluster)
        assert key + ": unknown key" in message
        assert message.startswith("/p/fdl.yml + /p/fdl.cluster.yml: ")

    def test_ranks_refused(self):
        message = error_for(minimal_cluster(ranks=[0, 1]))
        assert 'cluster.workers[0] ("gpu-a")' in message
        assert "declares `ranks:`, which is not user configuration" in message
        assert "Remove the key" in message

    def test_ranks_checked_after_merge(self, tmp_path):
        write(tmp_path / "fdl.yml", "cluster:\n  workers:\n    - {host: a, ranks: [0]}\n")
        write(tmp_path / "fdl.cluster.yml", CLUSTER_YML)  # replaces the whole workers list
        fc.cluster_block(fc.load_config(tmp_path))

    @pytest.mark.parametrize("value", ["all", [0], [0, 1, 7], [255]])
    def test_local_devices_accepted(self, value):
        fc.validate_cluster(minimal_cluster(local_devices=value))

    @pytest.mark.parametrize(
        "value, key_suffix",
        [
            ("ALL", "local_devices"),
            ("0,1", "local_devices"),
            (2, "local_devices"),
            ([], "local_devices"),
            ([0, 256], "local_devices[1]"),
            ([-1], "local_devices[0]"),
            ([True], "local_devices[0]"),
            (["0"], "local_devices[0]"),
        ],
    )
    def test_local_devices_rejected(self, value, key_suffix):
        message = error_for(minimal_cluster(local_devices=value))
        assert 'cluster.workers[0] ("gpu-a").' + key_suffix + ":" in message
        assert '"all"' in message

    @pytest.mark.parametrize("missing", ["host", "local_devices", "nccl_socket_ifname", "path"])
    def test_worker_required_keys(self, missing):
        cluster = minimal_cluster()
        del cluster["workers"][0][missing]
        assert "." + missing + ": required key is missing" in error_for(cluster)

    @pytest.mark.parametrize("missing", ["host", "path"])
    def test_controller_required_keys(self, missing):
        cluster = minimal_cluster()
        del cluster["controller"][missing]
        assert "cluster.controller." + missing + ": required key is missing" in error_for(cluster)

    def test_workers_key_required_but_may_be_empty(self):
        cluster = minimal_cluster()
        cluster["workers"] = []
        fc.validate_cluster(cluster)
        del cluster["workers"]
        assert "cluster.workers: required key is missing" in error_for(cluster)

    @pytest.mark.parametrize("port", [-1, 65536, "1337", True, 1.5])
    def test_controller_port_u16(self, port):
        cluster = minimal_cluster()
        cluster["controller"]["port"] = port
        assert "cluster.controller.port: expected an integer in 0..65535" in error_for(cluster)

    def test_ssh_port_u16(self):
        message = error_for(minimal_cluster(ssh={"port": 70000}))
        assert 'cluster.workers[0] ("gpu-a").ssh.port: expected an integer in 0..65535' in message

    def test_ssh_options_strings(self):
        message = error_for(minimal_cluster(ssh={"options": ["A=b", {"B": "c"}]}))
        assert 'ssh.options[1]: expected a Key=Value string' in message
        assert "expected a list" in error_for(minimal_cluster(ssh={"options": "A=b"}))

    @pytest.mark.parametrize("share", [-0.1, float("nan"), float("inf"), "0.5", True])
    def test_gpu_ram_share_rejected(self, share):
        message = error_for(minimal_cluster(gpu_ram_share=share))
        assert "gpu_ram_share: must be a non-negative fraction of host RAM (e.g. 0.5)" in message
        cluster = minimal_cluster()
        cluster["gpu_ram_share"] = share
        assert "cluster.gpu_ram_share: must be a non-negative" in error_for(cluster)

    @pytest.mark.parametrize("share", [0, 0.5, 1.5, 2])
    def test_gpu_ram_share_accepted(self, share):
        cluster = minimal_cluster(gpu_ram_share=share)
        cluster["gpu_ram_share"] = share
        fc.validate_cluster(cluster)

    def test_tunnel_bool(self):
        assert "tunnel: expected true or false" in error_for(minimal_cluster(tunnel="yes"))
        fc.validate_cluster(minimal_cluster(tunnel=True))

    def test_env_string_values(self):
        message = error_for(minimal_cluster(env={"NCCL_DEBUG": "WARN", "OMP_NUM_THREADS": 4}))
        assert 'cluster.workers[0] ("gpu-a").env.OMP_NUM_THREADS: environment values must be strings' in message
        assert 'OMP_NUM_THREADS: "4"' in message  # the fix
        cluster = minimal_cluster()
        cluster["env"] = ["A=b"]
        assert "cluster.env: expected a mapping" in error_for(cluster)

    def test_join_types_and_start(self):
        cluster = minimal_cluster()
        cluster["controller"]["join"] = {"start": "later"}
        assert "cluster.controller.join.start: must be one of auto | manual | hybrid" in error_for(cluster)
        cluster["controller"]["join"] = {"min_rank_start": "2"}
        assert "cluster.controller.join.min_rank_start: expected a non-negative integer" in error_for(cluster)
        cluster["controller"]["join"] = {"discovery": True, "min_rank_start": 2, "start": "hybrid", "token": "ab" * 16}
        fc.validate_cluster(cluster)

    def test_string_fields(self):
        message = error_for(minimal_cluster(arch=128))
        assert 'cluster.workers[0] ("gpu-a").arch: expected a string, got an integer (128)' in message

    def test_worker_without_host_label(self):
        cluster = minimal_cluster()
        cluster["workers"].append({"local_devices": [0], "nccl_socket_ifname": "e", "path": "/p"})
        assert "cluster.workers[1].host: required key is missing" in error_for(cluster)

    def test_no_cluster_block(self, tmp_path):
        write(tmp_path / "fdl.yml", BASE_YML)
        write(tmp_path / "fdl.cluster.yml", "description: nothing\n")
        with pytest.raises(FdlConfigError, match=r"no `cluster:` block"):
            fc.cluster_block(fc.load_config(tmp_path))


# ---------------------------------------------------------------- mapping


class TestMapping:
    def test_example_project(self, project):
        workers, cluster_vars = fc.build_inventory(project)
        assert [name for name, unused in workers] == ["gpu-a", "gpu-b"]
        gpu_a, gpu_b = (v for unused, v in workers)
        assert gpu_a == {
            "flodl_host": "gpu-a",
            "flodl_path": "/opt/proj",
            "flodl_local_devices": [0, 1],
            "flodl_nccl_socket_ifname": "enp1s0",
            "flodl_arch": "precompiled/cu128",
            "ansible_host": "gpu-a",
        }
        assert gpu_b["flodl_local_devices"] == "all"
        assert gpu_b["flodl_data_path"] == "/mnt/datasets"
        # the raw ssh block, identity file as written (flodl ships it that way)
        assert gpu_b["flodl_ssh"] == {
            "user": "alice",
            "port": 2222,
            "identity_file": ".fdl/keys/gpu-b",
            "options": ["ConnectTimeout=5", "ProxyCommand=ssh -W %h:%p bastion"],
        }
        assert gpu_b["ansible_host"] == "gpu-b"
        assert gpu_b["ansible_port"] == 2222
        assert gpu_b["ansible_user"] == "alice"
        assert gpu_b["ansible_ssh_private_key_file"] == str(project / ".fdl/keys/gpu-b")
        assert shlex.split(gpu_b["ansible_ssh_common_args"]) == [
            "-o", "ConnectTimeout=5", "-o", "ProxyCommand=ssh -W %h:%p bastion",
        ]
        assert cluster_vars == {
            "flodl_controller_host": "192.168.1.10",
            "flodl_controller_path": "/opt/proj",
            "flodl_controller_docker": "cuda",
            "flodl_cluster_env": {"NCCL_DEBUG": "WARN"},
            "flodl_fdl_env": "cluster",
            "flodl_cmd": "train",
        }

    def test_optional_worker_vars_only_when_present(self):
        worker = {
            "host": "h", "local_devices": [0], "nccl_socket_ifname": "", "path": "/p",
            "tunnel": False, "docker": "cuda", "env": {}, "gpu_ram_share": 0.5,
        }
        hostvars = fc.worker_hostvars(worker, "/proj")
        assert hostvars["flodl_tunnel"] is False
        assert hostvars["flodl_docker"] == "cuda"
        assert hostvars["flodl_env"] == {}
        assert hostvars["flodl_gpu_ram_share"] == 0.5
        assert "flodl_arch" not in hostvars and "flodl_ssh" not in hostvars
        assert not any(k.startswith("ansible_") and k != "ansible_host" for k in hostvars)

    def test_ssh_target_is_ansible_host(self):
        hostvars = fc.worker_hostvars(
            {"host": "gpu-b", "local_devices": "all", "nccl_socket_ifname": "e", "path": "/p",
             "ssh": {"target": "10.1.2.3"}}, "/proj")
        assert hostvars["ansible_host"] == "10.1.2.3"
        assert hostvars["flodl_host"] == "gpu-b"

    @pytest.mark.parametrize(
        "identity, expected",
        [
            ("/etc/keys/id", "/etc/keys/id"),
            ("~/.ssh/id_ed25519", "~/.ssh/id_ed25519"),
            ("~alice/.ssh/id", "~alice/.ssh/id"),
            ("keys/id", "/proj/keys/id"),
            ("./keys/id", "/proj/keys/id"),
        ],
    )
    def test_identity_file_resolution(self, identity, expected):
        assert fc.identity_for_ansible(identity, "/proj") == expected

    def test_ssh_common_args_quoting(self):
        assert fc.ssh_common_args(["A=b"]) == "-o A=b"
        assert fc.ssh_common_args(["ProxyCommand=ssh -W %h:%p j'mp"]) == "-o 'ProxyCommand=ssh -W %h:%p j'\"'\"'mp'"

    def test_controller_optional_vars(self):
        cluster = minimal_cluster()
        cluster["controller"].update(port=2000, arch="precompiled/cpu", data_path="/d",
                                     join={"discovery": True, "min_rank_start": 2})
        cluster["gpu_ram_share"] = 0.25
        unused, cluster_vars = fc.inventory_from_cluster(cluster, "/proj", None)
        assert cluster_vars == {
            "flodl_controller_host": "10.0.0.1",
            "flodl_controller_path": "/p",
            "flodl_controller_port": 2000,
            "flodl_controller_arch": "precompiled/cpu",
            "flodl_controller_data_path": "/d",
            "flodl_controller_join": {"discovery": True, "min_rank_start": 2},
            "flodl_cluster_gpu_ram_share": 0.25,
        }

    def test_worker_order_is_rank_order(self):
        cluster = minimal_cluster()
        cluster["workers"] = [
            {"host": h, "local_devices": [0], "nccl_socket_ifname": "e", "path": "/p"} for h in ("c", "a", "b")
        ]
        workers, unused = fc.inventory_from_cluster(cluster, "/proj", "cluster")
        assert [n for n, unused in workers] == ["c", "a", "b"]

    def test_duplicate_host_refused(self):
        cluster = minimal_cluster()
        cluster["workers"].append(dict(cluster["workers"][0]))
        with pytest.raises(FdlConfigError) as err:
            fc.inventory_from_cluster(cluster, "/proj", "cluster", files=["/p/fdl.yml"])
        assert 'cluster.workers[1] ("gpu-a").host' in str(err.value)
        assert "/p/fdl.yml" in str(err.value)

    def test_mapping_does_not_alias_input(self):
        cluster = minimal_cluster(env={"A": "1"})
        workers, unused = fc.inventory_from_cluster(cluster, "/proj", None)
        workers[0][1]["flodl_env"]["A"] = "changed"
        assert cluster["workers"][0]["env"] == {"A": "1"}

    def test_inventory_from_cluster_validates(self):
        with pytest.raises(FdlConfigError, match="ranks"):
            fc.inventory_from_cluster(minimal_cluster(ranks=[0]), "/proj", None)


class TestCommands:
    @pytest.mark.parametrize(
        "commands, expected",
        [
            ({"train": {"cluster": True}, "test": {"run": "x"}}, "train"),
            ({"train": {"cluster": True}, "bench": {"cluster": True}}, None),  # ambiguous
            ({"train": {"cluster": False}}, None),
            ({"train": None}, None),
            ({"train": {"commands": {"quick": {"cluster": True}}}}, "train"),
            ({"train": {"cluster": True, "commands": {"quick": {"cluster": False}}}}, "train"),
            ({"a": {"commands": {"x": {"cluster": True}}}, "b": {"cluster": True}}, None),
            (None, None),
            ([], None),
        ],
    )
    def test_cluster_command(self, commands, expected):
        assert fc.cluster_command(commands) == expected

    def test_cmd_dir_only_for_existing_sub_project(self, tmp_path):
        assert fc.command_dir("train", {"cluster": True}, tmp_path) is None
        write(tmp_path / "train" / "fdl.yml", "entry: cargo run --release --bin train\n")
        assert fc.command_dir("train", {"cluster": True}, tmp_path) == "train"
        write(tmp_path / "apps" / "trainer" / "fdl.yaml", "")
        assert fc.command_dir("train", {"path": "./apps/trainer/"}, tmp_path) == "apps/trainer"
        assert fc.command_dir("train", {"run": "cargo run"}, tmp_path) is None
        assert fc.command_dir("train", {"options": {"epochs": 1}}, tmp_path) is None
        write(tmp_path.parent / "outside" / "fdl.yml", "")
        assert fc.command_dir("train", {"path": "../outside"}, tmp_path) is None

    def test_cmd_dir_in_cluster_vars(self, project):
        write(project / "train" / "fdl.yml", "entry: cargo run --bin train\n")
        unused, cluster_vars = fc.build_inventory(project)
        assert cluster_vars["flodl_cmd"] == "train"
        assert cluster_vars["flodl_cmd_dir"] == "train"


def test_error_attributes():
    err = FdlConfigError("bad", files=[Path("/a"), "/b"], key="cluster.x", fix="do y")
    assert str(err) == "/a + /b: cluster.x: bad (fix: do y)"
    assert err.files == ["/a", "/b"] and err.key == "cluster.x"
    assert str(FdlConfigError("plain")) == "plain"
