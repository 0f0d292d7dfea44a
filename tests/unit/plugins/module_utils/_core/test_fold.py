"""Per-worker summaries fold their healthy workers above a threshold; problems always keep their own line."""
from __future__ import annotations

from ansible_collections.flodl.cluster.plugins.module_utils._core.fold import FOLD_ABOVE, Row, fold, folded_summary


def _rows(n: int, bad: tuple[int, ...] = ()) -> list[Row]:
    return [Row(host=f"h{i}", line=f"h{i}: {'error — no data' if i in bad else 'ok — x86_64'}",
                state="error — no data" if i in bad else "ok — x86_64", problem=i in bad) for i in range(n)]


def test_small_clusters_keep_one_line_per_worker_problems_first():
    lines = fold(_rows(4, bad=(2,)), verbose=False)
    assert lines == ["  h2: error — no data", "  h0: ok — x86_64", "  h1: ok — x86_64", "  h3: ok — x86_64"]


def test_large_clusters_fold_healthy_workers_by_state_and_keep_every_problem():
    n = FOLD_ABOVE * 4
    lines = fold(_rows(n, bad=(7, 90)), verbose=False)
    assert lines[:2] == ["  h7: error — no data", "  h90: error — no data"]
    (folded,) = [ln for ln in lines if "workers): " in ln]
    assert folded.startswith(f"  ok — x86_64 ({n - 2} workers): h0, h1, ")
    assert "h7," not in folded and len(lines) == 4


def test_v_prints_every_worker_whatever_the_size():
    assert len(fold(_rows(FOLD_ABOVE * 2), verbose=True)) == FOLD_ABOVE * 2


def test_distinct_states_each_get_a_line():
    rows = [Row(host=f"h{i}", line=f"h{i}: ok", state=f"ok — {'amd' if i % 2 else 'nvidia'}") for i in range(40)]
    lines = fold(rows, verbose=False)
    assert [ln.split(" (")[0] for ln in lines[:2]] == ["  ok — nvidia", "  ok — amd"]


def test_a_step_result_without_rows_is_printed_as_it_is():
    result = {"summary": ["header", "h0: built", "h1: built"]}
    assert folded_summary(result, verbose=False) == result["summary"]
    rows = [{"host": f"h{i}", "line": f"h{i}: built in 1s", "state": "[cpu] built", "problem": False} for i in range(40)]
    result = {"summary": ["header"] + [r["line"] for r in rows], "summary_rows": rows}
    out = folded_summary(result, verbose=False)
    assert out[0] == "header" and out[1].startswith("[cpu] built (40 workers): h0, h1") and len(out) == 3
    assert folded_summary(result, verbose=True) == result["summary"]
