"""ToolOutput / Content, promotion, blob ids, OutputPolicy, MemoryBlobStore and externalize."""

from __future__ import annotations

import json
import uuid

import anyio
import anyio.lowlevel
import pytest

import llm_worker
from llm_worker import (
    BlobError,
    BlobNotFoundError,
    ConfigurationError,
    Content,
    InvalidBlobIdError,
    MemoryBlobStore,
    OutputPolicy,
    ToolOutput,
)
from llm_worker.blobs import (
    InlineOutput,
    StoredOutput,
    StructuredContent,
    TextContent,
    externalize,
    new_blob_id,
    parse_blob_id,
)

BIG_TEXT = "\n".join(f"line {i}: " + "x" * 40 for i in range(100))


def describe(output: ToolOutput) -> str:
    match output:
        case ToolOutput.Inline(text=text):
            return f"inline:{text}"
        case ToolOutput.Stored(summary=summary, content=Content.Text(text=text)):
            return f"stored-text:{summary}:{len(text)}"
        case ToolOutput.Stored(content=Content.Structured(value=value)):
            return f"stored-json:{type(value).__name__}"
        case _:
            return "unknown"


# -- the types ---------------------------------------------------------------------------------


def test_variants_are_told_apart_by_isinstance_and_match() -> None:
    inline = ToolOutput.Inline("hi")
    stored = ToolOutput.Stored(summary="s", content=Content.Text("body"))
    structured = ToolOutput.Stored(summary="s", content=Content.Structured([1, 2]))
    assert isinstance(inline, ToolOutput) and isinstance(inline, ToolOutput.Inline)
    assert not isinstance(inline, ToolOutput.Stored)
    assert isinstance(stored, ToolOutput.Stored) and isinstance(stored.content, Content.Text)
    assert isinstance(structured.content, Content) and not isinstance(
        structured.content, TextContent
    )
    assert describe(inline) == "inline:hi"
    assert describe(stored) == "stored-text:s:4"
    assert describe(structured) == "stored-json:list"
    assert ToolOutput.Inline is InlineOutput and ToolOutput.Stored is StoredOutput
    assert Content.Text is TextContent and Content.Structured is StructuredContent


def test_text_is_what_the_model_reads() -> None:
    assert ToolOutput.Inline("abc").text == "abc"
    assert ToolOutput.Stored(summary="[blob:x] y", content=Content.Text("z")).text == "[blob:x] y"
    assert ToolOutput.Stored(summary="s", content=Content.Text("z")).blob_id is None


def test_equality_and_reprs_are_bounded() -> None:
    assert ToolOutput.Inline("a") == ToolOutput.Inline("a") != ToolOutput.Inline("b")
    assert Content.Structured({"a": [1]}) == Content.Structured({"a": [1]})
    assert Content.Structured([1]) != Content.Structured([2])
    huge = "y" * 1_000_000
    assert len(repr(Content.Text(huge))) < 200
    assert len(repr(ToolOutput.Inline(huge))) < 200
    assert len(repr(Content.Structured(list(range(100_000))))) < 200
    assert len({ToolOutput.Inline("a"), ToolOutput.Inline("a")}) == 1


def test_public_names_are_exported_lazily() -> None:
    for name in ("ToolOutput", "Content", "BlobStore", "FsBlobStore", "MemoryBlobStore"):
        assert name in llm_worker.__all__
        assert getattr(llm_worker, name).__name__ == name
    assert llm_worker.BlobId is llm_worker.blobs.BlobId
    assert llm_worker.OutputPolicy is OutputPolicy
    from llm_worker.blobs import InspectTool, summarize

    assert InspectTool.__module__ == "llm_worker.blobs._inspect" and callable(summarize)


# -- promotion ---------------------------------------------------------------------------------


def test_up_to_800_bytes_stays_inline() -> None:
    assert ToolOutput.from_string("a" * 800) == ToolOutput.Inline("a" * 800)
    assert isinstance(ToolOutput.from_string("a" * 801), ToolOutput.Stored)
    assert ToolOutput.from_string("") == ToolOutput.Inline("")


def test_threshold_counts_utf8_bytes_not_characters() -> None:
    kana = "あ" * 266  # 798 bytes
    assert isinstance(ToolOutput.from_string(kana), ToolOutput.Inline)
    assert isinstance(ToolOutput.from_string(kana + "a" * 2), ToolOutput.Inline)  # 800
    assert isinstance(ToolOutput.from_string(kana + "a" * 3), ToolOutput.Stored)  # 801
    emoji = "😀" * 200  # 200 characters, 800 bytes
    assert isinstance(ToolOutput.from_string(emoji), ToolOutput.Inline)
    assert isinstance(ToolOutput.from_string(emoji + "!"), ToolOutput.Stored)
    assert isinstance(ToolOutput.from_string("a" * 10, threshold=9), ToolOutput.Stored)


def test_promoted_text_and_json() -> None:
    text = ToolOutput.from_string(BIG_TEXT)
    assert isinstance(text, StoredOutput) and text.summary == "" and text.blob_id is None
    assert text.content == Content.Text(BIG_TEXT)

    entries = [{"id": i, "name": f"n{i}"} for i in range(100)]
    array = ToolOutput.from_string("  \n" + json.dumps(entries, indent=1) + "\n")
    assert isinstance(array, StoredOutput) and isinstance(array.content, StructuredContent)
    assert array.content.value == entries

    obj = ToolOutput.from_string(json.dumps({"results": entries}))
    assert isinstance(obj, StoredOutput) and isinstance(obj.content, StructuredContent)
    assert obj.content.value == {"results": entries}


@pytest.mark.parametrize(
    "text",
    [
        '"' + "s" * 900 + '"',  # a top-level JSON scalar is text
        "9" * 900,
        "[" + "1," * 450 + "]",  # trailing comma
        "[" + "1," * 450 + "1] trailing",
        "[" + "1," * 450 + "NaN]",  # not JSON
        "{" + '"a": 1,' * 200 + '"b" 2}',
        "[INFO] " + "log line " * 100,
        "[" * 5000 + "]" * 5000,  # deeper than the parser goes
    ],
)
def test_not_a_json_array_or_object_is_stored_as_text(text: str) -> None:
    out = ToolOutput.from_string(text)
    assert isinstance(out, StoredOutput)
    assert out.content == Content.Text(text)


def test_promoted_json_text_is_kept_byte_for_byte() -> None:
    text = '[ {"b": 1, "a": 2.50} ,\n' + ",".join(['{"a": 1e3}'] * 100) + " ]"
    out = ToolOutput.from_string(text)
    assert isinstance(out, StoredOutput) and isinstance(out.content, StructuredContent)
    assert out.content.json_text == text  # formatting and number spelling untouched
    assert out.content.value[0] == {"b": 1, "a": 2.5}


def test_json_the_fast_parser_refuses_is_still_read() -> None:
    big = 2**70
    text = json.dumps([big, "\ud800"] + ["x" * 10] * 100)
    out = ToolOutput.from_string(text)
    assert isinstance(out, StoredOutput) and isinstance(out.content, StructuredContent)
    assert out.content.value[:2] == [big, "\ud800"]


# -- ids ---------------------------------------------------------------------------------------


def test_ids_are_uuid7_and_time_ordered() -> None:
    ids = [new_blob_id() for _ in range(2_000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert all(uuid.UUID(i).version == 7 and str(uuid.UUID(i)) == i for i in ids)


@pytest.mark.anyio
async def test_stored_ids_name_the_content_under_the_stores_key() -> None:
    store, other = MemoryBlobStore(), MemoryBlobStore()
    ids = [await store.store(Content.Text(str(i))) for i in range(300)]
    assert len(set(ids)) == 300
    assert [await store.store(Content.Text(str(i))) for i in range(300)] == ids
    assert await other.store(Content.Text("0")) != ids[0]  # another key, another id


def test_parse_blob_id_accepts_only_canonical_uuids() -> None:
    good = new_blob_id()
    assert parse_blob_id(good) == good
    assert parse_blob_id(good.upper()) == good
    for bad in [
        "../../etc/passwd",
        "x.txt",
        "/etc/passwd",
        "",
        good + "\n",
        good + ".txt",
        "../" + good,
        good.replace("-", ""),
        "{" + good + "}",
        good[:-1] + "٣",  # an Arabic-Indic digit
        good[:8] + "\x00" + good[9:],
        5,
        None,
    ]:
        with pytest.raises(InvalidBlobIdError):
            parse_blob_id(bad)


# -- policy ------------------------------------------------------------------------------------


def test_policy_defaults_are_the_seeds() -> None:
    policy = OutputPolicy()
    assert (policy.inline_threshold, policy.summary_max_bytes) == (800, 400)
    assert (policy.head_lines, policy.tail_lines, policy.array_head) == (5, 3, 2)
    assert policy.inspect_max_chars == 16_000


@pytest.mark.parametrize(
    "changes",
    [
        {"summary_max_bytes": 99},
        {"inspect_max_chars": 1_999},
        {"head_lines": -1},
        {"inline_threshold": 8.5},
        {"array_head": True},
    ],
)
def test_policy_rejects_values_out_of_range(changes: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        OutputPolicy(**changes)  # type: ignore[arg-type]


# -- MemoryBlobStore ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_memory_store_round_trip_and_isolation() -> None:
    store = MemoryBlobStore()
    value = {"a": [1, 2]}
    text_id = await store.store(Content.Text("héllo 😀\r\n"))
    json_id = await store.store(Content.Structured(value))
    value["a"].append(3)  # changing the value afterwards does not change the blob
    assert await store.load(text_id) == Content.Text("héllo 😀\r\n")
    assert await store.load(json_id) == Content.Structured({"a": [1, 2]})
    assert await store.exists(text_id) and not await store.exists(new_blob_id())
    assert len(store) == 2
    with pytest.raises(BlobNotFoundError):
        await store.load(new_blob_id())
    with pytest.raises(InvalidBlobIdError):
        await store.load("../x")
    with pytest.raises(InvalidBlobIdError):
        await store.exists("x.txt")


@pytest.mark.anyio
async def test_memory_store_refuses_values_that_are_not_json() -> None:
    store = MemoryBlobStore()
    with pytest.raises(BlobError, match="not JSON"):
        await store.store(Content.Structured({"x": object()}))
    with pytest.raises(BlobError, match="not JSON"):
        await store.store(Content.Structured([{1j: 2}]))
    assert len(store) == 0


# -- externalize -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_without_a_store_everything_stays_inline() -> None:
    assert await externalize(BIG_TEXT, None) == ToolOutput.Inline(BIG_TEXT)
    stored_text = ToolOutput.Stored(summary="mine", content=Content.Text(BIG_TEXT))
    assert await externalize(stored_text, None) == ToolOutput.Inline(BIG_TEXT)
    stored_json = ToolOutput.Stored(summary="", content=Content.Structured({"a": [1, "é"]}))
    assert await externalize(stored_json, None) == ToolOutput.Inline('{"a":[1,"é"]}')


@pytest.mark.anyio
async def test_with_a_store_large_strings_are_stored_with_a_summary() -> None:
    store = MemoryBlobStore()
    small = await externalize("short", store)
    assert small == ToolOutput.Inline("short") and len(store) == 0

    out = await externalize(BIG_TEXT, store)
    assert isinstance(out, StoredOutput) and out.blob_id is not None
    assert out.summary.startswith(f"[blob:{out.blob_id}] text | 100 lines\n── head ──\n")
    assert out.text == out.summary
    assert len(out.summary.encode()) <= 400
    assert await store.load(out.blob_id) == Content.Text(BIG_TEXT)

    entries = [{"id": i} for i in range(200)]
    arr = await externalize(json.dumps(entries), store)
    assert isinstance(arr, StoredOutput) and arr.blob_id is not None
    assert arr.summary.startswith(f"[blob:{arr.blob_id}] json_array | 200 entries")
    loaded = await store.load(arr.blob_id)
    assert isinstance(loaded, StructuredContent) and loaded.value == entries


@pytest.mark.anyio
async def test_policy_threshold_and_caps_apply() -> None:
    store = MemoryBlobStore()
    policy = OutputPolicy(inline_threshold=10, summary_max_bytes=120)
    out = await externalize("0123456789ab", store, policy)
    assert isinstance(out, StoredOutput)
    long = await externalize("z" * 5_000, store, policy)
    assert len(long.text.encode()) <= 120


@pytest.mark.anyio
async def test_tool_outputs_keep_the_tools_choices() -> None:
    store = MemoryBlobStore()
    inline = ToolOutput.Inline("x" * 5_000)
    assert await externalize(inline, store) is inline  # the tool chose inline
    assert len(store) == 0

    own = ToolOutput.Stored(summary="42 rows of results", content=Content.Structured([1] * 42))
    out = await externalize(own, store)
    assert isinstance(out, StoredOutput) and out.blob_id is not None
    assert out.summary == f"[blob:{out.blob_id}] 42 rows of results"

    tagged = ToolOutput.Stored(
        summary=f"see [blob:{out.blob_id}]", content=Content.Text("t"), blob_id=out.blob_id
    )
    again = await externalize(tagged, store)
    assert again.text == f"see [blob:{out.blob_id}]" and len(store) == 1  # stored already

    wordy = ToolOutput.Stored(summary="é" * 1_000, content=Content.Text("t"))
    cut = await externalize(wordy, store)
    assert len(cut.text.encode()) <= 400 and cut.text.endswith("…")

    auto = ToolOutput.Stored(summary="", content=Content.Text("one\ntwo"))
    summarized = await externalize(auto, store)
    assert summarized.text.endswith("text | 2 lines\n── head ──\none\ntwo")


@pytest.mark.anyio
async def test_large_promotion_runs_off_the_event_loop() -> None:
    # A 4 MB JSON array is scanned in a worker thread: a ticker task keeps running meanwhile.
    text = json.dumps([{"id": i, "v": "x" * 20} for i in range(100_000)])
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    outputs: list[ToolOutput] = []
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            outputs.append(await externalize(text, MemoryBlobStore()))
            tg.cancel_scope.cancel()
    assert "100000 entries" in outputs[0].text
    assert ticks > 10


@pytest.mark.anyio
async def test_externalize_rejects_other_types() -> None:
    with pytest.raises(TypeError):
        await externalize(42, MemoryBlobStore())  # type: ignore[arg-type]
