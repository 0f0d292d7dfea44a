"""flodl.cluster.launch_status: no ssh when the run is invalid or no detached run is recorded."""
from __future__ import annotations

ACTION = "launch_status"


def test_recorded_case(recorded, run, expect, no_processes):
    expect(run(recorded), recorded.expected)
    assert no_processes == []
