"""Topology: inventory -> fdl cluster dict, validation, ranks, byte-exact JSON (docs/launcher-contract.md §2c-§2f, §6)."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._core import serde_json_text as sj
from ansible_collections.flodl.cluster.plugins.module_utils._launch.cluster_json import cluster_json, ordered_cluster
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.model import cluster_model
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.cluster_ranks import populate_ranks
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.topology import (
    TopologyError,
    cluster_from_inventory,
    effective_data_path,
    validate_cluster,
)
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.field_checks import is_reserved_env_key
from ansible_collections.flodl.cluster.plugins.module_utils._cluster.validate import JOIN_KEYS
from ansible_collections.flodl.cluster.plugins.module_utils._ssh.sshargs import connection_from_vars, worker_ssh_block


def from_inventory(workers, cluster_vars):
    """The cluster an inventory describes, each worker's ssh block derived from its connection vars."""
    workers = list(workers)
    blocks = {}
    for name, hostvars in workers:
        host = hostvars.get("flodl_host") or name
        blocks[name], problems = worker_ssh_block(host, hostvars, connection_from_vars(hostvars))
        assert problems == [], problems
    return cluster_from_inventory(workers, cluster_vars, blocks)


CLUSTER_VARS = {"flodl_controller_host": "10.0.0.1", "flodl_controller_path": "/opt/proj"}


def hv(**kw):
    base = {"flodl_path": "/opt/proj", "flodl_local_devices": [0], "flodl_nccl_socket_ifname": "eth0"}
    base.update(kw)
    return base


def two_workers(**cluster_kw):
    return from_inventory([("gpu-a", hv()), ("gpu-b", hv())], {**CLUSTER_VARS, **cluster_kw})


def problems_of(cluster):
    with pytest.raises(TopologyError) as exc:
        validate_cluster(cluster)
    return exc.value.problems


def only_problem(cluster):
    problems = problems_of(cluster)
    assert len(problems) == 1, problems
    return problems[0]


# =========================================================== cluster_from_inventory


def test_minimal_inventory_maps_to_fdl_fields():
    c = from_inventory([("gpu-a", hv(flodl_local_devices="all"))], CLUSTER_VARS)
    assert c == {
        "controller": {"host": "10.0.0.1", "port": 1337, "path": "/opt/proj"},
        "workers": [{"host": "gpu-a", "local_devices": "all", "nccl_socket_ifname": "eth0", "path": "/opt/proj"}],
    }


def test_flodl_host_defaults_to_inventory_hostname_and_can_be_overridden():
    c = from_inventory(
        [("node1", hv()), ("node2", hv(flodl_host="gpu-b")), ("node3", hv(flodl_host="  "))], CLUSTER_VARS
    )
    assert [w["host"] for w in c["workers"]] == ["node1", "gpu-b", "node3"]


def test_workers_keep_inventory_order():
    names = ["z", "a", "m"]
    c = from_inventory([(n, hv()) for n in names], CLUSTER_VARS)
    assert [w["host"] for w in c["workers"]] == names


def test_optional_worker_and_controller_vars_copied():
    c = from_inventory(
        [
            (
                "gpu-a",
                hv(
                    flodl_arch="precompiled/cu128",
                    flodl_data_path="/d",
                    flodl_gpu_ram_share=0.25,
                    flodl_docker="cuda",
                    flodl_tunnel=True,
                    flodl_env={"NCCL_DEBUG": "INFO"},
                ),
            )
        ],
        {
            **CLUSTER_VARS,
            "flodl_controller_port": 4000,
            "flodl_controller_docker": "cuda",
            "flodl_controller_arch": "precompiled/cpu",
            "flodl_controller_data_path": "/cd",
            "flodl_controller_join": {"start": "manual"},
            "flodl_cluster_env": {"A": "1"},
            "flodl_cluster_gpu_ram_share": 0.5,
        },
    )
    w = c["workers"][0]
    assert (w["arch"], w["data_path"], w["gpu_ram_share"], w["docker"], w["tunnel"], w["env"]) == (
        "precompiled/cu128", "/d", 0.25, "cuda", True, {"NCCL_DEBUG": "INFO"},
    )
    assert c["controller"] == {
        "host": "10.0.0.1", "port": 4000, "path": "/opt/proj", "docker": "cuda",
        "arch": "precompiled/cpu", "data_path": "/cd", "join": {"start": "manual"},
    }
    assert c["env"] == {"A": "1"} and c["gpu_ram_share"] == 0.5


def test_controller_port_from_text_is_an_int():
    # `ansible-playbook -e flodl_controller_port=2000` delivers text.
    c = from_inventory([("a", hv())], {**CLUSTER_VARS, "flodl_controller_port": " 2000 "})
    assert c["controller"]["port"] == 2000
    validate_cluster(c)


def test_flodl_ranks_is_carried_so_validation_can_refuse_it():
    c = from_inventory([("a", hv(flodl_ranks=[0]))], CLUSTER_VARS)
    assert c["workers"][0]["ranks"] == [0]


class TestDerivedSsh:
    def ssh_of(self, name="gpu-b", **vars_):
        return from_inventory([(name, hv(**vars_))], CLUSTER_VARS)["workers"][0].get("ssh")

    def test_no_connection_vars_no_ssh_block(self):
        assert self.ssh_of() is None

    def test_all_connection_vars(self):
        assert self.ssh_of(
            ansible_host="192.168.1.12",
            ansible_port=2222,
            ansible_user="alice",
            ansible_ssh_private_key_file="~/.ssh/gpu_b",
            ansible_ssh_common_args="-o ProxyJump=bastion -oCompression=yes",
            ansible_ssh_extra_args="-o 'SetEnv=A=b c'",
        ) == {
            "target": "192.168.1.12",
            "port": 2222,
            "user": "alice",
            "identity_file": "~/.ssh/gpu_b",
            "options": ["ProxyJump=bastion", "Compression=yes", "SetEnv=A=b c"],
        }

    def test_flags_flodl_cannot_pass_are_refused(self):
        _block, problems = worker_ssh_block("gpu-b", {}, connection_from_vars({"ansible_ssh_extra_args": "-v"}))
        assert problems == [
            "host gpu-b: ansible_ssh_extra_args: '-v' is not supported: flodl's launcher passes only -o options, "
            "port, user and key to ssh, so it would reach the host differently from this probe (write it as "
            "-o Key=Value, or set it in ~/.ssh/config)"
        ]

    def test_ansible_host_equal_to_host_is_not_a_target(self):
        assert self.ssh_of(ansible_host="gpu-b") is None

    def test_ansible_host_compared_to_flodl_host(self):
        assert self.ssh_of(name="node7", flodl_host="gpu-b", ansible_host="gpu-b") is None
        assert self.ssh_of(name="gpu-b", flodl_host="gpu-x", ansible_host="gpu-b") == {"target": "gpu-b"}

    def test_port_text_becomes_int(self):
        assert self.ssh_of(ansible_port="2222") == {"port": 2222}

    def test_blank_values_are_ignored(self):
        assert self.ssh_of(ansible_user=" ", ansible_ssh_private_key_file="", ansible_port="", ansible_host="") is None

    def test_explicit_flodl_ssh_keys_win(self):
        assert self.ssh_of(
            ansible_host="10.1.1.1",
            ansible_port=22,
            ansible_user="deploy",
            flodl_ssh={"user": "alice", "port": "2200", "target": None, "options": ["A=b"]},
        ) == {"target": "10.1.1.1", "port": 2200, "user": "alice", "options": ["A=b"]}

    def test_explicit_flodl_ssh_alone(self):
        assert self.ssh_of(flodl_ssh={"target": "t", "identity_file": "k"}) == {"target": "t", "identity_file": "k"}

    def test_non_map_flodl_ssh_is_reported(self):
        c = from_inventory([("a", hv(flodl_ssh="alice@b"))], CLUSTER_VARS)
        assert only_problem(c).startswith("host a (worker 0): flodl_ssh: must be a map (target, port, user, identity_file, options)")


# =========================================================== validate_cluster


def test_valid_cluster_passes():
    validate_cluster(two_workers())


def test_controller_host_and_path_non_blank():
    c = two_workers(flodl_controller_host="  ", flodl_controller_path="")
    problems = problems_of(c)
    assert len(problems) == 2
    assert problems[0].startswith("controller: flodl_controller_host: must not be blank: the address workers dial back to")
    assert problems[1].startswith("controller: flodl_controller_path: must not be blank: the controller's view of the project root")


def test_controller_host_missing():
    c = from_inventory([("a", hv()), ("b", hv())], {"flodl_controller_path": "/p"})
    assert "flodl_controller_host" in only_problem(c)


@pytest.mark.parametrize("port", [1, 1337, 65535])
def test_controller_port_in_range(port):
    validate_cluster(two_workers(flodl_controller_port=port))


@pytest.mark.parametrize("port", [0, -1, 65536, 1337.0, "http", True])
def test_controller_port_out_of_range(port):
    msg = only_problem(two_workers(flodl_controller_port=port))
    assert "flodl_controller_port" in msg and "1-65535" in msg


def test_workers_required_unless_discovery():
    c = from_inventory([], CLUSTER_VARS)
    assert only_problem(c).startswith("cluster: group flodl_workers: is empty; add one inventory host per worker")
    c = from_inventory([], {**CLUSTER_VARS, "flodl_controller_join": {"discovery": True, "min_rank_start": 2}})
    validate_cluster(c)
    c = from_inventory([], {**CLUSTER_VARS, "flodl_controller_join": {"discovery": False}})
    assert only_problem(c).startswith("cluster: group flodl_workers: is empty; add one inventory host per worker")


@pytest.mark.parametrize("start", ["auto", "manual", "hybrid"])
def test_join_start_values(start):
    validate_cluster(two_workers(flodl_controller_join={"start": start}))


@pytest.mark.parametrize("start", ["Auto", "later", "", 1])
def test_join_start_refused(start):
    msg = only_problem(two_workers(flodl_controller_join={"start": start}))
    assert "must be one of auto | manual | hybrid" in msg


def test_join_unknown_key_refused():
    msg = only_problem(two_workers(flodl_controller_join={"min_rank_start": 2, "quorum": 3}))
    assert '"quorum"' in msg and "unknown key" in msg


def test_join_all_known_keys_accepted():
    join = {k: None for k in JOIN_KEYS}
    join.update(start="auto", token="00" * 16, discovery=False)
    validate_cluster(two_workers(flodl_controller_join=join))


def test_join_not_a_map():
    assert "must be a map" in only_problem(two_workers(flodl_controller_join="auto"))


def test_a_join_given_as_its_token_is_not_echoed():
    msg = only_problem(two_workers(flodl_controller_join="s3cret-session-salt"))
    assert "must be a map, got a string" in msg and "s3cret" not in msg


# ---- reserved env keys (§6)

CONTRACT = Path(__file__).resolve().parents[5] / "docs" / "launcher-contract.md"


def contract_reserved() -> tuple[str, list[str]]:
    """The reserved prefix and exact keys as the launcher contract's §6 (exact there) lists them."""
    rule = CONTRACT.read_text().split("* **Reserved env keys**", 1)[1].split("User env is applied", 1)[0]
    prefix, *exact = re.findall(r"`([A-Z_]+)`", rule)
    return prefix, exact


PREFIX, EXACT = contract_reserved()
RESERVED = [PREFIX + "FULL_CLUSTER_JSON", PREFIX + "ANYTHING", PREFIX, *EXACT]
ALLOWED = [
    "LD_LIBRARY_PATH",
    "FLODL_VERBOSITY",
    "FLODL_DASHBOARD_BIND",
    "NCCL_DEBUG",
    "NCCL_SOCKET_IFNAME",
    "FLODL_NET_TIMEOUT_SCALE",
    "FLODL_INTERNA",
    "flodl_internal_x",  # case-sensitive
    "CUDA_VISIBLE_DEVICES_X",
    "MY_FDL_ENV",
]


def test_the_contract_lists_the_reserved_keys():
    assert (PREFIX, len(EXACT)) == ("FLODL_INTERNAL_", 7), (PREFIX, EXACT)


@pytest.mark.parametrize("key", RESERVED)
def test_reserved_keys(key):
    assert is_reserved_env_key(key)


@pytest.mark.parametrize("key", ALLOWED)
def test_allowed_keys(key):
    assert not is_reserved_env_key(key)
    validate_cluster(two_workers(flodl_cluster_env={key: "x"}))


@pytest.mark.parametrize("key", RESERVED)
def test_reserved_key_refused_in_cluster_env(key):
    msg = only_problem(two_workers(flodl_cluster_env={key: "x"}))
    assert msg.startswith("cluster: flodl_cluster_env")
    assert f'"{key}" is reserved' in msg
    assert "it would override the launcher's per-rank value" in msg


def test_reserved_key_refused_in_worker_env_names_the_host():
    c = from_inventory([("gpu-a", hv()), ("gpu-b", hv(flodl_env={"CUDA_VISIBLE_DEVICES": "0"}))], CLUSTER_VARS)
    msg = only_problem(c)
    assert "gpu-b" in msg and "worker 1" in msg and "flodl_env" in msg
    assert "it would override the launcher's per-rank value" in msg


def test_env_problems_reported_cluster_then_workers_then_fields():
    c = from_inventory(
        [
            ("gpu-a", hv(flodl_path="", flodl_env={"FDL_ENV": "x"})),
            ("gpu-b", hv(flodl_env={"FLODL_HOST_NAME": "y"})),
        ],
        {**CLUSTER_VARS, "flodl_cluster_env": {"HIP_VISIBLE_DEVICES": "0"}},
    )
    problems = problems_of(c)
    assert len(problems) == 4
    assert problems[0].startswith('cluster: flodl_cluster_env["HIP_VISIBLE_DEVICES"]: key "HIP_VISIBLE_DEVICES" is reserved')
    assert problems[1].startswith('host gpu-a (worker 0): flodl_env["FDL_ENV"]: key "FDL_ENV" is reserved')
    assert problems[2].startswith('host gpu-b (worker 1): flodl_env["FLODL_HOST_NAME"]: key "FLODL_HOST_NAME" is reserved')
    assert problems[3].startswith("host gpu-a (worker 0): flodl_path: must not be blank")


@pytest.mark.parametrize("key", ["1ABC", "A-B", "A B", "", "A=B", "É", "A.B"])
def test_env_key_charset(key):
    msg = only_problem(two_workers(flodl_cluster_env={key: "x"}))
    assert "not a valid environment name" in msg


@pytest.mark.parametrize("key", ["_", "_A1", "a", "Abc_09"])
def test_env_key_charset_ok(key):
    validate_cluster(two_workers(flodl_cluster_env={key: "x"}))


@pytest.mark.parametrize("value", [1, 1.5, True, None, ["a"], {"a": "b"}])
def test_env_values_must_be_strings(value):
    msg = only_problem(two_workers(flodl_cluster_env={"NCCL_P2P_DISABLE": value}))
    assert msg.startswith('cluster: flodl_cluster_env["NCCL_P2P_DISABLE"]: environment values must be strings, got ')


def test_worker_env_values_must_be_strings():
    c = from_inventory([("a", hv(flodl_env={"X": 1})), ("b", hv())], CLUSTER_VARS)
    msg = only_problem(c)
    assert msg == 'host a (worker 0): flodl_env["X"]: environment values must be strings, got an integer; quote the value, e.g. X: "1"'


def test_env_must_be_a_map():
    assert "must be a map" in only_problem(two_workers(flodl_cluster_env=["A=1"]))


def test_empty_env_string_value_allowed():
    validate_cluster(two_workers(flodl_cluster_env={"NCCL_DEBUG": ""}))


# ---- per-worker fields


def test_nccl_ifname_required_with_more_than_one_worker():
    c = from_inventory([("a", hv()), ("b", hv(flodl_nccl_socket_ifname=" "))], CLUSTER_VARS)
    msg = only_problem(c)
    assert msg.startswith("host b (worker 1): flodl_nccl_socket_ifname: is required with more than one worker")
    c = from_inventory([("a", hv()), ("b", hv(flodl_nccl_socket_ifname=None))], CLUSTER_VARS)
    assert "flodl_nccl_socket_ifname" in only_problem(c)


def test_nccl_ifname_may_be_blank_with_exactly_one_worker():
    validate_cluster(from_inventory([("a", hv(flodl_nccl_socket_ifname=""))], CLUSTER_VARS))
    validate_cluster(from_inventory([("a", hv(flodl_nccl_socket_ifname=None))], CLUSTER_VARS))


def test_nccl_ifname_must_be_a_string():
    c = from_inventory([("a", hv(flodl_nccl_socket_ifname=7))], CLUSTER_VARS)
    assert "must be a string" in only_problem(c)


@pytest.mark.parametrize("path,phrase", [(None, "is required"), ("", "must not be blank"), ("  ", "must not be blank")])
def test_worker_path_required(path, phrase):
    c = from_inventory([("a", hv()), ("b", hv(flodl_path=path))], CLUSTER_VARS)
    msg = only_problem(c)
    assert msg.startswith(f"host b (worker 1): flodl_path: {phrase}: the project checkout on that host")


def test_blank_flodl_host_after_default_is_impossible_but_blank_host_key_is_refused():
    c = two_workers()
    c["workers"][1]["host"] = "  "
    msg = only_problem(c)
    assert msg.startswith("host ? (worker 1): flodl_host: must not be blank")


@pytest.mark.parametrize("devices", ["all", [0], [0, 1, 7], [255], list(range(8))])
def test_local_devices_ok(devices):
    validate_cluster(from_inventory([("a", hv(flodl_local_devices=devices)), ("b", hv())], CLUSTER_VARS))


@pytest.mark.parametrize(
    "devices,fragment",
    [
        ("ALL", "must be `all` or a list"),
        ("0,1", "must be `all` or a list"),
        ("", "must be `all` or a list"),
        (2, "must be `all` or a list"),
        ({"0": 1}, "must be `all` or a list"),
        (None, "flodl_local_devices: is required"),
        ([], "empty list"),
        ([256], "0-255"),
        ([-1], "0-255"),
        ([0, "1"], "0-255"),
        ([True], "0-255"),
        ([0.0], "0-255"),
        ([0, 1, 0], "flodl_local_devices: lists GPU 0 more than once"),
    ],
)
def test_local_devices_refused(devices, fragment):
    c = from_inventory([("a", hv()), ("b", hv(flodl_local_devices=devices))], CLUSTER_VARS)
    msg = only_problem(c)
    assert msg.startswith("host b (worker 1)") and fragment in msg


@pytest.mark.parametrize("share", [0, 0.0, 0.5, 1, 1.5, 3])
def test_gpu_ram_share_ok(share):
    validate_cluster(two_workers(flodl_cluster_gpu_ram_share=share))
    validate_cluster(from_inventory([("a", hv(flodl_gpu_ram_share=share)), ("b", hv())], CLUSTER_VARS))


@pytest.mark.parametrize("text,share", [("0.5", 0.5), (" 1 ", 1.0), ("", None), ("  ", None)])
def test_gpu_ram_share_as_text_is_a_number_and_blank_is_unset(text, share):
    # -e and AWX survey answers arrive as text (an fdl file is still held to numbers: test_fdl_config).
    c = from_inventory([("a", hv(flodl_gpu_ram_share=text)), ("b", hv())], {**CLUSTER_VARS, "flodl_cluster_gpu_ram_share": text})
    validate_cluster(c)
    assert c["workers"][0].get("gpu_ram_share") == share and c.get("gpu_ram_share") == share


@pytest.mark.parametrize("share", [-0.1, -1, math.nan, math.inf, -math.inf, "half", "nan", "-1", True,
                                   pytest.param(10**400, id="huge-int")])
def test_gpu_ram_share_refused_at_cluster_scope(share):
    msg = only_problem(two_workers(flodl_cluster_gpu_ram_share=share))
    assert msg.startswith("cluster: flodl_cluster_gpu_ram_share: must be a non-negative fraction of host RAM")


@pytest.mark.parametrize("share", [-0.1, math.nan, math.inf, "half"])
def test_gpu_ram_share_refused_at_worker_scope(share):
    c = from_inventory([("a", hv()), ("b", hv(flodl_gpu_ram_share=share))], CLUSTER_VARS)
    msg = only_problem(c)
    assert msg.startswith("host b (worker 1): flodl_gpu_ram_share: must be a non-negative fraction")


def test_flodl_ranks_refused():
    c = from_inventory([("a", hv()), ("b", hv(flodl_ranks=[1]))], CLUSTER_VARS)
    msg = only_problem(c)
    assert "host b (worker 1)" in msg and "flodl_ranks" in msg and "not user configuration" in msg


def test_duplicate_hosts_refused():
    c = from_inventory([("n1", hv(flodl_host="gpu-a")), ("n2", hv()), ("n3", hv(flodl_host="gpu-a"))], CLUSTER_VARS)
    msg = only_problem(c)
    assert "worker 2" in msg and "also worker 0" in msg and "'gpu-a'" in msg


@pytest.mark.parametrize("tunnel", ["yes", 1, "true"])
def test_tunnel_must_be_bool(tunnel):
    c = from_inventory([("a", hv(flodl_tunnel=tunnel)), ("b", hv())], CLUSTER_VARS)
    assert only_problem(c).startswith("host a (worker 0): flodl_tunnel: must be true or false, got ")


@pytest.mark.parametrize("key,var", [("arch", "flodl_arch"), ("data_path", "flodl_data_path"), ("docker", "flodl_docker")])
def test_string_fields(key, var):
    c = from_inventory([("a", hv(**{var: 5})), ("b", hv())], CLUSTER_VARS)
    assert only_problem(c).startswith(f"host a (worker 0): {var}: must be a string, got an integer (5)")


def test_ssh_block_checks():
    c = from_inventory(
        [("a", hv(flodl_ssh={"port": 70000, "host": "x", "options": ["NoEquals"]})), ("b", hv())], CLUSTER_VARS
    )
    problems = problems_of(c)
    assert len(problems) == 3
    assert any('unknown key "host"' in p for p in problems)
    assert any("1-65535" in p for p in problems)
    assert any("Key=Value" in p for p in problems)


def test_all_problems_collected():
    c = from_inventory(
        [
            ("a", hv(flodl_local_devices="some", flodl_env={"FDL_ENV": "x"})),
            ("b", hv(flodl_path="", flodl_nccl_socket_ifname="", flodl_gpu_ram_share=-1)),
        ],
        {"flodl_controller_path": "/p", "flodl_controller_join": {"start": "never"}, "flodl_cluster_env": {"1X": "y"}},
    )
    problems = problems_of(c)
    assert len(problems) == 8, problems
    err = TopologyError(problems)
    assert str(err) == "\n".join(problems)


# =========================================================== populate_ranks


def test_ranks_sequential_in_worker_order():
    c = from_inventory(
        [("a", hv(flodl_local_devices=[3, 1])), ("b", hv(flodl_local_devices="all")), ("c", hv(flodl_local_devices=[0]))],
        CLUSTER_VARS,
    )
    out = populate_ranks(c, {"b": (3, 0)})
    assert [w["ranks"] for w in out["workers"]] == [[0, 1], [2, 3, 4], [5]]
    assert "ranks" not in c["workers"][0]  # a copy, input untouched


def test_ranks_do_not_need_a_probe_for_explicit_lists():
    out = populate_ranks(two_workers())
    assert [w["ranks"] for w in out["workers"]] == [[0], [1]]


@pytest.mark.parametrize(
    "arch,probe,count",
    [
        ("precompiled/cu128", (2, 4), 2),
        ("builds/sm80", (2, 4), 2),
        ("precompiled/rocm70", (2, 4), 4),
        ("builds/gfx942", (2, 4), 4),
        ("builds/mybuild", (2, 4), 2),  # unknown names are NVIDIA builds
        (None, (3, 0), 3),
        (None, (0, 2), 2),
        ("precompiled/cpu", (3, 0), 3),  # CPU arch: like no arch
        ("precompiled/cpu", (0, 2), 2),
    ],
)
def test_all_counts_by_vendor(arch, probe, count):
    extra = {"flodl_arch": arch} if arch else {}
    c = from_inventory([("a", hv(flodl_local_devices="all", **extra)), ("b", hv())], CLUSTER_VARS)
    out = populate_ranks(c, {"a": probe})
    assert out["workers"][0]["ranks"] == list(range(count))
    assert out["workers"][1]["ranks"] == [count]


@pytest.mark.parametrize("arch", [None, "precompiled/cpu"])
def test_both_vendors_without_gpu_arch_is_ambiguous(arch):
    extra = {"flodl_arch": arch} if arch else {}
    c = from_inventory([("a", hv()), ("gpu-b", hv(flodl_local_devices="all", **extra))], CLUSTER_VARS)
    with pytest.raises(TopologyError) as exc:
        populate_ranks(c, {"gpu-b": (2, 1)})
    (msg,) = exc.value.problems
    assert msg.startswith("host gpu-b") and "2 NVIDIA and 1 AMD" in msg and "flodl_arch" in msg


@pytest.mark.parametrize("arch,probe", [(None, (0, 0)), ("precompiled/cu128", (0, 4)), ("precompiled/rocm70", (3, 0))])
def test_zero_gpus_names_the_host(arch, probe):
    extra = {"flodl_arch": arch} if arch else {}
    c = from_inventory([("a", hv()), ("gpu-b", hv(flodl_local_devices="all", **extra))], CLUSTER_VARS)
    with pytest.raises(TopologyError) as exc:
        populate_ranks(c, {"gpu-b": probe})
    (msg,) = exc.value.problems
    assert msg.startswith("host gpu-b") and "0 GPUs" in msg


def test_unprobed_all_is_an_error():
    c = from_inventory([("a", hv()), ("gpu-b", hv(flodl_local_devices="all"))], CLUSTER_VARS)
    with pytest.raises(TopologyError, match="gpu-b.*not counted"):
        populate_ranks(c, {})
    with pytest.raises(TopologyError, match="not counted"):
        populate_ranks(c, None)


def test_every_count_problem_collected():
    c = from_inventory(
        [("a", hv(flodl_local_devices="all")), ("b", hv(flodl_local_devices="all")), ("c", hv())], CLUSTER_VARS
    )
    with pytest.raises(TopologyError) as exc:
        populate_ranks(c, {"a": (0, 0), "b": (1, 1)})
    assert len(exc.value.problems) == 2


def test_fewer_than_two_ranks_refused():
    c = from_inventory([("a", hv())], CLUSTER_VARS)
    with pytest.raises(TopologyError, match="1 rank\\(s\\) in total; a cluster needs at least 2"):
        populate_ranks(c)
    c = from_inventory([("a", hv(flodl_local_devices="all"))], CLUSTER_VARS)
    assert [w["ranks"] for w in populate_ranks(c, {"a": (2, 0)})["workers"]] == [[0, 1]]


def test_discovery_roster_may_be_empty():
    c = from_inventory([], {**CLUSTER_VARS, "flodl_controller_join": {"discovery": True}})
    assert populate_ranks(c)["workers"] == []


# =========================================================== serialisation (§2f)

THREE_WORKERS_JSON = """\
{
  "controller": {
    "host": "10.0.0.1",
    "port": 1337,
    "path": "/opt/proj",
    "docker": "cuda",
    "arch": "precompiled/cu128",
    "data_path": "/mnt/data",
    "join": {
      "min_rank_start": 2,
      "join_timeout": 120,
      "open_admission": false,
      "token": "000102030405060708090a0b0c0d0e0f",
      "start": "hybrid"
    }
  },
  "workers": [
    {
      "host": "gpu-a",
      "ranks": [
        0,
        1
      ],
      "local_devices": [
        0,
        1
      ],
      "nccl_socket_ifname": "enp1s0",
      "path": "/opt/proj",
      "arch": "precompiled/cu128"
    },
    {
      "host": "gpu-b",
      "ranks": [
        2,
        3,
        4
      ],
      "local_devices": "all",
      "nccl_socket_ifname": "enp1s0",
      "path": "/srv/proj",
      "ssh": {
        "target": "10.0.0.12",
        "port": 2222,
        "user": "alice",
        "identity_file": "~/.ssh/gpu-b",
        "options": [
          "ProxyJump=bastion",
          "Compression=yes"
        ]
      },
      "tunnel": true,
      "arch": "precompiled/rocm70",
      "data_path": "/mnt/datasets",
      "gpu_ram_share": 0.5,
      "docker": "rocm",
      "env": {
        "LD_LIBRARY_PATH": "/opt/x/lib",
        "NCCL_DEBUG": "INFO",
        "ZED": "z"
      }
    },
    {
      "host": "gpü-c",
      "ranks": [
        5
      ],
      "local_devices": [
        3
      ],
      "nccl_socket_ifname": "enp2s0",
      "path": "/srv/prøj",
      "gpu_ram_share": 2.0
    }
  ],
  "env": {
    "A_FIRST": "1",
    "NCCL_DEBUG": "WARN"
  },
  "gpu_ram_share": 1.0
}"""


def three_worker_cluster():
    workers = [
        ("gpu-a", {
            "flodl_path": "/opt/proj", "flodl_local_devices": [0, 1],
            "flodl_nccl_socket_ifname": "enp1s0", "flodl_arch": "precompiled/cu128",
        }),
        ("node-b", {
            "flodl_host": "gpu-b",
            "flodl_env": {"ZED": "z", "NCCL_DEBUG": "INFO", "LD_LIBRARY_PATH": "/opt/x/lib"},
            "flodl_docker": "rocm",
            "flodl_gpu_ram_share": 0.5,
            "flodl_data_path": "/mnt/datasets",
            "flodl_arch": "precompiled/rocm70",
            "flodl_tunnel": True,
            "ansible_ssh_common_args": "-o ProxyJump=bastion -o Compression=yes",
            "ansible_ssh_private_key_file": "~/.ssh/gpu-b",
            "ansible_user": "alice",
            "ansible_port": 2222,
            "ansible_host": "10.0.0.12",
            "flodl_path": "/srv/proj",
            "flodl_nccl_socket_ifname": "enp1s0",
            "flodl_local_devices": "all",
        }),
        ("gpü-c", {
            "flodl_local_devices": [3], "flodl_nccl_socket_ifname": "enp2s0", "flodl_path": "/srv/prøj",
            "flodl_tunnel": False, "flodl_env": {}, "flodl_gpu_ram_share": 2,
        }),
    ]
    cluster_vars = {
        "flodl_controller_path": "/opt/proj",
        "flodl_controller_host": "10.0.0.1",
        "flodl_controller_data_path": "/mnt/data",
        "flodl_controller_arch": "precompiled/cu128",
        "flodl_controller_docker": "cuda",
        "flodl_controller_join": {
            "start": "hybrid", "token": "000102030405060708090a0b0c0d0e0f", "open_admission": False,
            "join_timeout": 120, "min_rank_start": 2, "target_ranks": None,
        },
        "flodl_cluster_env": {"NCCL_DEBUG": "WARN", "A_FIRST": "1"},
        "flodl_cluster_gpu_ram_share": 1,
    }
    cluster = from_inventory(workers, cluster_vars)
    validate_cluster(cluster)
    return populate_ranks(cluster, {"gpu-b": (0, 3)})


def test_three_worker_cluster_json_is_byte_exact():
    assert cluster_json(three_worker_cluster()) == THREE_WORKERS_JSON


def test_serialisation_is_independent_of_input_key_order():
    c = three_worker_cluster()
    shuffled = json.loads(json.dumps(c))
    shuffled["workers"] = [dict(reversed(list(w.items()))) for w in shuffled["workers"]]
    shuffled = dict(reversed(list(shuffled.items())))
    assert cluster_json(shuffled) == THREE_WORKERS_JSON


SECTION_2F_PREFIX = (
    '{\n  "controller": {\n    "host": "192.168.1.10",\n    "port": 1337,\n    "path": "/opt/proj",\n'
    '    "docker": "cuda"\n  },\n  "workers": [\n    {\n      "host": "gpu-a",\n      "ranks": [\n'
    "        0,\n        1\n      ],\n      \"local_devices\": [\n        0,\n        1\n      ],"
)


def section_2f_cluster():
    c = from_inventory(
        [
            ("gpu-a", {"flodl_local_devices": [0, 1], "flodl_nccl_socket_ifname": "enp1s0", "flodl_path": "/opt/proj",
                       "flodl_arch": "precompiled/cu128"}),
            ("gpu-b", {"flodl_ssh": {"user": "alice", "port": 2222, "identity_file": ".fdl/keys/gpu-b"},
                       "flodl_local_devices": "all", "flodl_nccl_socket_ifname": "enp1s0", "flodl_path": "/srv/proj",
                       "flodl_arch": "precompiled/rocm70", "flodl_data_path": "/mnt/datasets"}),
        ],
        {"flodl_controller_host": "192.168.1.10", "flodl_controller_path": "/opt/proj",
         "flodl_controller_docker": "cuda", "flodl_cluster_env": {"NCCL_DEBUG": "WARN"}},
    )
    validate_cluster(c)
    return populate_ranks(c, {"gpu-b": (0, 2)})


def test_section_2f_example_prefix():
    text = cluster_json(section_2f_cluster())
    assert text.startswith(SECTION_2F_PREFIX)
    assert not text.endswith("\n")


SECTION_2F_SECOND_WORKER = """\
    {
      "host": "gpu-b",
      "ranks": [
        2,
        3
      ],
      "local_devices": "all",
      "nccl_socket_ifname": "enp1s0",
      "path": "/srv/proj",
      "ssh": {
        "port": 2222,
        "user": "alice",
        "identity_file": ".fdl/keys/gpu-b"
      },
      "arch": "precompiled/rocm70",
      "data_path": "/mnt/datasets"
    }
  ],
  "env": {
    "NCCL_DEBUG": "WARN"
  }
}"""


def test_section_2f_example_tail():
    assert cluster_json(section_2f_cluster()).endswith(SECTION_2F_SECOND_WORKER)


def test_minimal_cluster_omits_every_optional_key():
    c = from_inventory([("a", hv(flodl_nccl_socket_ifname=None))], CLUSTER_VARS)
    c["workers"][0]["ranks"] = [0]
    assert cluster_json(c) == """\
{
  "controller": {
    "host": "10.0.0.1",
    "port": 1337,
    "path": "/opt/proj"
  },
  "workers": [
    {
      "host": "a",
      "ranks": [
        0
      ],
      "local_devices": [
        0
      ],
      "nccl_socket_ifname": "",
      "path": "/opt/proj"
    }
  ]
}"""


def test_empty_containers_and_explicit_none_port():
    c = {"controller": {"host": "h", "port": None, "path": "/p", "join": {"discovery": True}}, "workers": [], "env": {}}
    assert cluster_json(c) == """\
{
  "controller": {
    "host": "h",
    "port": 1337,
    "path": "/p",
    "join": {
      "discovery": true
    }
  },
  "workers": []
}"""


def test_empty_ssh_options_omitted_and_unpopulated_ranks_are_empty():
    c = {"controller": {"host": "h", "path": "/p"},
         "workers": [{"host": "a", "local_devices": "all", "nccl_socket_ifname": "x", "path": "/p",
                      "ssh": {"options": [], "user": "u"}, "tunnel": False, "env": {}}]}
    o = ordered_cluster(c)
    assert o["workers"][0] == {"host": "a", "ranks": [], "local_devices": "all", "nccl_socket_ifname": "x",
                               "path": "/p", "ssh": {"user": "u"}}
    assert list(o["controller"]) == ["host", "port", "path"]


def test_string_escapes_match_serde_json():
    c = {"controller": {"host": "h", "path": 'a"b\\c\td\x01\x7f'}, "workers": []}
    assert '"path": "a\\"b\\\\c\\td\\u0001\x7f"' in cluster_json(c)


# serde_json (ryu) float layout; each expected string written by hand from
# ryu's rule: positional while -5 < point <= 16, else scientific, bare exponent.
@pytest.mark.parametrize(
    "value, text",
    [
        (0.00001, "0.00001"),
        (0.00005, "0.00005"),
        (0.000012345, "0.000012345"),
        (0.000001, "1e-6"),
        (0.0000015, "1.5e-6"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (0.5, "0.5"),
        (0.25, "0.25"),
        (1.0, "1.0"),
        (2.0, "2.0"),
        (1, "1.0"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (-0.5, "-0.5"),
        (123.456, "123.456"),
        (1e15, "1000000000000000.0"),
        (9999999999999998.0, "9999999999999998.0"),
        (1e16, "1e16"),
        (1.5e16, "1.5e16"),
        (1.2345e17, "1.2345e17"),
        (1e100, "1e100"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e308"),
        (0.1 + 0.2, "0.30000000000000004"),
        (float("inf"), "null"),
        (float("nan"), "null"),
    ],
)
def test_serde_float_layout(value, text):
    assert sj.serde_float(float(value)) == text


def test_cluster_json_floats_are_serde_not_python():
    c = {"controller": {"host": "h", "path": "/p"}, "gpu_ram_share": 1e-7,
         "workers": [{"host": "a", "ranks": [0], "local_devices": [0], "nccl_socket_ifname": "", "path": "/p",
                      "gpu_ram_share": 0.00001},
                     {"host": "b", "ranks": [1], "local_devices": [0], "nccl_socket_ifname": "", "path": "/p",
                      "gpu_ram_share": 1e16}]}
    text = cluster_json(c)
    assert '"gpu_ram_share": 0.00001\n' in text
    assert '"gpu_ram_share": 1e16\n' in text
    assert text.endswith('  ],\n  "gpu_ram_share": 1e-7\n}')
    assert "1e-05" not in text and "1e+16" not in text and "1e-07" not in text
    # still valid JSON that reads back to the same numbers
    back = json.loads(text)
    assert (back["gpu_ram_share"], back["workers"][0]["gpu_ram_share"]) == (1e-7, 0.00001)


def test_declared_empty_ssh_is_kept_and_absent_ssh_omitted():
    worker = {"host": "a", "ranks": [0], "local_devices": [0], "nccl_socket_ifname": "e", "path": "/p"}
    c = {"controller": {"host": "h", "path": "/p"},
         "workers": [dict(worker, ssh={}), dict(worker, host="b", ssh={"port": None}), dict(worker, host="c"),
                     dict(worker, host="d", ssh=None)]}
    text = cluster_json(c)
    assert text.count('"ssh": {}') == 2
    assert [("ssh" in w) for w in json.loads(text)["workers"]] == [True, True, False, False]
    assert '      "path": "/p",\n      "ssh": {}\n    },\n    {\n      "host": "b"' in text


def test_inventory_without_ssh_vars_has_no_ssh_key():
    c = cluster_from_inventory([("a", hv())], CLUSTER_VARS)
    c["workers"][0]["ranks"] = [0]
    assert '"ssh"' not in cluster_json(c)


SERDE_DOCS = [
    {"a": [1, {"b": []}, {}], "c": {"d": None, "e": True, "f": "x\u00e9"}},
    {"s": "q\"b\\s\n\r\t\b\f\x00\x1f\x7f\u2028\U0001f600", "n": [-1, 0, 2 ** 70], "t": (1, "x"), "e": ""},
    [[], [[]], {"": {}}, [{"k": [False, None]}]],
    {"workers": [{"host": f"h{i}", "ranks": [i], "ssh": {"options": ["ControlPath=/tmp/x/%C"]}} for i in range(3)]},
]


@pytest.mark.parametrize("doc", SERDE_DOCS)
def test_the_json_module_path_writes_the_bytes_of_the_serde_layout(doc):
    """Documents without floats take Python's json encoder: byte for byte what the serde layout writes."""
    for indent, render in (("", sj.serde_pretty), (None, sj.serde_compact)):
        out: list[str] = []
        sj._serde(doc, indent, out)  # pylint: disable=protected-access
        assert render(doc) == "".join(out)


@pytest.mark.parametrize("doc", [{"f": 1e-6}, {1: "int key"}, [{"x": [0.5]}], {"m": frozenset()}])
def test_floats_and_other_keys_keep_the_serde_layout(doc):
    assert not sj._same_in_python(doc)  # pylint: disable=protected-access


# =========================================================== lookups


def test_effective_data_path():
    assert effective_data_path("/mnt/d") == ("/mnt/d", True)
    assert effective_data_path(None) == ("/flodl/data", False)
    assert effective_data_path("  ") == ("/flodl/data", False)


def test_remote_workers_compare_logical_labels_not_addresses():
    c = from_inventory(
        [
            ("ctl", hv(flodl_host="box")),
            ("container", hv(flodl_host="box-rank", ansible_host="127.0.0.1", ansible_port=2222)),
            ("far", hv(flodl_host="gpu-b")),
        ],
        CLUSTER_VARS,
    )
    typed = cluster_model(c)
    assert [w.host for w in typed.remotes("box")] == ["box-rank", "gpu-b"]
    assert [w.host for w in typed.remotes("127.0.0.1")] == ["box", "box-rank", "gpu-b"]
    assert [w.host for w in typed.remotes("nobody")] == ["box", "box-rank", "gpu-b"]
