"""Review probes of the captured-content cap: exact at its edge, whole characters at the cut."""

from __future__ import annotations

import pytest

from llm_worker.otel._content import captured

MARK = "llm_worker.truncated."


@pytest.mark.parametrize("cap", [64, 65, 1000, 16_384])
def test_a_value_of_exactly_the_cap_is_whole_and_one_more_is_cut_to_it(cap: int) -> None:
    whole = "🧪" * cap
    assert captured("a", whole, cap) == {"a": whole}
    cut = captured("a", whole + "é", cap)
    marker = f"…[truncated: {cap + 1} chars]"
    assert cut == {"a": "🧪" * (cap - len(marker)) + marker, MARK + "a": cap + 1}
    assert len(cut["a"]) == cap
    cut["a"].encode("utf-8")  # astral characters are whole code points: nothing split


def test_the_smallest_cap_holds_the_marker_of_a_huge_value() -> None:
    for size in (70, 5_000_000):
        cut = captured("a", "x" * size, 64)
        assert len(cut["a"]) == 64 and cut["a"].endswith(f"x…[truncated: {size} chars]")
