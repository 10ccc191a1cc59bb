"""A request body is held as long as its answer streams: it takes its own size, no more."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import orjson

from llm_worker.providers._body import encoded


def _allocated(make: Callable[[], object]) -> int:
    """The bytes Python's allocator holds for what `make()` returns (kept alive meanwhile)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        value = make()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    del value
    return held


def test_a_small_body_is_held_at_its_own_size() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "stream": True}
    out = encoded(body)
    assert orjson.loads(out) == body
    # orjson alone hands over its whole 4 KiB buffer for these few dozen bytes.
    assert _allocated(lambda: orjson.dumps(body)) > 4000
    assert _allocated(lambda: encoded(body)) < 512


def test_a_large_body_is_the_same_json() -> None:
    body = {"messages": [{"role": "user", "content": "x" * 10_000}]}
    assert encoded(body) == orjson.dumps(body)
