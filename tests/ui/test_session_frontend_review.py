"""Review probes: a hostile browser's front-end output in a chat kept on the server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_session_from import post
from .test_session_frontend import asking, call_ids, chat, final_text, first, outputs, stored

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("kind", ["vercel", "ag-ui"])
async def test_an_output_with_a_lone_surrogate_is_refused_and_the_call_still_waits(
    kind: str, tmp_path: Path
) -> None:
    async with chat(kind, asking(), tmp_path) as (server, sessions, _, url, http):
        asked = await post(http, url, first(kind))
        color = call_ids(kind, asked)["pick_color"]
        before = await stored(sessions, "alice/c1")
        raw = json.dumps(outputs(kind, [("pick_color", color, "red HERE")]))
        headers = {"x-user": "alice", "content-type": "application/json"}
        content = raw.replace("HERE", "\\ud800").encode()
        refused = await http.post(url, content=content, headers=headers)
        after = await stored(sessions, "alice/c1")
        again = await post(http, url, outputs(kind, [("pick_color", color, "red")]))
    assert refused.status_code == 400, refused.text
    assert "surrogate" in refused.json()["error"]
    assert after == before
    assert final_text(kind, again) == "Red it is."
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    "output", [{"color": "red"}, 42, True, [1, 2], [{"type": "audio", "data": "x"}]]
)
async def test_an_agui_output_of_no_tool_contents_shape_is_refused_not_read_as_empty(
    output: object, tmp_path: Path
) -> None:
    # AG-UI tool content is a string or text / media parts: anything else was read as an
    # empty output, and the model was told the browser's tool returned "".
    async with chat("ag-ui", asking(), tmp_path) as (server, sessions, _, url, http):
        asked = await post(http, url, first("ag-ui"))
        color = call_ids("ag-ui", asked)["pick_color"]
        before = await stored(sessions, "alice/c1")
        refused = await post(http, url, outputs("ag-ui", [("pick_color", color, output)]))  # pyright: ignore[reportArgumentType]
        after = await stored(sessions, "alice/c1")
        parts = [{"type": "text", "text": "red"}]
        given = await post(http, url, outputs("ag-ui", [("pick_color", color, parts)]))  # pyright: ignore[reportArgumentType]
    assert refused.status_code == 400, refused.text
    assert "neither a string nor a list" in refused.json()["error"]
    assert after == before
    assert final_text("ag-ui", given) == "Red it is."
    assert '"red"' in server.requests[-1].body.decode()
