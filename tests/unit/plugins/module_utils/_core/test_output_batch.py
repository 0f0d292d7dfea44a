"""Training output in batches: latency and batch size bounded, nothing lost or reordered."""
from __future__ import annotations

from ansible_collections.flodl.cluster.plugins.module_utils._core.output_batch import OutputBatcher


def test_lines_wait_for_the_interval_then_come_out_together_in_order():
    b = OutputBatcher(interval=2.0)
    assert b.wait(0.0) is None
    assert b.add("a", 10.0) is None
    assert b.add("b", 11.0) is None
    assert b.wait(11.5) == 0.5
    assert not b.due(11.9)
    assert b.due(12.0)
    assert b.add("c", 12.0) == "a\nb\nc"
    assert b.take() is None and b.wait(12.0) is None


def test_a_full_batch_is_shown_at_once():
    b = OutputBatcher(interval=60, max_lines=3)
    assert [b.add(x, 0.0) for x in "abcd"] == [None, None, "a\nb\nc", None]
    assert b.take() == "d"
    by_size = OutputBatcher(interval=60, max_bytes=10)
    assert by_size.add("12345", 0.0) is None
    assert by_size.add("6789", 0.0) == "12345\n6789"


def test_six_thousand_fast_lines_make_few_batches():
    b = OutputBatcher()
    shown = [text for i in range(6000) if (text := b.add(f"[h1] step {i} loss 0.1", i * 0.001)) is not None]
    last = b.take()
    if last:
        shown.append(last)
    lines = "\n".join(shown).split("\n")
    assert lines == [f"[h1] step {i} loss 0.1" for i in range(6000)]
    assert len(shown) <= 15


def test_a_slow_trickle_is_bounded_by_the_interval():
    b = OutputBatcher(interval=2.0)
    # one line every 0.1 s for 10 minutes: at most one batch per interval
    shown = sum(b.add("x", i * 0.1) is not None for i in range(6000))
    assert 270 <= shown <= 301
