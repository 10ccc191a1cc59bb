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


@pytest.mark.parametrize("wire", WIRES)
async def test_a_tool_result_with_a_lone_surrogate_is_made_valid_and_the_run_goes_on(
    wire: str,
) -> None:
    # The next request failed the whole run with InvalidMessagesError: one file name that
    # os.fsdecode escaped, in one tool's output, ended a run the model could have finished.
    from llm_worker import tool
    from llm_worker.messages import ToolResultPart, ToolUsePart

    @tool
    async def list_files() -> str:
        """List the files."""
        return "caf\udce9.txt \ud83d\ude00.txt tail\ud800"

    script = [
        ScriptedResponse([ToolUsePart("", "list_files", {})]),
        ScriptedResponse.text("done"),
    ]
    async with ScriptedModelServer(wire, script) as server, server.client() as client:
        worker = Worker(client, tools=[list_files])
        with anyio.fail_after(30):
            result = await worker.run("list them")
        assert result.text == "done"
        (part,) = worker.history[2].content
        assert isinstance(part, ToolResultPart)
        assert part.content == "caf\ufffd.txt \U0001f600.txt tail\ufffd"
        assert "caf\ufffd.txt" in server.requests[1].body.decode()  # sent, as U+FFFD


@pytest.mark.parametrize("wire", ["anthropic", "openai_chat", "openai_responses"])
async def test_a_tool_documents_name_with_a_lone_surrogate_is_made_valid(wire: str) -> None:
    # A document named by os.fsdecode (Anthropic's `title`, OpenAI's `filename`) kept its
    # lone surrogate in the history: the next request failed the run with
    # InvalidMessagesError, though the result's text was made valid.
    from llm_worker import tool
    from llm_worker.messages import DocumentPart, ToolResultPart, ToolUsePart

    @tool
    async def read_file() -> list[object]:
        """Read the file."""
        return ["the file:", DocumentPart.from_bytes(b"hello", "text/plain", name="caf\udce9.txt")]

    script = [
        ScriptedResponse([ToolUsePart("", "read_file", {})]),
        ScriptedResponse.text("done"),
    ]
    async with ScriptedModelServer(wire, script) as server, server.client() as client:
        worker = Worker(client, tools=[read_file])
        with anyio.fail_after(30):
            result = await worker.run("read it")
        assert result.text == "done"
        (part,) = worker.history[2].content
        assert isinstance(part, ToolResultPart)
        (document,) = part.media
        assert isinstance(document, DocumentPart) and document.name == "caf\ufffd.txt"
        assert document.data == b"hello"
