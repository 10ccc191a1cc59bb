"""Large outputs in an object store: stored on one machine, inspected on another.

`ObjectBlobStore.from_url(...)` keeps blobs in S3, GCS, Azure Blob Storage or local files
(`pip install 'llm-worker[obstore]'`). Here a first Worker's tool returns a 5,000-line build
log; the Worker stores it as a blob. A second Worker, with its own store opened on the same
URL (as on another machine), reads lines of it with `inspect`: through the index stored beside
the blob, only the bytes around those lines are fetched.

Run: `python examples/object_store_blobs.py` (offline, into a temporary folder through
obstore's local-file store). Point it at a bucket with `LLM_WORKER_BLOBS_URL=s3://bucket/prefix`
(credentials from the usual AWS environment).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import anyio
from _common import model

from llm_worker import TextPart, ToolUsePart, Worker, tool
from llm_worker.blobs import ObjectBlobStore
from llm_worker.testing import ScriptedRequest, ScriptedResponse

BLOB = re.compile(r"\[blob:([0-9a-f-]{36})\]")


@tool(effect="read_only")
def build_log() -> str:
    """The log of the last build."""
    lines = [f"step {n:04d} ok: compiled module_{n}.c" for n in range(1, 5001)]
    lines[4211] = "step 4212 FAILED: module_4212.c:88: undefined reference to `frobnicate'"
    return "\n".join(lines) + "\n"


FIRST = [
    ScriptedResponse([ToolUsePart("", "build_log", {})]),
    ScriptedResponse.text("The log is stored; another worker will look into it."),
]


def read_lines(call: ScriptedRequest) -> ScriptedResponse:
    found = BLOB.search(call.request.messages[0].text)  # the id came in the prompt
    assert found is not None
    selector = {"blob_id": found.group(1), "selector": "lines:4210-4214"}
    return ScriptedResponse(
        [TextPart("Let me read around line 4212."), ToolUsePart("", "inspect", selector)]
    )


SECOND = [
    read_lines,
    ScriptedResponse.text("Step 4212 failed: module_4212.c line 88 calls an undefined frobnicate."),
]


async def main(url: str) -> None:
    async with model(FIRST, provider="anthropic") as (client, _):
        here = ObjectBlobStore.from_url(url)  # machine 1
        worker = Worker(client, tools=[build_log], blob_store=here)
        result = await worker.run("Fetch the build log.")
        summary = result.messages[-2].tool_results[0].content
        print(f"machine 1 stored the log; the model read a {len(summary.encode())}-byte summary:")
        print("    " + summary.replace("\n", "\n    "))
    async with model(SECOND, provider="anthropic") as (client, server):
        there = ObjectBlobStore.from_url(url)  # machine 2: same URL, its own client
        worker = Worker(client, blob_store=there)
        tag = BLOB.search(summary)
        assert tag is not None
        result = await worker.run(f"Why did the build in {tag.group(0)} fail?")
        read = result.messages[-2].tool_results[0].content
        print("machine 2 read with inspect:")
        print("    " + read.replace("\n", "\n    "))
        print(f"model: {result.text}")
        if server is not None:
            print(f"largest request sent to the model: {max(len(r.body) for r in server.requests)}")


if __name__ == "__main__":
    configured = os.environ.get("LLM_WORKER_BLOBS_URL")
    if configured:
        anyio.run(main, configured)
    else:
        with tempfile.TemporaryDirectory() as folder:
            anyio.run(main, Path(folder).as_uri())
            # Beside the blobs and their indexes, the key of the ids (a dot file).
            names = sorted(p.suffix for p in Path(folder).iterdir() if p.name[0] != ".")
            print(f"objects in the store: {names}")
