"""flodl.cluster.orphan_cleanup: a refusal and check mode reach no worker."""
from __future__ import annotations

ACTION = "orphan_cleanup"


def test_recorded_case(recorded, run, expect, no_processes):
    expect(run(recorded), recorded.expected)
    assert no_processes == []
