"""An integer past 64 bits in what a client sends back keeps its digits (review, R43).

The web streams write such an integer with its exact digits (a model's or a tool's); a
client that is not a browser (a Python or curl front end) sends them back as they were
written. They were read as the nearest float: by the adapters' body parser (orjson), and by
`messages_from_agui` parsing a call's arguments (orjson again, even after a caller's
`json.loads` kept them): the next request sent the model 1180591620717411303424 for
1180591620717411303425, and a resumed payment was one off.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import orjson
import pytest

from llm_worker import Message, ToolResultPart, ToolUsePart, Worker
from llm_worker.testing import ScriptedModelServer, ScriptedResponse
from llm_worker.ui import AGUIAdapter, VercelAIAdapter, messages_from_agui, messages_to_agui
from llm_worker.ui._asgi import read_json

from .conftest import serve
from .test_security import AG_USER, USER

pytestmark = pytest.mark.anyio

WIDE = 2**70 + 1
DIGITS = "1180591620717411303425"


def history() -> list[Message]:
    return [
        Message.user("Count"),
        Message("assistant", [ToolUsePart("call_0", "count", {"n": WIDE, "m": -(2**80)})]),
        Message("user", [ToolResultPart("call_0", "counted", name="count")]),
    ]


@pytest.mark.parametrize("parse", [orjson.loads, json.loads])
def test_messages_from_agui_keeps_a_calls_wide_integer(parse: Any) -> None:
    body = orjson.dumps(messages_to_agui(history()))
    assert messages_from_agui(parse(body)) == history()


def _body(protocol: str) -> dict[str, Any]:
    if protocol == "vercel":
        call = {
            "type": "tool-count",
            "toolCallId": "call_0",
            "state": "output-available",
            "input": {"n": "WIDE"},
            "output": "counted",
        }
        answer = {"id": "a1", "role": "assistant", "parts": [call]}
        return {"id": "c1", "messages": [USER, answer, USER], "trigger": "submit-message"}
    call = {"id": "call_0", "type": "function", "function": {"name": "count"}}
    call["function"]["arguments"] = '{"n":"WIDE"}'
    answer = {"id": "a1", "role": "assistant", "content": "", "toolCalls": [call]}
    result = {"id": "t1", "role": "tool", "toolCallId": "call_0", "content": "counted"}
    messages = [AG_USER, answer, result, AG_USER | {"id": "u2"}]
    return {"threadId": "c1", "runId": "r1", "messages": messages, "tools": []}


@pytest.mark.parametrize("protocol", ["vercel", "agui"])
async def test_the_next_request_carries_the_digits_a_client_sent(protocol: str) -> None:
    adapter = VercelAIAdapter if protocol == "vercel" else AGUIAdapter
    # The digits as a non-browser client writes them (the stdlib writes them exactly).
    sent = json.dumps(_body(protocol)).replace('\\"WIDE\\"', DIGITS).replace('"WIDE"', DIGITS)
    assert DIGITS in sent
    async with (
        ScriptedModelServer("anthropic", [ScriptedResponse.text("Done.")]) as server,
        server.client() as client,
        serve(adapter(lambda: Worker(client))) as url,
        httpx.AsyncClient(timeout=10) as http,
    ):
        with anyio.fail_after(20):
            response = await http.post(
                url, content=sent, headers={"content-type": "application/json"}
            )
        assert response.status_code == 200, response.text
        request = server.requests[-1].body.decode()
    assert DIGITS in request  # not 1180591620717411303424 (the nearest double)


async def test_a_wide_integer_in_a_body_past_254_openers_is_no_nesting() -> None:
    # The nesting bound writes the body back to judge it: a wide integer is not what fails.
    messages = [{"id": f"m{i}", "input": {"n": WIDE}} for i in range(200)]
    body = json.dumps({"messages": messages}).encode()
    sent = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return sent.pop()

    value = await read_json(receive, limit=10**7)
    assert value["messages"][199]["input"]["n"] == WIDE
