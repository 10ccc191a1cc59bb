"""Review probe (R32): a tool's images checked against the request the Worker will send.

The Worker takes a tool's images out of its result when the next request would carry more
media than the provider accepts (`worker/_media_check.py`). It counts the media of the whole
history (`inline_size(owner.history)`), while a `ContextPolicy` sends less: the turns a
summary replaced leave the request with their images. Found by this probe: once the
history's images passed the limit, every later screenshot was taken out of its result as
"could not be sent" (52 of 60 here) while the requests carried none. The batch's media are
now checked beside the run's last request (the history before its first).
"""

from __future__ import annotations

from dataclasses import replace

import anyio
import pytest

from llm_worker import ContextPolicy, ImagePart, MemoryBlobStore, OutputPolicy, Worker, tool
from llm_worker.messages import ToolUsePart
from llm_worker.providers import _media
from llm_worker.testing import ScriptedClient, ScriptedRequest, ScriptedResponse
from support.long_runs import WINDOW

pytestmark = pytest.mark.anyio

IMAGE = ImagePart(b"\x89PNG\r\n\x1a\n" + bytes(3000 - 8), "image/png")
SIZE = _media.media_size([IMAGE])
TURNS = 60


@tool(effect="read_only")
def shot(n: int) -> list[str | ImagePart]:
    """A screenshot and the page's text."""
    return [f"page {n}\n" + "lorem ipsum dolor sit amet\n" * 150, IMAGE]


def model(ask: ScriptedRequest) -> ScriptedResponse:
    if ask.index >= TURNS:
        return ScriptedResponse.text("done")
    return ScriptedResponse([ToolUsePart("", "shot", {"n": ask.index})])


async def test_screenshots_go_on_after_a_summary_left_the_old_ones_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rules = replace(_media.ANTHROPIC, max_request_bytes=8 * SIZE)
    monkeypatch.setitem(_media._BY_PROVIDER, "anthropic", rules)  # pyright: ignore[reportPrivateUsage]
    client = ScriptedClient(model, provider="anthropic")
    summarizer = ScriptedClient(ScriptedResponse.text("Summary: pages were shot in order."))
    worker = Worker(
        client,
        tools=[shot],
        blob_store=MemoryBlobStore(),
        output_policy=OutputPolicy(inline_threshold=8_000),
        max_requests=TURNS + 2,
        context=ContextPolicy(window_tokens=WINDOW, summarizer=summarizer),
    )
    with anyio.fail_after(60):
        await worker.run("Shoot every page.")
    sent = [_media.inline_size(r.messages) // SIZE for r in client.requests]
    assert max(sent) <= 8  # no request carried more than the limit
    assert sent[-1] > 0  # the last screenshots were sent (the older ones summarized away)
    refused = [
        r for m in worker.history for r in m.tool_results if "could not be sent" in r.content
    ]
    assert refused == []
