"""Large tool outputs end to end (issue #7), over each provider's real wire.

A Worker with an `FsBlobStore` runs tools returning 2 MB of text, a 5,000-entry JSON array
and a JSON object. The request the provider receives carries only their summaries; the
scripted model reads the blob ids out of that request, as a real model would, and calls the
built-in `inspect` tool with every selector kind, a malformed selector, an unknown id and a
path for an id; the next request carries the right slices and the error results. The
after_tool_call hooks see which outputs were stored and their full content; the store gives
the content back. Without a store the same outputs go inline, as before blobs existed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from llm_worker import FsBlobStore, RunStatus, ToolUsePart, Worker, tool
from llm_worker.blobs import StoredOutput, StructuredContent, TextContent
from llm_worker.hooks import ToolResultContext
from llm_worker.messages import Part
from llm_worker.testing import ScriptedRequest, ScriptedResponse
from support.e2e import PROVIDERS, TIMEOUT, serve
from support.wire_bodies import assert_failed, assert_valid

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("provider", PROVIDERS)]

LINES = 40_000
BIG_TEXT = "".join(
    f"line {n:05d} of the build log: compiled module {n}\n" for n in range(1, LINES + 1)
)
ENTRIES = [{"id": n, "name": f"item-{n}", "score": n / 2} for n in range(5_000)]
CONFIG = {
    "meta": {"owner": "ops", "version": 3},
    "results": [{"host": f"web-{n}", "healthy": n % 7 != 0} for n in range(60)],
    "notes": "nightly inventory",
}
UNKNOWN_ID = "0192f0c4-5a1e-7c3d-9b2a-3f4e5d6c7b8a"
BLOB = re.compile(r"\[blob:([0-9a-f-]{36})\]")


@tool
async def build_log() -> str:
    """The full build log."""
    return BIG_TEXT


@tool
async def inventory() -> str:
    """Every item, as a JSON array."""
    return orjson.dumps(ENTRIES).decode()


@tool
async def settings() -> str:
    """The settings, as a JSON object."""
    return orjson.dumps(CONFIG).decode()


TOOLS = [build_log, inventory, settings]
FIRST = ScriptedResponse(
    [
        ToolUsePart("call_log", "build_log", {}),
        ToolUsePart("call_inv", "inventory", {}),
        ToolUsePart("call_set", "settings", {}),
    ]
)
PLAIN_FINAL = ScriptedResponse.text("Read them all.")


def _inspections(ids: list[str]) -> list[Part]:
    """The model's reads: each selector kind, then three bad calls."""
    text_id, array_id, object_id = ids
    reads: list[dict[str, Any]] = [
        {"blob_id": text_id},
        {"blob_id": text_id, "selector": "lines:20-22"},
        {"blob_id": array_id, "selector": "slice:3..5"},
        {"blob_id": object_id, "selector": "key:meta"},
        {"blob_id": text_id, "selector": "lines:-5-x"},
        {"blob_id": UNKNOWN_ID},
        {"blob_id": "../../etc/passwd"},
    ]
    return [ToolUsePart(f"call_inspect_{n}", "inspect", args) for n, args in enumerate(reads)]


class Model:
    """The scripted model: calls the tools, reads the ids it was sent, inspects, answers."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.ids: list[str] = []

    def script(self) -> list[Any]:
        return [FIRST, self.inspect, PLAIN_FINAL]

    def inspect(self, call: ScriptedRequest) -> ScriptedResponse:
        # The neutral request the server decoded: the same reading on every wire format.
        self.ids = [_blob_id(r.content) for r in call.tool_results]
        return ScriptedResponse(_inspections(self.ids))


def _blob_id(output: str) -> str:
    match = BLOB.match(output)
    assert match is not None, output[:200]
    return match.group(1)


def _section(output: str) -> str:
    """The selection an inspect result shows: after its header and title, before any note."""
    body = output.split("\n", 2)[2]
    return body.split("\n── note ──", 1)[0]


async def test_only_summaries_travel_and_inspect_reads_the_blobs(
    provider: str, tmp_path: Path
) -> None:
    store = FsBlobStore(tmp_path)
    model = Model(provider)
    seen: list[tuple[str, bool, Any]] = []

    async def watch(ctx: ToolResultContext) -> None:
        seen.append((ctx.call.name, ctx.stored, ctx.result.output))

    async with serve(provider, model.script()) as wire:
        worker = Worker(wire.client(), tools=TOOLS, blob_store=store)
        worker.add_after_tool_call_hook(watch)
        with anyio.fail_after(TIMEOUT):
            result = await worker.run("Summarize the build.")
        requests = list(wire.server.requests)

    assert result.status is RunStatus.FINISHED
    assert result.text == "Read them all."
    assert len(requests) == 3
    text_id, array_id, object_id = model.ids

    # Request 2: the three outputs as summaries only.
    summaries = requests[1]
    assert len(summaries.body) < 8_000
    [step] = assert_valid(provider, summaries.json())
    headers = [r.output.split("\n", 1)[0] for r in step.results]
    assert headers == [
        f"[blob:{text_id}] text | {LINES} lines",
        f"[blob:{array_id}] json_array | 5000 entries",
        f"[blob:{object_id}] json_object | 3 keys",
    ]
    assert all(len(r.output.encode()) <= 400 for r in step.results)
    assert "line 00001 of the build log" in step.results[0].output  # the head
    assert f"line {LINES:05d} of the build log" in step.results[0].output  # the tail

    # Request 3: what inspect returned, in call order.
    assert len(requests[2].body) < 60_000
    reads = assert_valid(provider, requests[2].json())[-1].results
    overview, lines, entries, meta, malformed, unknown, escape = reads
    assert overview.output.startswith(f"[blob:{text_id}] text | {LINES} lines\n")
    assert BIG_TEXT[:2_000] in overview.output
    assert len(overview.output) <= 16_000
    assert _section(lines.output).splitlines() == BIG_TEXT.splitlines()[19:22]
    assert [orjson.loads(line) for line in _section(entries.output).splitlines()] == ENTRIES[3:5]
    assert orjson.loads(_section(meta.output)) == CONFIG["meta"]
    for good in (overview, lines, entries, meta):
        assert good.is_error is not True
    assert_failed(malformed, "malformed selector 'lines:-5-x'")
    assert_failed(unknown, f"no blob {UNKNOWN_ID}")
    assert_failed(escape, "is not a blob id")

    # The hooks saw the stored outputs whole; inspect's own results were never stored.
    stored = {name: output for name, was_stored, output in seen if was_stored}
    assert sorted(stored) == ["build_log", "inventory", "settings"]
    assert isinstance(stored["build_log"], StoredOutput)
    assert stored["build_log"].blob_id == text_id
    assert stored["build_log"].content == TextContent(BIG_TEXT)
    assert [name for name, was_stored, _ in seen if not was_stored] == ["inspect"] * 7

    # The store gives every output back, one file each, under the ids the model was sent.
    assert await store.load(text_id) == TextContent(BIG_TEXT)
    array = await store.load(array_id)
    assert isinstance(array, StructuredContent)
    assert array.value == ENTRIES
    files = [p.name async for p in anyio.Path(tmp_path).iterdir()]
    blobs = [f"{text_id}.txt", f"{array_id}.json", f"{object_id}.json"]
    assert sorted(files) == sorted([*blobs, ".llm-worker-blob-key"])  # and the ids' key
    # The history carries the summaries, never the content.
    assert [p.content for p in worker.history[2].tool_results] == [r.output for r in step.results]


async def test_without_a_store_outputs_stay_inline(provider: str) -> None:
    async with serve(provider, [FIRST, PLAIN_FINAL]) as wire:
        worker = Worker(wire.client(), tools=TOOLS)
        with anyio.fail_after(TIMEOUT):
            result = await worker.run("Summarize the build.")
        body = wire.server.requests[1]

    assert result.status is RunStatus.FINISHED
    assert "inspect" not in worker.tools.names
    assert len(body.body) > len(BIG_TEXT)
    [step] = assert_valid(provider, body.json())
    assert [r.output for r in step.results] == [
        BIG_TEXT,
        orjson.dumps(ENTRIES).decode(),
        orjson.dumps(CONFIG).decode(),
    ]
    assert "[blob:" not in body.body.decode()
