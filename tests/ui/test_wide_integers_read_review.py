"""An integer past 64 bits in an AG-UI call's arguments keeps its digits (review, R43).

The AG-UI stream writes a call's arguments as a JSON string with the exact digits, which a
browser keeps as they are (a string) and sends back. `messages_from_agui` parsed them with
orjson, which reads such an integer as the nearest float (even after a caller's `json.loads`
kept the string exact): the next request sent the model 1180591620717411303424 for
1180591620717411303425. (A Vercel tool part's input is a JSON value: a browser reads the
digits as a double before it sends them back, as the result signatures expect; the adapters'
body parser is left as it is, a scan of every body for long digit runs costing more than
its parse.)
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
from llm_worker.ui import AGUIAdapter, messages_from_agui, messages_to_agui

from .conftest import serve
from .test_security import AG_USER

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


def _body() -> dict[str, Any]:
    call = {"id": "call_0", "type": "function", "function": {"name": "count"}}
    call["function"]["arguments"] = '{"n":' + DIGITS + "}"  # as the AG-UI stream wrote it
    answer = {"id": "a1", "role": "assistant", "content": "", "toolCalls": [call]}
    result = {"id": "t1", "role": "tool", "toolCallId": "call_0", "content": "counted"}
    messages = [AG_USER, answer, result, AG_USER | {"id": "u2"}]
    return {"threadId": "c1", "runId": "r1", "messages": messages, "tools": []}


async def test_the_next_request_carries_the_digits_the_browser_sent_back() -> None:
    async with (
        ScriptedModelServer("anthropic", [ScriptedResponse.text("Done.")]) as server,
        server.client() as client,
        serve(AGUIAdapter(lambda: Worker(client))) as url,
        httpx.AsyncClient(timeout=10) as http,
    ):
        with anyio.fail_after(20):
            response = await http.post(url, json=_body())
        assert response.status_code == 200, response.text
        request = server.requests[-1].body.decode()
    assert DIGITS in request  # not 1180591620717411303424 (the nearest double)
