"""Review probes of `count_tokens`: counts no request can have are no count, and a
ContextPolicy whose provider count fails goes on with its estimate."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

from llm_worker import ContextPolicy, MemoryBlobStore, OutputPolicy, RunStatus, Worker
from llm_worker.errors import InvalidRequestError, MalformedStreamError
from llm_worker.messages import Message, Request, ToolResultPart, ToolUsePart
from llm_worker.providers import AnthropicClient
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.testing._script import prompt_tokens
from llm_worker.testing._server import WireResponse, WireServer
from support.long_runs import PAGE, WINDOW, read

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "body",
    [
        b'{"input_tokens": -5}',  # was taken as a count of -5
        b'{"input_tokens": 1000000000000000}',  # was taken as given, calibrating on it
        b'{"input_tokens": 1' + b"0" * 40 + b"}",
        b'{"input_tokens": true}',
        b'{"input_tokens": 12.5}',
        b"[" * 10_000,
    ],
)
async def test_a_count_no_request_can_have_is_a_typed_error(body: bytes) -> None:
    answer = WireResponse(body, content_type="application/json")
    async with (
        WireServer([answer]) as srv,
        AnthropicClient(model="m", api_key="k", base_url=srv.base_url) as client,
    ):
        with anyio.fail_after(10), pytest.raises(MalformedStreamError, match="no count"):
            await client.count_tokens(Request([Message.user("hi")]))


class _CountingDown(ScriptedClient):
    """A scripted model whose counting endpoint fails."""

    counted = 0

    async def count_tokens(self, request: Request) -> Any:
        self.counted += 1
        raise InvalidRequestError("counting is down", provider="scripted")


async def test_a_failing_count_leaves_the_policy_on_its_estimate(
    caplog: pytest.LogCaptureFixture,
) -> None:
    history = [Message.user("Read.")]
    for n in range(12):
        history.append(Message("assistant", [ToolUsePart(f"c{n}", "read", {"n": n})]))
        page = ToolResultPart(f"c{n}", f"page {n}: {PAGE}", name="read")
        history.append(Message("user", [page]))
    client = _CountingDown(ScriptedResponse.text("ok"))
    worker = Worker(
        client,
        tools=[read],
        history=history,
        blob_store=MemoryBlobStore(),
        output_policy=OutputPolicy(inline_threshold=8_000),
        context=ContextPolicy(window_tokens=WINDOW),
    )
    with anyio.fail_after(30), caplog.at_level(logging.INFO, "llm_worker.context"):
        result = await worker.run("Go on.")
    assert result.status is RunStatus.FINISHED
    assert client.counted == 1
    assert "count_tokens failed (InvalidRequestError); the policy estimates" in caplog.text
    assert prompt_tokens(client.requests[0]) <= WINDOW
