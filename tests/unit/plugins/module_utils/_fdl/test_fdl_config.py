"""Unit tests for the fdl config loader (docs/launcher-contract.md §2a-§2e)."""
from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._fdl import fdl_chain as fch
from ansible_collections.flodl.cluster.plugins.module_utils._fdl import fdl_commands
from ansible_collections.flodl.cluster.plugins.module_utils._fdl import fdl_config as fc
from ansible_collections.flodl.cluster.plugins.module_utils._fdl import fdl_inventory as fi
from ansible_collections.flodl.cluster.plugins.module_utils._fdl import fdl_yaml
from ansible_collections.flodl.cluster.plugins.module_utils._cluster import topology
from ansible_collections.flodl.cluster.plugins.module_utils._fdl.fdl_error import FdlConfigError

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

    @pytest.mark.parametrize("where", ["absent", "a file"])
    def test_a_project_directory_that_is_no_directory(self, tmp_path, where):
        project = tmp_path / "proj"
        if where == "a file":
            write(project, "cluster: {}\n")
        with pytest.raises(FdlConfigError, match="project directory does not exist or is not a directory") as err:
            fc.find_base_manifest(project)
        assert err.value.files == [str(project)]

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
            fch.load_document(path)
        assert str(path) in str(err.value) and "mapping" in str(err.value)

    def test_yaml_syntax_error_names_file(self, tmp_path):
        path = write(tmp_path / "fdl.yml", "a: [1\n")
        with pytest.raises(FdlConfigError) as err:
            fch.load_document(path)
        assert str(path) in str(err.value)


# ---------------------------------------------------------------- inherit-from


class TestInheritFrom:
    def test_chain_order_deepest_first(self, tmp_path):
        write(tmp_path / "shared" / "root.yml", "a: root\nroot_only: 1\n")
        write(tmp_path / "shared" / "mid.yml", "inherit-from: root.yml\na: mid\n")
        leaf = write(tmp_path / "fdl.yml", "inherit-from: shared/mid.yml\nleaf: 1\n")
        chain = fch.resolve_chain(leaf)
        assert [p.name for p, unused in chain] == ["root.yml", "mid.yml", "fdl.yml"]
        assert all(fch.INHERIT_KEY not in doc for unused, doc in chain)
        assert fc.merge_layers([d for unused, d in chain]) == {"a": "mid", "root_only": 1, "leaf": 1}

    def test_relative_to_declaring_file(self, tmp_path):
        write(tmp_path / "a" / "b" / "parent.yml", "p: 1\n")
        write(tmp_path / "a" / "child.yml", "inherit-from: b/parent.yml\n")
        leaf = write(tmp_path / "fdl.yml", "inherit-from: a/child.yml\n")
        assert [p.name for p, unused in fch.resolve_chain(leaf)] == ["parent.yml", "child.yml", "fdl.yml"]

    def test_absolute_parent_inside_the_project(self, tmp_path):
        parent = write(tmp_path / "proj" / "shared" / "p.yml", "x: 1\n")
        leaf = write(tmp_path / "proj" / "fdl.yml", "inherit-from: %s\n" % parent)
        assert fc.merge_layers([d for unused, d in fch.resolve_chain(leaf)]) == {"x": 1}

    def test_absolute_parent_outside_needs_an_explicit_root(self, tmp_path):
        parent = write(tmp_path / "elsewhere" / "p.yml", "x: 1\n")
        leaf = write(tmp_path / "proj" / "fdl.yml", "inherit-from: %s\n" % parent)
        with pytest.raises(FdlConfigError, match="is outside the project"):
            fch.resolve_chain(leaf)
        chain = fch.resolve_chain(leaf, roots=[tmp_path / "proj", tmp_path / "elsewhere"])
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
            fch.resolve_chain(leaf)
        text = str(err.value)
        assert "is outside the project (%s)" % (tmp_path / "proj") in text
        assert str(secret) in text
        assert "BEGIN" not in text and "b3Bl" not in text
        assert err.value.files == [str(leaf)] and err.value.key == "inherit-from"

    def test_a_parent_that_is_a_yaml_string_reports_type_and_size_only(self, tmp_path):
        parent = write(tmp_path / "notes.yml", self.SECRET)
        leaf = write(tmp_path / "fdl.yml", "inherit-from: notes.yml\n")
        with pytest.raises(FdlConfigError) as err:
            fch.resolve_chain(leaf)
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
            fch.resolve_chain(leaf)
        assert "hunter2" not in str(err.value)

    def test_a_json_parent_error_reports_the_position_only(self, tmp_path):
        # The trailing comma: column 21 (the brace) up to Python 3.11, 20 (the comma) from 3.13.
        write(tmp_path / "bad.json", '{"token": "hunter2",}')
        leaf = write(tmp_path / "fdl.yml", "inherit-from: bad.json\n")
        with pytest.raises(FdlConfigError, match=r"is not valid JSON \(line 1, column 2[01]\)") as err:
            fch.resolve_chain(leaf)
        assert "hunter2" not in str(err.value)

    def test_non_string_inherit_from_reports_type_and_size(self, tmp_path):
        leaf = write(tmp_path / "fdl.yml", "inherit-from: [secret-one, secret-two]\n")
        with pytest.raises(FdlConfigError, match="must be a string path, got a list of 2 items") as err:
            fch.resolve_chain(leaf)
        assert "secret" not in str(err.value)

    def test_url_value_is_not_echoed(self, tmp_path):
        leaf = write(tmp_path / "fdl.yml", "inherit-from: https://user:token@example.invalid/x.yml\n")
        with pytest.raises(FdlConfigError, match="remote parents") as err:
            fch.resolve_chain(leaf)
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
            fch.resolve_chain(leaf)
        assert "a.yml -> " in str(err.value)

    def test_self_inheritance_is_a_cycle(self, tmp_path):
        leaf = write(tmp_path / "fdl.yml", "inherit-from: fdl.yml\n")
        with pytest.raises(FdlConfigError, match="cycle"):
            fch.resolve_chain(leaf)

    def test_missing_parent_names_declaring_file(self, tmp_path):
        leaf = write(tmp_path / "fdl.yml", "inherit-from: nope.yml\n")
        with pytest.raises(FdlConfigError) as err:
            fch.resolve_chain(leaf)
        assert str(leaf) in str(err.value) and "nope.yml" in str(err.value)

    @pytest.mark.parametrize("value", ["3", "''", "[a.yml]", "https://example.invalid/fdl.yml"])
    def test_bad_values(self, tmp_path, value):
        leaf = write(tmp_path / "fdl.yml", "inherit-from: %s\n" % value)
        with pytest.raises(FdlConfigError, match="inherit-from"):
            fch.resolve_chain(leaf)

    def test_null_inherit_from_is_ignored(self, tmp_path):
        leaf = write(tmp_path / "fdl.yml", "inherit-from: null\na: 1\n")
        assert fch.resolve_chain(leaf)[0][1] == {"a": 1}

    @pytest.mark.parametrize("value, shape", [
        ("true", "a boolean"),
        ("{path: secret.yml, token: hunter2}", "a mapping of 2 keys"),
        ("!!binary aHVudGVyMg==", "a bytes"),
    ])
    def test_a_non_string_inherit_from_is_told_by_its_shape_only(self, tmp_path, value, shape):
        leaf = write(tmp_path / "fdl.yml", "inherit-from: %s\n" % value)
        with pytest.raises(FdlConfigError, match="must be a string path, got %s" % shape) as err:
            fch.resolve_chain(leaf)
        assert "hunter2" not in str(err.value) and "aHVudGVy" not in str(err.value) and "secret" not in str(err.value)
        assert err.value.key == "inherit-from"

    def test_a_nul_byte_in_inherit_from_is_refused_before_any_path_is_made(self, tmp_path):
        write(tmp_path / "a.yml", "x: 1\n")
        leaf = write(tmp_path / "fdl.yml", 'inherit-from: "a.yml\\0../../etc/passwd"\n')
        with pytest.raises(FdlConfigError, match="must not contain a NUL byte") as err:
            fch.resolve_chain(leaf)
        assert err.value.files == [str(leaf)]

    def test_a_parent_that_is_not_utf8_reports_that_only(self, tmp_path):
        (tmp_path / "blob.yml").write_bytes(b"token: \xff\xfehunter2\n")
        leaf = write(tmp_path / "fdl.yml", "inherit-from: blob.yml\n")
        with pytest.raises(FdlConfigError, match=r"\(17 bytes\) cannot be read as UTF-8 text; its content is not shown"
                           ) as err:
            fch.resolve_chain(leaf)
        assert "hunter2" not in str(err.value)

    def test_a_parent_too_deep_to_parse_reports_that_only(self, tmp_path):
        # No position to give (a RecursionError, not a syntax error): neither the text nor a line is shown.
        (tmp_path / "deep.json").write_text("[" * 200000, encoding="utf-8")
        leaf = write(tmp_path / "fdl.yml", "inherit-from: deep.json\n")
        with pytest.raises(FdlConfigError, match=r"\(200000 bytes\) cannot be parsed; its content is not shown") as err:
            fch.resolve_chain(leaf)
        assert "[[" not in str(err.value)


# ---------------------------------------------------------------- validation


def error_for(cluster, files=("/p/fdl.yml", "/p/fdl.cluster.yml")) -> str:
    with pytest.raises(FdlConfigError) as err:
        fi.validate_cluster(cluster, files)
    return str(err.value)


class TestValidation:
    def test_valid_minimal(self):
        cluster = minimal_cluster()
        assert fi.validate_cluster(cluster) is cluster

    def test_unknown_worker_key_names_file_and_key_path(self, tmp_path):
        write(tmp_path / "fdl.yml", "")
        text = CLUSTER_YML.replace("      data_path: /mnt/datasets\n", "      data_path: /mnt/datasets\n      gpus: 2\n")
        write(tmp_path / "fdl.cluster.yml", text)
        config = fc.load_config(tmp_path)
        with pytest.raises(FdlConfigError) as err:
            fi.cluster_block(config)
        message = str(err.value)
        assert str(tmp_path / "fdl.yml") in message
        assert str(tmp_path / "fdl.cluster.yml") in message
        assert len(err.value.problems) == 1, err.value.problems
        assert err.value.problems[0].startswith(
            'cluster.workers[1] ("gpu-b").gpus: unknown key "gpus"; remove it or fix its spelling; '
            "allowed: host, local_devices, nccl_socket_ifname,"  # lists allowed keys
        )
        assert message.endswith(": " + err.value.problems[0])

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
        assert 'cluster.workers[0] ("gpu-a").ranks: declares ranks, which is not user configuration' in message
        assert message.endswith("computed from local devices in worker order; remove the key")

    def test_ranks_checked_after_merge(self, tmp_path):
        write(tmp_path / "fdl.yml", "cluster:\n  workers:\n    - {host: a, ranks: [0]}\n")
        write(tmp_path / "fdl.cluster.yml", CLUSTER_YML)  # replaces the whole workers list
        fi.cluster_block(fc.load_config(tmp_path))

    @pytest.mark.parametrize("value", ["all", [0], [0, 1, 7], [255]])
    def test_local_devices_accepted(self, value):
        fi.validate_cluster(minimal_cluster(local_devices=value))

    @pytest.mark.parametrize(
        "value, problem",
        [
            ("ALL", 'must be `all` or a list of GPU indices, got a string ("ALL")'),
            ("0,1", 'must be `all` or a list of GPU indices, got a string ("0,1")'),
            (2, "must be `all` or a list of GPU indices, got an integer (2)"),
            ([], "is an empty list; a worker needs at least one device"),
            ([0, 256], "[1]: must be a GPU index 0-255, got an integer (256)"),
            ([-1], "[0]: must be a GPU index 0-255, got an integer (-1)"),
            ([True], "[0]: must be a GPU index 0-255, got a boolean (true)"),
            (["0"], '[0]: must be a GPU index 0-255, got a string ("0")'),
        ],
    )
    def test_local_devices_rejected(self, value, problem):
        message = error_for(minimal_cluster(local_devices=value))
        sep = "" if problem.startswith("[") else ": "
        assert 'cluster.workers[0] ("gpu-a").local_devices' + sep + problem + "; use `all` or a list of GPU indices like [0, 1]" in message

    def test_many_bad_gpu_entries_are_summed_up(self):
        message = error_for(minimal_cluster(local_devices=["a", "b", "c", "d", "e"]))
        assert 'local_devices[2]: must be a GPU index 0-255, got a string ("c")' in message
        assert 'local_devices[3]' not in message
        assert 'cluster.workers[0] ("gpu-a").local_devices: 2 more entries are not GPU indices 0-255' in message

    def test_secrets_are_never_echoed(self):
        token = 12345678901234567890123456789012
        cluster = minimal_cluster(env={"HF_TOKEN": 98765432109876543210987})
        cluster["controller"]["join"] = {"token": token}
        message = error_for(cluster)
        assert str(token) not in message and "98765432109876543210987" not in message
        assert "cluster.controller.join.token: must be a string of 32 hex characters, got an integer; quote it" in message
        assert 'env.HF_TOKEN: environment values must be strings, got an integer; write it as a quoted string' in message

    def test_single_worker_null_nccl_ifname_is_missing(self):
        message = error_for(minimal_cluster(nccl_socket_ifname=None))
        assert 'cluster.workers[0] ("gpu-a").nccl_socket_ifname: required key is missing' in message

    def test_duplicate_gpu_index_rejected(self):
        message = error_for(minimal_cluster(local_devices=[0, 1, 0, 1]))
        assert message.endswith(
            ': cluster.workers[0] ("gpu-a").local_devices: lists GPU 0, 1 more than once; each index is one rank; '
            "list every device once"
        )

    @pytest.mark.parametrize(
        "missing, problem",
        [
            ("host", "cluster.workers[0].host: is required: the worker's hostname"),
            ("local_devices", 'cluster.workers[0] ("gpu-a").local_devices: is required; use `all`'),
            ("nccl_socket_ifname", 'cluster.workers[0] ("gpu-a").nccl_socket_ifname: required key is missing'),
            ("path", 'cluster.workers[0] ("gpu-a").path: is required: the project checkout on that host'),
        ],
    )
    def test_worker_required_keys(self, missing, problem):
        cluster = minimal_cluster()
        del cluster["workers"][0][missing]
        assert problem in error_for(cluster)

    @pytest.mark.parametrize(
        "missing, problem",
        [
            ("host", "cluster.controller.host: is required: the address workers dial back to"),
            ("path", "cluster.controller.path: is required: the controller's view of the project root"),
        ],
    )
    def test_controller_required_keys(self, missing, problem):
        cluster = minimal_cluster()
        del cluster["controller"][missing]
        assert problem in error_for(cluster)

    def test_workers_key_required_and_empty_only_with_discovery(self):
        # One rule set with the inventory side: an empty roster needs controller.join.discovery: true
        # (the old fdl-only checker accepted `workers: []` on its own).
        cluster = minimal_cluster()
        cluster["workers"] = []
        assert error_for(cluster).endswith(
            ": cluster.workers: is empty; list the workers (an empty roster needs controller.join.discovery: true)"
        )
        cluster["controller"]["join"] = {"discovery": True}
        fi.validate_cluster(cluster)
        del cluster["workers"]
        assert "cluster.workers: required key is missing" in error_for(cluster)

    @pytest.mark.parametrize(
        "port, got",
        [
            (0, "an integer (0)"),  # fdl files used to accept 0; one rule with the inventory now
            (-1, "an integer (-1)"),
            (65536, "an integer (65536)"),
            ("1337", 'a string ("1337")'),
            (True, "a boolean (true)"),
            (1.5, "a number (1.5)"),
        ],
    )
    def test_controller_port_u16(self, port, got):
        cluster = minimal_cluster()
        cluster["controller"]["port"] = port
        assert "cluster.controller.port: must be a TCP port number 1-65535, got " + got in error_for(cluster)

    @pytest.mark.parametrize("port", [1, 1337, 65535])
    def test_controller_port_accepted(self, port):
        cluster = minimal_cluster()
        cluster["controller"]["port"] = port
        fi.validate_cluster(cluster)

    def test_ssh_port_u16(self):
        message = error_for(minimal_cluster(ssh={"port": 70000}))
        assert 'cluster.workers[0] ("gpu-a").ssh.port: must be a TCP port number 1-65535, got an integer (70000)' in message
        assert 'ssh.port: must be a TCP port number 1-65535, got an integer (0)' in error_for(minimal_cluster(ssh={"port": 0}))

    def test_ssh_options_strings(self):
        message = error_for(minimal_cluster(ssh={"options": ["A=b", {"B": "c"}]}))
        assert 'cluster.workers[0] ("gpu-a").ssh.options[1]: must be a Key=Value string, got a mapping' in message
        assert 'cluster.workers[0] ("gpu-a").ssh.options: must be a list of Key=Value strings, got a string ("A=b")' in (
            error_for(minimal_cluster(ssh={"options": "A=b"}))
        )

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
        fi.validate_cluster(cluster)

    def test_tunnel_bool(self):
        assert 'cluster.workers[0] ("gpu-a").tunnel: must be true or false, got a string ("yes")' in error_for(
            minimal_cluster(tunnel="yes")
        )
        fi.validate_cluster(minimal_cluster(tunnel=True))

    def test_env_string_values(self):
        message = error_for(minimal_cluster(env={"NCCL_DEBUG": "WARN", "OMP_NUM_THREADS": 4}))
        assert 'cluster.workers[0] ("gpu-a").env.OMP_NUM_THREADS: environment values must be strings' in message
        assert 'OMP_NUM_THREADS: "4"' in message  # the fix
        cluster = minimal_cluster()
        cluster["env"] = ["A=b"]
        assert 'cluster.env: must be a map of NAME: "value" strings, got a list' in error_for(cluster)

    def test_join_types_and_start(self):
        cluster = minimal_cluster()
        cluster["controller"]["join"] = {"start": "later"}
        assert "cluster.controller.join.start: must be one of auto | manual | hybrid" in error_for(cluster)
        cluster["controller"]["join"] = {"min_rank_start": "2"}
        assert 'cluster.controller.join.min_rank_start: must be a non-negative integer, got a string ("2")' in error_for(
            cluster
        )
        cluster["controller"]["join"] = {"discovery": True, "min_rank_start": 2, "start": "hybrid", "token": "ab" * 16}
        fi.validate_cluster(cluster)

    def test_string_fields(self):
        message = error_for(minimal_cluster(arch=128))
        assert 'cluster.workers[0] ("gpu-a").arch: must be a string, got an integer (128); quote the value' in message

    def test_worker_without_host_label(self):
        cluster = minimal_cluster()
        cluster["workers"].append({"local_devices": [0], "nccl_socket_ifname": "e", "path": "/p"})
        assert "cluster.workers[1].host: is required: the worker's hostname" in error_for(cluster)

    def test_no_cluster_block(self, tmp_path):
        write(tmp_path / "fdl.yml", BASE_YML)
        write(tmp_path / "fdl.cluster.yml", "description: nothing\n")
        with pytest.raises(FdlConfigError, match=r"no `cluster:` block"):
            fi.cluster_block(fc.load_config(tmp_path))


# ---------------------------------------------------------------- mapping


class TestMapping:
    def test_example_project(self, project):
        workers, cluster_vars = fi.build_inventory(project)
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
            "flodl_project_dir": str(project),
        }

    def test_optional_worker_vars_only_when_present(self):
        worker = {
            "host": "h", "local_devices": [0], "nccl_socket_ifname": "", "path": "/p",
            "tunnel": False, "docker": "cuda", "env": {}, "gpu_ram_share": 0.5,
        }
        hostvars = fi.worker_hostvars(worker, "/proj")
        assert hostvars["flodl_tunnel"] is False
        assert hostvars["flodl_docker"] == "cuda"
        assert hostvars["flodl_env"] == {}
        assert hostvars["flodl_gpu_ram_share"] == 0.5
        assert "flodl_arch" not in hostvars and "flodl_ssh" not in hostvars
        assert not any(k.startswith("ansible_") and k != "ansible_host" for k in hostvars)

    def test_ssh_target_is_ansible_host(self):
        hostvars = fi.worker_hostvars(
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
        assert fi.identity_for_ansible(identity, "/proj") == expected

    def test_ssh_common_args_quoting(self):
        assert fi.ssh_common_args(["A=b"]) == "-o A=b"
        assert fi.ssh_common_args(["ProxyCommand=ssh -W %h:%p j'mp"]) == "-o 'ProxyCommand=ssh -W %h:%p j'\"'\"'mp'"

    def test_controller_optional_vars(self):
        cluster = minimal_cluster()
        cluster["controller"].update(port=2000, arch="precompiled/cpu", data_path="/d",
                                     join={"discovery": True, "min_rank_start": 2})
        cluster["gpu_ram_share"] = 0.25
        unused, cluster_vars = fi.inventory_from_cluster(cluster, "/proj", None)
        assert cluster_vars == {
            "flodl_controller_host": "10.0.0.1",
            "flodl_controller_path": "/p",
            "flodl_controller_port": 2000,
            "flodl_controller_arch": "precompiled/cpu",
            "flodl_controller_data_path": "/d",
            "flodl_controller_join": {"discovery": True, "min_rank_start": 2},
            "flodl_cluster_gpu_ram_share": 0.25,
            "flodl_project_dir": "/proj",
        }

    def test_worker_order_is_rank_order(self):
        cluster = minimal_cluster()
        cluster["workers"] = [
            {"host": h, "local_devices": [0], "nccl_socket_ifname": "e", "path": "/p"} for h in ("c", "a", "b")
        ]
        workers, unused = fi.inventory_from_cluster(cluster, "/proj", "cluster")
        assert [n for n, unused in workers] == ["c", "a", "b"]

    def test_duplicate_host_refused(self):
        cluster = minimal_cluster()
        cluster["workers"].append(dict(cluster["workers"][0]))
        with pytest.raises(FdlConfigError) as err:
            fi.inventory_from_cluster(cluster, "/proj", "cluster", files=["/p/fdl.yml"])
        assert 'cluster.workers[1] ("gpu-a").host' in str(err.value)
        assert "/p/fdl.yml" in str(err.value)

    def test_mapping_does_not_alias_input(self):
        cluster = minimal_cluster(env={"A": "1"})
        workers, unused = fi.inventory_from_cluster(cluster, "/proj", None)
        workers[0][1]["flodl_env"]["A"] = "changed"
        assert cluster["workers"][0]["env"] == {"A": "1"}

    def test_inventory_from_cluster_validates(self):
        with pytest.raises(FdlConfigError, match="ranks"):
            fi.inventory_from_cluster(minimal_cluster(ranks=[0]), "/proj", None)


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
        assert fdl_commands.cluster_command(commands) == expected

    def test_cmd_dir_only_for_existing_sub_project(self, tmp_path):
        assert fdl_commands.command_dir("train", {"cluster": True}, tmp_path) is None
        write(tmp_path / "train" / "fdl.yml", "entry: cargo run --release --bin train\n")
        assert fdl_commands.command_dir("train", {"cluster": True}, tmp_path) == "train"
        write(tmp_path / "apps" / "trainer" / "fdl.yaml", "")
        assert fdl_commands.command_dir("train", {"path": "./apps/trainer/"}, tmp_path) == "apps/trainer"
        assert fdl_commands.command_dir("train", {"run": "cargo run"}, tmp_path) is None
        assert fdl_commands.command_dir("train", {"options": {"epochs": 1}}, tmp_path) is None
        write(tmp_path.parent / "outside" / "fdl.yml", "")
        assert fdl_commands.command_dir("train", {"path": "../outside"}, tmp_path) is None

    @pytest.mark.parametrize("spec", [{"path": 3}, {"path": ""}, {"path": ["train"]}, {"path": True}])
    def test_cmd_dir_of_a_path_that_is_no_text_is_none(self, tmp_path, spec):
        write(tmp_path / "train" / "fdl.yml", "")
        assert fdl_commands.command_dir("train", {"cluster": True}, tmp_path) == "train"
        assert fdl_commands.command_dir("train", {"cluster": True, **spec}, tmp_path) is None

    def test_cmd_dir_in_cluster_vars(self, project):
        write(project / "train" / "fdl.yml", "entry: cargo run --bin train\n")
        unused, cluster_vars = fi.build_inventory(project)
        assert cluster_vars["flodl_cmd"] == "train"
        assert cluster_vars["flodl_cmd_dir"] == "train"


def test_error_attributes():
    err = FdlConfigError("bad", files=[Path("/a"), "/b"], key="cluster.x", fix="do y")
    assert str(err) == "/a + /b: cluster.x: bad (fix: do y)"
    assert err.files == ["/a", "/b"] and err.key == "cluster.x"
    assert str(FdlConfigError("plain")) == "plain"


# ---------------------------------------------------------------- YAML 1.2 core schema, as serde_yaml reads it


@pytest.mark.parametrize(
    "text, value",
    [
        ("yes", "yes"), ("no", "no"), ("on", "on"), ("off", "off"), ("Yes", "Yes"), ("y", "y"),
        ("true", True), ("True", True), ("TRUE", True), ("false", False), ("False", False), ("FALSE", False),
        ("tRUE", "tRUE"),
        ("~", None), ("null", None), ("Null", None), ("NULL", None), ("", None), ("nULL", "nULL"),
        ("8", 8), ("+8", 8), ("-8", -8), ("0", 0), ("-0", 0),
        ("010", "010"), ("-010", "-010"), ("00", "00"),
        ("0o17", 15), ("0x1F", 31), ("0x1f", 31), ("0b101", 5), ("-0x10", -16), ("0X1F", "0X1F"),
        ("017", "017"), ("1_000", "1_000"), ("1:30", "1:30"),
        ("18446744073709551615", 18446744073709551615), ("18446744073709551616", 18446744073709551616.0),
        ("1e-7", 1e-7), ("1.0e16", 1e16), ("1E5", 100000.0), ("1e+5", 100000.0), ("0.00001", 0.00001),
        ("1.", 1.0), (".5", 0.5), ("-.5", -0.5), ("+1.5", 1.5), ("1.5e3", 1500.0),
        ("1e", "1e"), (".", "."), ("1e400", "1e400"), ("inf", "inf"), ("nan", "nan"), ("+.nan", "+.nan"),
        ("2001-12-14", "2001-12-14"), ("<<", "<<"), ("=", "="),
    ],
)
def test_plain_scalars_follow_serde_yaml(text, value):
    assert fdl_yaml.parse_yaml("k: " + text + "\n") == {"k": value}
    assert type(fdl_yaml.parse_yaml("k: " + text + "\n")["k"]) is type(value)


def test_non_finite_forms():
    import math

    assert fdl_yaml.parse_yaml("a: .inf\nb: -.Inf\nc: +.INF\nd: .NaN\n")["a"] == math.inf
    doc = fdl_yaml.parse_yaml("a: .inf\nb: -.Inf\nc: +.INF\nd: .NaN\n")
    assert (doc["b"], doc["c"], math.isnan(doc["d"])) == (-math.inf, math.inf, True)


def test_quoted_scalars_stay_strings_and_keys_follow_the_schema():
    assert fdl_yaml.parse_yaml("a: '8'\nb: \"true\"\non: 1\nyes: 2\n") == {"a": "8", "b": "true", "on": 1, "yes": 2}


def test_pyyaml_safe_loader_is_left_untouched():
    import yaml

    assert yaml.safe_load("a: yes") == {"a": True}
    assert yaml.safe_load("a: 1e-7") == {"a": "1e-7"}


def test_duplicate_keys_are_refused(tmp_path):
    path = write(tmp_path / "fdl.yml", "cluster:\n  env: {}\ncluster: {}\n")
    with pytest.raises(FdlConfigError, match="duplicate key 'cluster'"):
        fch.load_document(path)


def test_tunnel_yes_is_a_string_for_the_validator(tmp_path):
    write(tmp_path / "fdl.yml", "commands: {}\n")
    write(tmp_path / "fdl.cluster.yml", CLUSTER_YML.replace("      arch: precompiled/cu128\n",
                                                            "      arch: precompiled/cu128\n      tunnel: yes\n"))
    config = fc.load_config(tmp_path)
    assert config.data["cluster"]["workers"][0]["tunnel"] == "yes"


def test_gpu_ram_share_scientific_is_a_float(tmp_path):
    write(tmp_path / "fdl.yml", "commands: {}\n")
    write(tmp_path / "fdl.cluster.yml", CLUSTER_YML + "  gpu_ram_share: 1e-7\n")
    assert fc.load_config(tmp_path).data["cluster"]["gpu_ram_share"] == 1e-7


@pytest.mark.parametrize(
    "value, text",
    [(True, "true"), (False, "false"), (8, "8"), (-3, "-3"), (1.5, "1.5"), (1500.0, "1500.0"), (1.0, "1.0"),
     (1e-7, "1e-7"), (1e16, "1e16"), (float("inf"), ".inf"), (float("-inf"), "-.inf"), (float("nan"), ".nan"),
     ("x", None), (None, None), ([1], None)],
)
def test_scalar_text_is_what_serde_yaml_hands_a_string_field(value, text):
    assert fc.scalar_text(value) == text


def test_env_scalars_become_strings_with_a_warning_and_no_value_echoed(tmp_path):
    write(tmp_path / "fdl.yml", "cluster:\n  env:\n    OMP_NUM_THREADS: 8\n    QUOTED: '8'\n")
    overlay = CLUSTER_YML.replace(
        "      arch: precompiled/cu128\n",
        "      arch: precompiled/cu128\n      env:\n        NCCL_P2P_DISABLE: true\n        SCALE: 1.5e3\n"
        "        SECRETISH: 31337\n",
    )
    write(tmp_path / "fdl.cluster.yml", overlay)
    config = fc.load_config(tmp_path)
    cluster = config.data["cluster"]
    assert cluster["env"] == {"OMP_NUM_THREADS": "8", "QUOTED": "8", "NCCL_DEBUG": "WARN"}
    assert cluster["workers"][0]["env"] == {"NCCL_P2P_DISABLE": "true", "SCALE": "1500.0", "SECRETISH": "31337"}
    assert len(config.warnings) == 4
    joined = "\n".join(config.warnings)
    assert "cluster.env.OMP_NUM_THREADS is written as a number" in joined
    assert "cluster.workers[0].env.NCCL_P2P_DISABLE is written as a boolean" in joined
    assert "31337" not in joined and "1500" not in joined
    assert "quote the value" in joined and "fdl.cluster.yml" in joined
    # the validator now sees strings only
    fi.validate_cluster(cluster)


def test_build_inventory_hands_back_loader_warnings(tmp_path):
    write(tmp_path / "fdl.yml", "commands: {}\n")
    write(tmp_path / "fdl.cluster.yml", CLUSTER_YML.replace("NCCL_DEBUG: WARN", "NCCL_DEBUG: 1"))
    warnings: list = []
    fi.build_inventory(tmp_path, "cluster", warnings=warnings)
    assert len(warnings) == 1 and "cluster.env.NCCL_DEBUG" in warnings[0]


# ---------------------------------------------------------------- one validator, two inputs

# Four different mistakes, written once as fdl files and once as inventory variables.
MISTAKES_BASE_YML = """\
commands:
  train:
    cluster: true
cluster:
  controller:
    host: 192.168.1.10
    path: /opt/proj
"""
MISTAKES_CLUSTER_YML = """\
cluster:
  controller:
    port: 0
  env:
    CUDA_VISIBLE_DEVICES: "0"
  workers:
    - host: gpu-a
      local_devices: [0, 1]
      nccl_socket_ifname: enp1s0
      path: /opt/proj
      tunnel: "yes"
    - host: gpu-b
      local_devices: [0, 1, 0]
      nccl_socket_ifname: enp1s0
      path: /srv/proj
"""
MISTAKES_WORKERS = [
    ("gpu-a", {"flodl_local_devices": [0, 1], "flodl_nccl_socket_ifname": "enp1s0", "flodl_path": "/opt/proj",
               "flodl_tunnel": "yes"}),
    ("gpu-b", {"flodl_local_devices": [0, 1, 0], "flodl_nccl_socket_ifname": "enp1s0", "flodl_path": "/srv/proj"}),
]
MISTAKES_CLUSTER_VARS = {
    "flodl_controller_host": "192.168.1.10",
    "flodl_controller_path": "/opt/proj",
    "flodl_controller_port": 0,
    "flodl_cluster_env": {"CUDA_VISIBLE_DEVICES": "0"},
}
# (fdl place, inventory place, problem): the text after the place is the same in both namings.
PORT_ZERO = (
    "cluster.controller.port",
    "controller: flodl_controller_port",
    "must be a TCP port number 1-65535, got an integer (0)",
)
RESERVED_ENV = (
    "cluster.env.CUDA_VISIBLE_DEVICES",
    'cluster: flodl_cluster_env["CUDA_VISIBLE_DEVICES"]',
    'key "CUDA_VISIBLE_DEVICES" is reserved (launcher-owned) and cannot be set via env: it would override the '
    "launcher's per-rank value; remove it",
)
TUNNEL_NOT_BOOL = (
    'cluster.workers[0] ("gpu-a").tunnel',
    "host gpu-a (worker 0): flodl_tunnel",
    'must be true or false, got a string ("yes")',
)
DUPLICATE_GPU = (
    'cluster.workers[1] ("gpu-b").local_devices',
    "host gpu-b (worker 1): flodl_local_devices",
    "lists GPU 0 more than once; each index is one rank; list every device once",
)
MISTAKES = [PORT_ZERO, RESERVED_ENV, TUNNEL_NOT_BOOL, DUPLICATE_GPU]


class TestOneValidator:
    """validate.cluster_problems serves fdl files and inventories with one rule set."""

    @pytest.fixture
    def broken_project(self, tmp_path: Path) -> Path:
        write(tmp_path / "fdl.yml", MISTAKES_BASE_YML)
        write(tmp_path / "fdl.cluster.yml", MISTAKES_CLUSTER_YML)
        return tmp_path

    def test_fdl_project_reports_every_mistake_in_one_error(self, broken_project):
        config = fc.load_config(broken_project)
        with pytest.raises(FdlConfigError) as err:
            fi.cluster_block(config)
        assert err.value.problems == [
            'cluster.controller.port: must be a TCP port number 1-65535, got an integer (0)',
            'cluster.env.CUDA_VISIBLE_DEVICES: key "CUDA_VISIBLE_DEVICES" is reserved (launcher-owned) and cannot be '
            "set via env: it would override the launcher's per-rank value; remove it",
            'cluster.workers[0] ("gpu-a").tunnel: must be true or false, got a string ("yes")',
            'cluster.workers[1] ("gpu-b").local_devices: lists GPU 0 more than once; each index is one rank; '
            "list every device once",
        ]
        base, overlay = broken_project / "fdl.yml", broken_project / "fdl.cluster.yml"
        assert str(err.value) == (
            "%s + %s: 4 problems:\n"
            "  cluster.controller.port: must be a TCP port number 1-65535, got an integer (0)\n"
            '  cluster.env.CUDA_VISIBLE_DEVICES: key "CUDA_VISIBLE_DEVICES" is reserved (launcher-owned) and cannot be '
            "set via env: it would override the launcher's per-rank value; remove it\n"
            '  cluster.workers[0] ("gpu-a").tunnel: must be true or false, got a string ("yes")\n'
            '  cluster.workers[1] ("gpu-b").local_devices: lists GPU 0 more than once; each index is one rank; '
            "list every device once" % (base, overlay)
        )

    def test_build_inventory_raises_the_same_error(self, broken_project):
        with pytest.raises(FdlConfigError) as err:
            fi.build_inventory(broken_project)
        assert len(err.value.problems) == 4
        assert err.value.problems[1].startswith('cluster.env.CUDA_VISIBLE_DEVICES: key "CUDA_VISIBLE_DEVICES" is reserved')

    def test_inventory_reports_the_same_mistakes_by_variable(self):
        cluster = topology.cluster_from_inventory(MISTAKES_WORKERS, MISTAKES_CLUSTER_VARS)
        with pytest.raises(topology.TopologyError) as err:
            topology.validate_cluster(cluster)
        assert err.value.problems == [
            "controller: flodl_controller_port: must be a TCP port number 1-65535, got an integer (0)",
            'cluster: flodl_cluster_env["CUDA_VISIBLE_DEVICES"]: key "CUDA_VISIBLE_DEVICES" is reserved '
            "(launcher-owned) and cannot be set via env: it would override the launcher's per-rank value; remove it",
            'host gpu-a (worker 0): flodl_tunnel: must be true or false, got a string ("yes")',
            "host gpu-b (worker 1): flodl_local_devices: lists GPU 0 more than once; each index is one rank; "
            "list every device once",
        ]

    def test_fdl_files_and_inventory_describe_the_same_cluster(self, broken_project):
        # The two inputs above are one cluster, so the comparison below compares rules, not inputs.
        merged = fc.load_config(broken_project).data["cluster"]
        built = topology.cluster_from_inventory(MISTAKES_WORKERS, MISTAKES_CLUSTER_VARS)
        assert merged == built

    @pytest.mark.parametrize("fdl_place, inventory_place, problem", MISTAKES, ids=["port-0", "reserved-env", "tunnel", "dup-gpu"])
    def test_same_rule_same_text_apart_from_the_place(self, broken_project, fdl_place, inventory_place, problem):
        with pytest.raises(FdlConfigError) as fdl_err:
            fi.cluster_block(fc.load_config(broken_project))
        with pytest.raises(topology.TopologyError) as inventory_err:
            topology.validate_cluster(topology.cluster_from_inventory(MISTAKES_WORKERS, MISTAKES_CLUSTER_VARS))
        assert fdl_place + ": " + problem in fdl_err.value.problems
        assert inventory_place + ": " + problem in inventory_err.value.problems
        assert fdl_err.value.problems.index(fdl_place + ": " + problem) == inventory_err.value.problems.index(
            inventory_place + ": " + problem
        )
