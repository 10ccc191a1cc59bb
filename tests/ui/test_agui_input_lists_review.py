"""RunAgentInput's lists, and what a refusal shows of the client's values (review, R43).

`messages`, `tools` or `resume` sent as a string, a number or an object were read as empty
lists: a run of no messages (the model was asked to answer nothing), the front end's tools
dropped without a word. They are a 400 naming the field. A refusal names a role or a tool
name the client sent in at most a few dozen characters, and a tool without a name by its
place, not by echoing the client's whole spec.
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from llm_worker import Worker
from llm_worker.errors import InvalidMessagesError
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.ui import AGUIAdapter, VercelAIAdapter, messages_from_agui, messages_from_ui

from .conftest import serve
from .test_security import AG_USER, USER

pytestmark = pytest.mark.anyio

LONG = "SECRET" * 2_000


def _body(**fields: Any) -> dict[str, Any]:
    return {"threadId": "t", "runId": "r", "messages": [AG_USER], "tools": []} | fields


async def test_lists_that_are_no_list_are_a_400_and_no_run() -> None:
    client = ScriptedClient(ScriptedResponse.text("ok"))
    bodies = [
        (_body(messages="hi"), "RunAgentInput.messages must be a list, not a string"),
        (_body(messages={"role": "user"}), "RunAgentInput.messages must be a list, not an object"),
        (_body(tools="search"), "RunAgentInput.tools must be a list, not a string"),
        (_body(resume=3), "RunAgentInput.resume must be a list, not a number"),
        (_body(tools=[{"description": LONG}]), "tool 0 in RunAgentInput.tools has no name"),
        (_body(tools=[{"name": LONG}]), "tool name 'SECRETSECRET"),
        (_body(messages=[{"id": "u", "role": LONG, "content": "x"}]), "role 'SECRETSECRET"),
    ]
    async with (
        serve(AGUIAdapter(lambda: Worker(client))) as url,
        httpx.AsyncClient(timeout=10) as http,
    ):
        for body, error in bodies:
            with anyio.fail_after(10):
                response = await http.post(url, json=body)
            assert response.status_code == 400, body
            assert error in response.json()["error"]
            assert len(response.text) < 400  # the client's long value is not echoed
        with anyio.fail_after(10):
            fine = await http.post(url, json=_body(messages=None, tools=None))
    assert fine.status_code == 200  # null, as absent: as before
    assert len(client.requests) == 1


async def test_a_long_role_is_shown_shortened_on_vercel() -> None:
    client = ScriptedClient(ScriptedResponse.text("ok"))
    body = {"id": "c1", "messages": [USER | {"role": LONG}], "trigger": "submit-message"}
    async with (
        serve(VercelAIAdapter(lambda: Worker(client))) as url,
        httpx.AsyncClient(timeout=10) as http,
    ):
        with anyio.fail_after(10):
            response = await http.post(url, json=body)
    assert response.status_code == 400
    assert "role 'SECRETSECRET" in response.json()["error"] and len(response.text) < 400
    assert client.requests == []


def test_the_converters_show_a_long_role_shortened() -> None:
    for reader, message in (
        (messages_from_ui, {"id": "u", "role": LONG, "parts": []}),
        (messages_from_agui, {"id": "u", "role": LONG, "content": "x"}),
    ):
        with pytest.raises(InvalidMessagesError, match="is not supported") as caught:
            reader([message])
        assert len(str(caught.value)) < 200
