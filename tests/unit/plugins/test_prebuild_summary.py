"""The prebuild step's printed summary: one line per host, the ones that failed first (issue 19, item 3)."""
from __future__ import annotations

from ansible_collections.flodl.cluster.plugins.module_utils._run.prebuild import plan_prebuild
from ansible_collections.flodl.cluster.plugins.module_utils._prebuild.build_summary import summary


def test_one_line_per_host_failures_first_in_their_order():
    workers = [{"host": f"h{i}", "path": "/srv/p", "arch": "precompiled/cu128"} for i in range(4)]
    plan = plan_prebuild("/opt/p", "train", workers)
    hosts = {
        "h0": {"arch": "precompiled/cu128", "status": "built", "seconds": 1.0, "bin": "b0"},
        "h1": {"arch": "precompiled/cu128", "status": "failed"},
        "h2": {"arch": "precompiled/cu128", "status": "linked", "changed": True, "built_by": "h0", "bin": "b2"},
        "h3": {"arch": None, "status": "skipped"},
    }
    lines = summary(plan, hosts, check=False)
    assert len(lines) == 1 + len(hosts)
    assert [ln.split(" ", 1)[0] for ln in lines[1:]] == ["h1", "h3", "h0", "h2"]
    assert lines[1] == "h1 [precompiled/cu128]: FAILED" and lines[2] == "h3 [no flodl_arch]: FAILED"
