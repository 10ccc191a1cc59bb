"""Review probes of the streamed JSON array pager: what a page shows is the entries' JSON text.

The store's chunks (1 MiB of bytes, 1 Mi characters in memory) may cut any token: a number
cut after its `.`, `e` or sign must wait for the next chunk, not end at the cut.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from llm_worker import Content
from llm_worker.blobs import InspectTool, OutputPolicy
from llm_worker.blobs import _json_pager as pager
from llm_worker.blobs._json_scan import NotJson, dumps_json
from support.blob_stores import make_store

pytestmark = pytest.mark.anyio

KINDS = ["memory", "fs", "object-local"]
_MiB = 1 << 20


async def inspect(store: Any, blob_id: str, selector: str) -> str:
    args = {"blob_id": blob_id, "selector": selector}
    with anyio.fail_after(60):
        return await InspectTool(store, OutputPolicy()).execute(json.dumps(args))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("number", ["1.5", "1e-300", "-0.0", "12345.678e+9"])
@pytest.mark.parametrize("cut", [1, 2, 3])
async def test_a_number_cut_by_the_chunk_boundary_is_read_whole(
    kind: str, number: str, cut: int, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = make_store(kind, tmp_path, request)
    # '["xxx…",<number>]': the first `cut` characters of the number end the first 1 MiB.
    padding = _MiB - len('["",') - cut
    value = ["x" * padding, json.loads(number), "after"]
    blob_id = await store.store(Content.Structured(value))
    out = await inspect(store, blob_id, "slice:1..3")
    assert f'{dumps_json(value[1])}\n"after"' in out, out[-300:]


def _pull(data: bytes, sizes: random.Random | int) -> Callable[[], bytes | None]:
    pos = 0

    def pull() -> bytes | None:
        nonlocal pos
        if pos >= len(data):
            return None
        size = sizes if isinstance(sizes, int) else sizes.randint(1, 7)
        pos += size
        return data[pos - size : pos]

    return pull


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randint(0, 9 if depth < 4 else 3)
    if kind == 0:
        alphabet = ["a", "é", "漢", "🧪", "\n", '"', "\\", "\x01", "\u2028", "\ud800", "\udc00"]
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
    if kind == 1:
        return rng.choice([0, -1, 2**64, -(2**70), 12345678901234567890, 10**30])
    if kind == 2:
        return rng.choice([0.0, -0.0, 1.5, 1e300, 1e-300, 5e-324, 1e16, 0.1])
    if kind == 3:
        return rng.choice([True, False, None])
    if kind < 7:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {str(i): _random_value(rng, depth + 1) for i in range(rng.randint(0, 4))}


@pytest.mark.parametrize("seed", range(4))
def test_random_arrays_cut_at_every_chunk_size_page_as_their_json_text(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A tiny ENTRY_CHARS sends every container and long string through the piece-by-piece walk.
    monkeypatch.setattr(pager, "ENTRY_CHARS", 40)
    rng = random.Random(seed)
    for round_ in range(150):
        value = [_random_value(rng) for _ in range(rng.randint(0, 4))]
        text = json.dumps(value, ensure_ascii=round_ % 2 == 0, indent=1 if round_ % 3 else None)
        data = text.encode("utf-8", "surrogatepass")
        # What the text means (escaped adjacent surrogates read back as one character).
        expected = "\n".join(dumps_json(entry) for entry in json.loads(text))
        for sizes in (1, 2, 3, 5, random.Random(round_)):
            paged = pager.page_entries(
                _pull(data, sizes),
                number=None,
                bounds=(0, 1 << 62),
                window=(0, 1 << 62),
                to_the_end=True,
            )
            assert (paged.page.text, paged.count) == (expected, len(value)), (text, sizes)


@pytest.mark.parametrize(
    "broken",
    [b"[1.5", b"[1.", b"[1e", b"[-", b'["a', b"[[1,2]", b'[{"a":1}', b"[1,]", b"[,1]", b"{}", b"1"],
)
def test_a_truncated_or_broken_array_is_not_json(broken: bytes) -> None:
    for size in (1, 2, len(broken)):
        with pytest.raises(NotJson):
            pager.page_entries(
                _pull(broken, size),
                number=None,
                bounds=(0, 10),
                window=(0, 1000),
                to_the_end=True,
            )
