"""The controller's answers for worker names: what a resolver says is not trusted to be an address, a worker
without a name is skipped, and FLODL_INTERNAL_CLUSTER_EXTRA_HOSTS read back keeps only whole pairs."""
from __future__ import annotations

import pytest

from ansible_collections.flodl.cluster.plugins.module_utils._cluster import name_resolution as nr


def _answers(table):
    def resolve(name):
        if name not in table:
            raise OSError(f"Name or service not known: {name}")
        return table[name]
    return resolve


def test_an_answer_that_is_not_an_address_is_never_taken_for_loopback():
    # A resolver answering text that is no IP (a broken NSS module): not loopback, so it is the first usable one.
    assert nr.resolve_host_to_ip("gpu-b", _answers({"gpu-b": ["127.0.1.1", "gpu-b.lan", "10.0.0.2"]})) == (
        "gpu-b.lan", None)


def test_an_empty_answer_is_no_address():
    addr, warning = nr.resolve_host_to_ip("gpu-b", _answers({"gpu-b": ["", ""]}))
    assert addr is None and warning == "host 'gpu-b' did not resolve on the controller: no address"


def test_a_worker_without_a_host_name_is_skipped_and_never_looked_up():
    asked = []

    def resolver(name):
        asked.append(name)
        return ["10.0.0.2"]

    pairs, warnings = nr.cluster_extra_hosts([{"host": ""}, {"ssh": {"target": "10.0.0.9"}}, {"host": "gpu-b"}],
                                             resolver)
    assert pairs == [("gpu-b", "10.0.0.2")] and warnings == [] and asked == ["gpu-b"]


def test_an_unresolved_worker_is_warned_only_without_an_ssh_target():
    workers = [{"host": "gpu-b"}, {"host": "gpu-c", "ssh": {"target": "10.0.0.3"}}]
    pairs, warnings = nr.cluster_extra_hosts(workers, _answers({}))
    assert pairs == [] and len(warnings) == 1
    assert warnings[0].startswith("host gpu-b: host 'gpu-b' did not resolve") and nr.ENV_CLUSTER_EXTRA_HOSTS in warnings[0]


@pytest.mark.parametrize("text, pairs", [
    ("gpu-a:10.0.0.1 gpu-b 10.0.0.2 :10.0.0.3 gpu-d: gpu-e:fd00::5", [("gpu-a", "10.0.0.1"), ("gpu-e", "fd00::5")]),
    ("", []),
    (None, []),
])
def test_extra_hosts_read_back_keep_only_whole_pairs(text, pairs):
    assert nr.parse_extra_hosts(text) == pairs
