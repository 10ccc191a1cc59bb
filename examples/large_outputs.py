"""Large tool outputs: stored as blobs, summarized, read with `inspect`.

With a blob store, a tool result above 800 bytes does not go into the history: the Worker keeps
it in the store and the model reads a short summary (`[blob:<id>] json_array | 250 entries`,
its schema and first entries). The Worker also gives the model an `inspect(blob_id,
selector)` tool to read just the part it needs: `lines:20-50` of a text, `slice:3..8` of an
array, `key:results` of an object.

Run: `python examples/large_outputs.py` (offline unless an API key is set; see _common.py).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import anyio
from _common import model

from llm_worker import FsBlobStore, TextPart, ToolUsePart, Worker, tool
from llm_worker.blobs import StoredOutput, StructuredContent, TextContent
from llm_worker.hooks import ToolResultContext
from llm_worker.testing import ScriptedRequest, ScriptedResponse

BLOB = re.compile(r"\[blob:([0-9a-f-]{36})\]")


@tool(effect="read_only")
def search_orders(status: str) -> list[dict[str, object]]:
    """Find the shop's orders with a status."""
    return [
        {"id": 1000 + n, "status": status, "customer": f"customer-{n % 37}", "total": 10 + n % 90}
        for n in range(250)
    ]


async def show_result(ctx: ToolResultContext) -> None:
    """An after_tool_call hook that only looks: what does the model get to read?"""
    output = ctx.result.output
    if isinstance(output, StoredOutput):
        content = output.content
        full = content.json_text if isinstance(content, StructuredContent) else ""
        if isinstance(content, TextContent):
            full = content.text
        print(f"{ctx.call.name}: a large output, stored as blob {output.blob_id}")
        print(f"  the full output: {len(full.encode())} bytes in the store")
        print(f"  the model reads this summary ({len(ctx.result.content.encode())} bytes):")
    else:
        print(f"{ctx.call.name}: {len(ctx.result.content.encode())} bytes, inline:")
    print("    " + ctx.result.content.replace("\n", "\n    "))


# The scripted model: search, then inspect three entries of the stored result, then answer.
def inspect_step(call: ScriptedRequest) -> ScriptedResponse:
    [summary] = call.tool_results  # the id is in the summary it read
    found = BLOB.search(summary.content)
    assert found is not None
    return ScriptedResponse(
        [
            TextPart("There are many; let me look at the first three."),
            ToolUsePart("", "inspect", {"blob_id": found.group(1), "selector": "slice:0..3"}),
        ]
    )


SCRIPT = [
    ScriptedResponse([ToolUsePart("", "search_orders", {"status": "pending"})]),
    inspect_step,
    ScriptedResponse.text(
        "There are 250 pending orders; the first three are 1000, 1001 and 1002, "
        "of 10, 11 and 12 in total."
    ),
]


async def main(folder: str) -> None:
    store = FsBlobStore(folder)  # one file per blob: <id>.txt or <id>.json
    async with model(SCRIPT, provider="gemini") as (client, server):
        worker = Worker(client, tools=[search_orders], blob_store=store)
        worker.add_after_tool_call_hook(show_result)
        result = await worker.run("How many orders are pending? Name the first three.")
        print(f"model: {result.text}")
        if server is not None:
            largest = max(len(r.body) for r in server.requests)
            print(f"largest request sent to the model: {largest} bytes")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as blobs:
        anyio.run(main, blobs)
        # Beside the blobs, the store keeps the key of its ids (a dot file).
        files = sorted(p.suffix for p in Path(blobs).iterdir() if not p.name.startswith("."))
        print(f"files in the blob store: {files}")
