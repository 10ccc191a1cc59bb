"""`inspect` of JSON array entries too large to parse whole: the same text, page by page.

An entry over `ENTRY_CHARS` characters is walked piece by piece; what a page shows must be
`dumps_json` of the entry, character for character, whatever the escapes and however the
store's chunks cut them, and memory must stay near the page even deep into the entry.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from llm_worker import Content, ToolError
from llm_worker.blobs import FsBlobStore, InspectTool, OutputPolicy, StoredOutput, externalize
from llm_worker.blobs._json_pager import ENTRY_CHARS
from llm_worker.blobs._json_scan import dumps_json
from llm_worker.blobs._summaries import clean
from support.blob_stores import make_store

pytestmark = pytest.mark.anyio

KINDS = ["memory", "fs", "object-local"]
_BODY = re.compile(
    r"── entries \d+\.\.\d+, one JSON value a line ──\n(.*?)(?:\n── note ──|\Z)", re.S
)


async def inspect(store: Any, blob_id: str, selector: str | None = None) -> str:
    args = {"blob_id": blob_id} | ({"selector": selector} if selector else {})
    with anyio.fail_after(60):
        return await InspectTool(store, OutputPolicy()).execute(json.dumps(args))


def shown(out: str) -> str:
    match = _BODY.search(out)
    assert match, out[:400]
    return match.group(1)


def _hostile_string(size: int, seed: int) -> str:
    # Escapes of every kind, astral characters (a surrogate pair once ASCII-escaped),
    # controls and a lone surrogate, in runs that fall across every chunk's edge.
    rng = random.Random(seed)
    alphabet = ["y", "é", "漢", "🧪", "\n", '"', "\\", "\x01", "\t", "/", "\u2028", "\ud800"]
    parts: list[str] = []
    total = 0
    while total < size:
        run = rng.choice(alphabet) * rng.randint(1, 40) + "x" * rng.randint(0, 3000)
        parts.append(run)
        total += len(run)
    return "".join(parts)


def _entry(seed: int) -> Any:
    return {
        "id": 7,
        "big": _hostile_string(ENTRY_CHARS * 3, seed),
        "nested": [{"k": i, "f": i / 3, "s": "é" * (i % 5)} for i in range(20_000)],
        "deep": {"list": [_hostile_string(ENTRY_CHARS * 2, seed + 1), None, True, 1e300]},
        "tail": "end",
    }


async def _stored(store: Any, value: list[Any], ascii_escaped: bool) -> str:
    if not ascii_escaped:
        return await store.store(Content.Structured(value))
    # A tool's own JSON text is stored as written: \uXXXX escapes (surrogate pairs too).
    text = json.dumps(value, ensure_ascii=True)
    out = await externalize(text, store)
    assert isinstance(out, StoredOutput) and out.blob_id
    return out.blob_id


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("ascii_escaped", [False, True])
async def test_every_page_of_a_huge_entry_is_its_json_text(
    kind: str, ascii_escaped: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = make_store(kind, tmp_path, request)
    value = [1, _entry(3), {"after": "x"}]
    blob_id = await _stored(store, value, ascii_escaped)
    expected = clean(dumps_json(value[1]))  # inspect's answers carry no lone surrogate
    assert len(expected) > 5 * ENTRY_CHARS
    rng = random.Random(11)
    offsets = [0, 1, len(expected) - 5, *(rng.randrange(len(expected)) for _ in range(6))]
    for offset in offsets:
        out = await inspect(store, blob_id, f"slice:1..2@{offset}")
        page = shown(out)
        assert page == expected[offset : offset + len(page)], offset
        assert len(page) > 1000 or offset + len(page) == len(expected), offset
    out = await inspect(store, blob_id, "slice:1..3@" + str(len(expected) - 10))
    assert shown(out) == expected[-10:] + '\n{"after":"x"}'


@pytest.mark.parametrize("kind", KINDS)
async def test_the_overview_of_a_huge_first_entry_has_its_schema(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = make_store(kind, tmp_path, request)
    blob_id = await store.store(Content.Structured([_entry(5), 2]))
    out = await inspect(store, blob_id)
    assert "json_array | 2 entries" in out
    assert "id: integer, big: string, nested: array, deep: object, tail: string" in out
    assert shown(out).startswith('{"id":7,"big":"')


@pytest.mark.parametrize(
    ("broken", "why"),
    [
        (b'[{"big":"' + b"y" * (3 << 20), "runs to the end"),  # cut off
        (b'[{"big":"' + b"y" * (3 << 20) + b'\x01"}]', "control character"),
        (b'[{"big":"' + b"y" * (3 << 20) + b'\\q"}]', "valid JSON"),
        (b'[{"big":"' + b"y" * (3 << 20) + b'"} {"next":1}]', "valid JSON"),
        (b"[" + b"[" * 100_000 + b"]" * 100_000 + b"]", "valid JSON"),
    ],
)
async def test_a_damaged_huge_entry_is_an_error_result(
    broken: bytes, why: str, tmp_path: Path
) -> None:
    store = FsBlobStore(tmp_path)
    blob_id = await store.store(Content.Structured([1]))
    (tmp_path / f"{blob_id}.json").write_bytes(broken)
    with pytest.raises(ToolError, match="does not hold valid JSON") as info:
        await inspect(store, blob_id, "slice:0..1")
    assert why in str(info.value) or why == "valid JSON"
