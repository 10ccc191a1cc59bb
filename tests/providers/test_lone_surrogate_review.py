"""Review probe (issue 32): a lone surrogate in what the user sends is a typed error naming
where it is, raised before anything is sent, on each wire and both transports.

It failed the request as MalformedStreamError "unreadable data in the stream" (the body's
JSON encoding raised inside the stream), which reads as the provider's fault.
"""

from __future__ import annotations

import anyio
import pytest

from llm_worker import Worker
from llm_worker.errors import InvalidMessagesError, MalformedStreamError
from llm_worker.messages import Message, Request, TextPart
from llm_worker.testing import ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

WIRES = ("anthropic", "gemini", "openai_chat", "openai_responses")


@pytest.mark.parametrize("wire", WIRES)
async def test_a_lone_surrogate_in_user_input_is_named_before_sending(
    wire: str, http_transport: str
) -> None:
    async with (
        ScriptedModelServer(wire, ScriptedResponse.text("x")) as server,
        server.client() as client,
    ):
        request = Request(
            [
                Message("user", [TextPart("first")]),
                Message("assistant", [TextPart("ok")]),
                Message("user", [TextPart("fine"), TextPart("bad \udc80 name")]),
            ]
        )
        with anyio.fail_after(30), pytest.raises(InvalidMessagesError) as raised:
            async for _ in client.stream(request):
                pass
        assert not isinstance(raised.value, MalformedStreamError)
        text = str(raised.value)
        assert "not valid Unicode" in text
        assert "[2]" in text  # the third message (the wire's own index)
        assert "\udc80" not in text and "bad" not in text  # its place, never its content
        assert server.requests == []  # nothing was sent


async def test_a_worker_run_with_a_lone_surrogate_fails_with_the_typed_error() -> None:
    async with (
        ScriptedModelServer("anthropic", ScriptedResponse.text("x")) as server,
        server.client() as client,
    ):
        worker = Worker(client)
        with anyio.fail_after(30), pytest.raises(InvalidMessagesError, match="not valid Unicode"):
            await worker.run("a file named \udcff.txt")
        assert server.requests == []
