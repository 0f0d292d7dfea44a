"""flodl.cluster.launch_env: a refusal before contact, and the check-mode plan without ssh."""
from __future__ import annotations

import json
import socket

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils.hexcodec import hex_decode

ACTION = "launch_env"


@pytest.fixture(autouse=True)
def no_resolver(monkeypatch):
    # The extra-hosts lookup asks the system resolver: the recorded names resolve nowhere, without waiting.
    def unknown(*_args, **_kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unknown)


def test_recorded_case(recorded, run, expect, no_ssh):
    expect(run(recorded), recorded.expected)
    assert [argv for argv in no_ssh if "ssh" in str(argv)] == []


def test_refused_before_contact(case, run, no_processes):
    assert run(case("refused"))["failed"] is True
    assert no_processes == []


def test_check_mode_hands_the_launcher_the_topology_and_the_envelope(case, run, no_ssh, tmp_path):
    result = run(case("check_mode"))
    env = result["env"]
    topology = hex_decode(env["FLODL_INTERNAL_FULL_CLUSTER_JSON"]).decode()
    assert f'"path": "{tmp_path}"' in topology and topology.startswith("{\n  ")  # pretty, as fdl-cli writes it
    # gpu-b's `all` gets its two AMD GPUs from the preflight result given, without asking gpu-b again.
    assert [w["ranks"] for w in json.loads(topology)["workers"]] == [[0, 1], [2, 3], [4]]
    assert env["FLODL_INTERNAL_FDL_CMD"] == "train"
    assert "gpu-b" in env["FLODL_INTERNAL_PREBUILD_PER_HOST"]
    assert not (tmp_path / "target").exists()  # check mode writes no overlay
