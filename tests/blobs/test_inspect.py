"""The inspect tool: every selector, the bounds and the next-part notes, every bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from llm_worker import BlobStore, Content, FsBlobStore, MemoryBlobStore, OutputPolicy, ToolError
from llm_worker.blobs import BlobId, InspectTool, new_blob_id

TEXT = "\n".join(f"line {i} " + "abcdefghij"[: i % 10] for i in range(1, 3001)) + "\n"
ENTRIES = [{"id": i, "name": f"item {i}", "tags": ["a", "b"][: i % 3]} for i in range(5000)]
OBJECT = {
    "results": ENTRIES[:300],
    "meta": {"inner": {"x": 1, "y": [10, 20, 30]}, "n": 2},
    "a.b": "dotted key",
    "title": "t" * 50,
}


@pytest.fixture
def store(any_store: BlobStore) -> BlobStore:
    """Every store: memory, folder, obstore's local files, S3 (moto)."""
    return any_store


@pytest.fixture
async def blobs(store: BlobStore) -> dict[str, str]:
    return {
        "text": await store.store(Content.Text(TEXT)),
        "array": await store.store(Content.Structured(ENTRIES)),
        "object": await store.store(Content.Structured(OBJECT)),
        "scalar": await store.store(Content.Structured("s" * 3000)),
        "empty": await store.store(Content.Text("")),
    }


async def inspect(tool: InspectTool, blob_id: str, selector: str | None = None) -> str:
    args: dict[str, Any] = {"blob_id": blob_id}
    if selector is not None:
        args["selector"] = selector
    with anyio.fail_after(30):
        return await tool.execute(json.dumps(args))


def body(out: str, title: str) -> str:
    """The text between the section title and the note (or the end)."""
    after = out.split(f"── {title} ──\n", 1)[1] if f"── {title} ──\n" in out else ""
    return "" if after.startswith("── note ──\n") else after.split("\n── note ──\n", 1)[0]


def next_selector(out: str) -> str | None:
    match = re.search(r'Next part: selector "(.*)"\.$', out)
    return match.group(1) if match else None


# -- the tool ----------------------------------------------------------------------------------


def test_tool_members() -> None:
    tool = InspectTool(MemoryBlobStore(), OutputPolicy(inspect_max_chars=5_000))
    assert tool.name == "inspect" and tool.effect == "read_only"
    assert "5000 characters" in tool.description
    schema = tool.input_schema
    assert schema["required"] == ["blob_id"]
    assert set(schema["properties"]) == {"blob_id", "selector"}
    assert schema["properties"]["selector"]["type"] == "string"
    from llm_worker.tools import Tool, tool_meta

    assert isinstance(tool, Tool) and tool_meta(tool).effect == "read_only"


# -- text --------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_lines_range(store: BlobStore, blobs: dict[str, str]) -> None:
    tool = InspectTool(store)
    out = await inspect(tool, blobs["text"], "lines:20-50")
    assert out.startswith(f"[blob:{blobs['text']}] text | 3000 lines\n── lines 20-50 ──\n")
    assert body(out, "lines 20-50") == "\n".join(TEXT.split("\n")[19:50])
    assert "── note ──" not in out
    assert body(await inspect(tool, blobs["text"], "lines:7"), "lines 7-7") == "line 7 abcdefg"
    tail = await inspect(tool, blobs["text"], "lines:2998-")
    assert body(tail, "lines 2998-3000") == "line 2998 abcdefgh\nline 2999 abcdefghi\nline 3000 "


@pytest.mark.anyio
async def test_lines_are_clamped_with_a_note(store: BlobStore, blobs: dict[str, str]) -> None:
    tool = InspectTool(store)
    out = await inspect(tool, blobs["text"], "lines:2999-5000")
    assert body(out, "lines 2999-3000") == "line 2999 abcdefghi\nline 3000 "
    assert "The text has 3000 lines: the range is clamped to lines 2999-3000." in out
    past = await inspect(tool, blobs["text"], "lines:4000-4010")
    assert "Line 4000 is past the end: the text has 3000 lines" in past
    assert "Output limit" not in past and body(past, "lines") == ""
    just_past = await inspect(tool, blobs["text"], "lines:3001")
    assert "Line 3001 is past the end" in just_past and "Output limit" not in just_past
    zero = await inspect(tool, blobs["text"], "lines:0-2")
    assert body(zero, "lines 1-2") == "line 1 a\nline 2 ab" and "start at 1" in zero
    empty = await inspect(tool, blobs["empty"], "lines:1-5")
    assert "text | 0 lines" in empty and "The text is empty" in empty


@pytest.mark.anyio
async def test_overview_of_text_pages_through_the_whole(
    store: BlobStore, blobs: dict[str, str]
) -> None:
    tool = InspectTool(store, OutputPolicy(inspect_max_chars=5_000))
    out = await inspect(tool, blobs["text"])
    assert out.startswith(
        f"[blob:{blobs['text']}] text | 3000 lines\n── lines 1-3000 ──\nline 1 a\n"
    )
    parts: list[str] = []
    while True:
        assert len(out) <= 5_000
        title = out.split("\n")[1].removeprefix("── ").removesuffix(" ──")
        parts.append(body(out, title))
        selector = next_selector(out)
        if selector is None:
            break
        assert re.fullmatch(r"lines:\d+-3000", selector)
        out = await inspect(tool, blobs["text"], selector)
    assert len(parts) > 5
    assert "\n".join(parts) + "\n" == TEXT


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["memory", "fs"])
async def test_one_huge_line_is_bounded_and_paged(kind: str, tmp_path: Path) -> None:
    store: BlobStore = MemoryBlobStore() if kind == "memory" else FsBlobStore(tmp_path)
    line = "".join(chr(0x3041 + i) for i in range(80)) * 125_000  # 10 M characters, 30 MB
    blob_id = await store.store(Content.Text("first\n" + line + "\nlast\n"))
    tool = InspectTool(store)
    out = await inspect(tool, blob_id, "lines:2")
    assert len(out) <= 16_000
    shown = body(out, "lines 2-2")
    assert line.startswith(shown) and len(shown) > 10_000
    assert f"inside line 2 after its character {len(shown)}" in out
    assert next_selector(out) == f"lines:2-2@{len(shown)}"
    second = await inspect(tool, blob_id, f"lines:2-2@{len(shown)}")
    more = body(second, "lines 2-2")
    assert line[len(shown) :].startswith(more) and len(more) > 10_000
    far = await inspect(tool, blob_id, "lines:2-3@9999990")
    assert body(far, "lines 2-3") == line[9_999_990:] + "\nlast"


@pytest.mark.anyio
async def test_a_single_long_line_reassembles_from_its_pages(store: BlobStore) -> None:
    line = "".join(f"{i:06}" for i in range(20_000))  # 120,000 characters
    blob_id = await store.store(Content.Text("head\n" + line))
    tool = InspectTool(store, OutputPolicy(inspect_max_chars=2_000))
    selector: str | None = "lines:2-2"
    got = ""
    pages = 0
    while selector is not None:
        out = await inspect(tool, blob_id, selector)
        assert len(out) <= 2_000
        got += body(out, "lines 2-2")
        selector = next_selector(out)
        pages += 1
    assert got == line and pages > 100


@pytest.mark.anyio
async def test_fs_text_is_streamed_not_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FsBlobStore(tmp_path)
    text = "".join(f"row {i:07} " + "x" * 60 + "\n" for i in range(300_000))  # 22 MB
    blob_id = await store.store(Content.Text(text))

    async def no_load(blob_id: str) -> Content:
        raise AssertionError("a text blob is streamed, never loaded whole")

    monkeypatch.setattr(store, "load", no_load)
    out = await inspect(InspectTool(store), blob_id, "lines:200000-200050")
    rows = body(out, "lines 200000-200050").split("\n")
    assert (
        len(rows) == 51
        and rows[0].startswith("row 0199999 ")
        and rows[-1].startswith("row 0200049 ")
    )
    assert "300000 lines" in out


@pytest.mark.anyio
async def test_multibyte_text_around_chunk_boundaries(tmp_path: Path) -> None:
    # 1 MiB chunks split these 3- and 4-byte characters: nothing is lost or garbled.
    text = "".join(f"{i}:" + "漢😀" * 50 + "\n" for i in range(20_000))
    store = FsBlobStore(tmp_path)
    blob_id = await store.store(Content.Text(text))
    tool = InspectTool(store)
    lines = text.split("\n")
    for first in (1, 3_000, 9_000, 19_990):
        out = await inspect(tool, blob_id, f"lines:{first}-{first + 5}")
        assert body(out, f"lines {first}-{first + 5}") == "\n".join(lines[first - 1 : first + 5])


# -- JSON --------------------------------------------------------------------------------------


def dumped(entries: list[Any]) -> str:
    return "\n".join(json.dumps(e, separators=(",", ":"), ensure_ascii=False) for e in entries)


@pytest.mark.anyio
async def test_slices(store: BlobStore, blobs: dict[str, str]) -> None:
    tool = InspectTool(store)
    out = await inspect(tool, blobs["array"], "slice:3..8")
    assert out.startswith(f"[blob:{blobs['array']}] json_array | 5000 entries\n")
    assert body(out, "entries 3..8, one JSON value a line") == dumped(ENTRIES[3:8])
    cases = {
        "slice:-3..": ("4997..5000", ENTRIES[-3:]),
        "slice:..2": ("0..2", ENTRIES[:2]),
        "slice:10": ("10..11", ENTRIES[10:11]),
        "slice:-1": ("4999..5000", ENTRIES[-1:]),
        "slice:-5..-3": ("4995..4997", ENTRIES[-5:-3]),
        "slice: 7 .. 9": ("7..9", ENTRIES[7:9]),
    }
    for selector, (span, expected) in cases.items():
        got = await inspect(tool, blobs["array"], selector)
        assert body(got, f"entries {span}, one JSON value a line") == dumped(expected), selector


@pytest.mark.anyio
async def test_slices_are_clamped_with_a_note(store: BlobStore, blobs: dict[str, str]) -> None:
    tool = InspectTool(store)
    out = await inspect(tool, blobs["array"], "slice:4998..6000")
    assert body(out, "entries 4998..5000, one JSON value a line") == dumped(ENTRIES[4998:])
    assert "clamped to 4998..5000" in out
    none = await inspect(tool, blobs["array"], "slice:7000..7005")
    assert "No entries in this range" in none
    backwards = await inspect(tool, blobs["array"], "slice:8..3")
    assert "No entries in this range" in backwards


@pytest.mark.anyio
async def test_overview_of_an_array_pages_by_slices(
    store: BlobStore, blobs: dict[str, str]
) -> None:
    tool = InspectTool(store)
    out = await inspect(tool, blobs["array"])
    assert out.startswith(
        f"[blob:{blobs['array']}] json_array | 5000 entries\n── schema ──\n"
        "id: integer, name: string, tags: array\n── entries 0..5000, one JSON value a line ──\n"
    )
    got: list[Any] = []
    while True:
        assert len(out) <= 16_000
        title = next(line for line in out.split("\n") if line.startswith("── entries"))
        got += [json.loads(line) for line in body(out, title[3:-3]).split("\n")]
        selector = next_selector(out)
        if selector is None:
            break
        out = await inspect(tool, blobs["array"], selector)
    assert got == ENTRIES


@pytest.mark.anyio
async def test_keys(store: BlobStore, blobs: dict[str, str]) -> None:
    tool = InspectTool(store)
    overview = await inspect(tool, blobs["object"])
    assert body(overview, "keys") == (
        "results: array (300 entries)\nmeta: object (2 keys)\na.b: string (10 chars)\n"
        "title: string (50 chars)"
    )
    assert "key:NAME" in overview
    meta = await inspect(tool, blobs["object"], "key:meta")
    assert json.loads(body(meta, "key meta: object (2 keys)")) == OBJECT["meta"]
    deep = await inspect(tool, blobs["object"], "key:meta.inner.y")
    assert body(deep, "key meta.inner.y: array (3 entries)") == "10\n20\n30"
    entry = await inspect(tool, blobs["object"], "key:results.7.name")
    assert body(entry, "key results.7.name: string (6 chars)") == '"item 7"'
    dotted = await inspect(tool, blobs["object"], "key:a.b")
    assert body(dotted, "key a.b: string (10 chars)") == '"dotted key"'


@pytest.mark.anyio
async def test_dotted_keys_fall_back_to_shorter_prefixes(store: BlobStore) -> None:
    value = {"a.b": 1, "a": {"b": {"c": 2}}, "line\nbreak": True}
    blob_id = await store.store(Content.Structured(value))
    tool = InspectTool(store)
    assert body(await inspect(tool, blob_id, "key:a.b"), "key a.b: integer") == "1"
    assert body(await inspect(tool, blob_id, "key:a.b.c"), "key a.b.c: integer") == "2"
    with pytest.raises(ToolError, match=r"'a\.b' is an integer: it has no key 'zz'"):
        await inspect(tool, blob_id, "key:a.b.zz")
    listing = body(await inspect(tool, blob_id), "keys")
    assert listing.split("\n") == ["a.b: integer", "a: object (1 keys)", '"line\\nbreak": boolean']


@pytest.mark.anyio
async def test_a_large_key_pages_by_offset(store: BlobStore, blobs: dict[str, str]) -> None:
    tool = InspectTool(store, OutputPolicy(inspect_max_chars=3_000))
    selector: str | None = "key:results"
    got: list[str] = []
    while selector is not None:
        out = await inspect(tool, blobs["object"], selector)
        assert len(out) <= 3_000
        got.append(body(out, "key results: array (300 entries)"))
        selector = next_selector(out)
        assert selector is None or selector.startswith("key:results@")
    pieces = "".join(got)
    assert pieces.replace("\n", "") == dumped(OBJECT["results"]).replace("\n", "")


@pytest.mark.anyio
async def test_scalar_blob(store: BlobStore, blobs: dict[str, str]) -> None:
    tool = InspectTool(store)
    out = await inspect(tool, blobs["scalar"])
    assert out.startswith(f"[blob:{blobs['scalar']}] json_string | 3000 chars\n── value ──\n")
    assert body(out, "value") == json.dumps("s" * 3000)
    with pytest.raises(ToolError, match="single JSON string"):
        await inspect(tool, blobs["scalar"], "key:x")


# -- bad input ---------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("kind", "selector", "message"),
    [
        ("text", "slice:1..3", "is text"),
        ("text", "key:a", "is text"),
        ("array", "lines:1-3", "is a json_array"),
        ("array", "key:id", "is a json_array"),
        ("object", "lines:1-3", "is a json_object"),
        ("object", "slice:0..3", "is a json_object"),
        ("object", "key:nope", "has no key 'nope'; its keys: results, meta, a.b, title"),
        ("object", "key:meta.zzz", "no key 'zzz'"),
        ("object", "key:results.300", "is an array of 300 entries"),
        ("object", "key:title.x", "'title' is a string: it has no key 'x'"),
        ("text", "lines:1-2@99999999", "past the end"),
    ],
)
async def test_selector_of_the_wrong_kind(
    store: BlobStore, blobs: dict[str, str], kind: str, selector: str, message: str
) -> None:
    with pytest.raises(ToolError, match=re.escape(message)):
        await inspect(InspectTool(store), blobs[kind], selector)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "selector",
    [
        "lines:-5-x",
        "lines:",
        "lines:a-b",
        "lines:50-20",
        "lines:1-2-3",
        "slice:1..x",
        "slice:",
        "slice:1...3",
        "key:",
        "key:" + "k" * 201,
        "bogus",
        "lines 1-2",
        "lines:1-2@x",
        "lines:\u0661-\u0663",  # other scripts' digits
        "lines:99999999999999999999999",
    ],
)
async def test_malformed_selectors(store: BlobStore, blobs: dict[str, str], selector: str) -> None:
    with pytest.raises(ToolError, match="selector"):
        await inspect(InspectTool(store), blobs["text"], selector)


@pytest.mark.anyio
async def test_bad_ids_and_arguments(store: BlobStore, tmp_path: Path) -> None:
    outside = tmp_path / f"{new_blob_id()}.txt"
    outside.write_text("outside the store")
    tool = InspectTool(store)
    for bad in ["../../etc/passwd", "x.txt", "/etc/passwd", str(outside), f"../{outside.stem}", ""]:
        with pytest.raises(ToolError, match="is not a blob id"):
            await inspect(tool, bad, "lines:1-2")
    with pytest.raises(ToolError, match="no blob"):
        await inspect(tool, new_blob_id())
    with pytest.raises(ToolError, match="no blob"):
        await inspect(tool, outside.stem)  # a valid id, but not in this store
    for raw, message in [
        ("not json", "not JSON"),
        ("[1]", "must be an object"),
        ('{"selector": "lines:1-2"}', "blob_id is required"),
        ('{"blob_id": 5}', "blob_id is required"),
        (json.dumps({"blob_id": new_blob_id(), "selector": 5}), "selector must be a string"),
    ]:
        with pytest.raises(ToolError, match=message):
            await tool.execute(raw)


@pytest.mark.anyio
async def test_a_damaged_json_blob_is_an_error_result(tmp_path: Path) -> None:
    blob_id = new_blob_id()
    (tmp_path / f"{blob_id}.json").write_text("[1, 2, oops]")
    with pytest.raises(ToolError, match="does not hold valid JSON"):
        await inspect(InspectTool(FsBlobStore(tmp_path)), blob_id)


@pytest.mark.anyio
async def test_output_is_always_bounded(store: BlobStore) -> None:
    tool = InspectTool(store, OutputPolicy(inspect_max_chars=2_000))
    huge_key = {"k" * 150: ["v" * 5_000] * 3, "x": {"y" * 190: "z" * 10_000}}
    blob_id = await store.store(Content.Structured(huge_key))
    selectors = [None, "key:" + "k" * 150, "key:x." + "y" * 190, "key:x", "@100"]
    for selector in selectors:
        out = await inspect(tool, blob_id, selector)
        assert len(out) <= 2_000, selector
    arr_id = await store.store(Content.Structured([{"text": "é" * 50_000}] * 3))
    for selector in [None, "slice:0..3", "slice:1..2@45000"]:
        assert len(await inspect(tool, arr_id, selector)) <= 2_000


class _TrustingStore:
    """A store that checks no id (a user's own): it records every id it is asked about."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def store(self, content: Content) -> BlobId:
        raise AssertionError("inspect never stores")

    async def load(self, blob_id: str) -> Content:
        self.asked.append(blob_id)
        return Content.Text("read through an unchecked id")

    async def exists(self, blob_id: str) -> bool:
        self.asked.append(blob_id)
        return True

    async def delete(self, blob_id: str) -> bool:
        raise AssertionError("inspect never deletes")


@pytest.mark.anyio
async def test_inspect_checks_the_id_before_any_store_sees_it() -> None:
    # The tool is the guard: a store that does not validate ids must still never be asked
    # about a path.
    store = _TrustingStore()
    tool = InspectTool(store)
    for bad in ["../../etc/passwd", "/etc/passwd", f"../{new_blob_id()}", "x.txt"]:
        with pytest.raises(ToolError, match="is not a blob id"):
            await inspect(tool, bad)
    assert store.asked == []
