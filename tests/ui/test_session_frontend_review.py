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
