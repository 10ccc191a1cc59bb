"""Who may act on a chat: anonymous requests, a hostile second client, forged ids and edits.

Each test plays a victim and an attacker against one real server (both protocols); the
attacker knows the victim's chat id and call ids (ids leak: URLs, logs, a shared screen).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest

from llm_worker.cli import main
from llm_worker.testing import ScriptedResponse
from llm_worker.ui import AGUIAdapter, VercelAIAdapter
from llm_worker.ui._serve import check_exposure

from .conftest import booking, scripted, serve
from .test_review_adapters import chunks

pytestmark = pytest.mark.anyio

ADAPTERS = [VercelAIAdapter, AGUIAdapter]
USER = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Book Kyoto"}]}
AG_USER = {"id": "u1", "role": "user", "content": "Book Kyoto"}


def by_header(request: Any, chat_id: str) -> str | None:
    """The test app's `authorize`: the user a header names (none: refused)."""
    del chat_id
    return request.headers.get("x-user")


@asynccontextmanager
async def site(
    adapter: Any, script: list[ScriptedResponse], **options: Any
) -> AsyncIterator[tuple[Any, str, httpx.AsyncClient]]:
    async with (
        scripted("anthropic", script) as (server, factory),
        serve(adapter(factory, **options)) as url,
        httpx.AsyncClient(timeout=10) as http,
    ):
        yield server, url, http


async def post(
    http: httpx.AsyncClient, url: str, body: dict[str, Any], user: str | None = None
) -> httpx.Response:
    headers = {"x-user": user} if user else {}
    with anyio.fail_after(10):
        return await http.post(url, json=body, headers=headers)


async def pause(
    adapter: Any, http: httpx.AsyncClient, url: str, chat: str | None, **kw: Any
) -> str:
    """One turn up to its pause on `book`; the pending call's id."""
    if adapter is VercelAIAdapter:
        body: dict[str, Any] = {"messages": [USER], "trigger": "submit-message"}
        if chat is not None:
            body["id"] = chat
        response = await post(http, url, body, **kw)
        asked = [c for c in chunks(response.text) if c["type"] == "tool-approval-request"]
        return str(asked[0]["toolCallId"])
    body = {"threadId": chat, "runId": "r1", "messages": [AG_USER], "tools": []}
    response = await post(http, url, body, **kw)
    finished = [c for c in chunks(response.text) if c["type"] == "RUN_FINISHED"]
    return str(finished[0]["outcome"]["interrupts"][0]["toolCallId"])


async def approve(
    adapter: Any,
    http: httpx.AsyncClient,
    url: str,
    chat: str | None,
    call_id: str,
    *,
    edit: dict[str, Any] | None = None,
    **kw: Any,
) -> httpx.Response:
    """The approval of `call_id` (with edited arguments if given), as the client posts it."""
    if adapter is VercelAIAdapter:
        approval: dict[str, Any] = {"id": f"approval_{call_id}", "approved": True}
        if edit is not None:
            approval["input"] = edit
        part = {
            "type": "tool-book",
            "toolCallId": call_id,
            "state": "approval-responded",
            "input": {"city": "Kyoto"},
            "approval": approval,
        }
        answer = {"id": "a1", "role": "assistant", "parts": [part]}
        body: dict[str, Any] = {"messages": [USER, answer], "messageId": "a1"}
        if chat is not None:
            body["id"] = chat
        return await post(http, url, body, **kw)
    payload: dict[str, Any] = {"approved": True}
    if edit is not None:
        payload["input"] = edit
    resume = [{"interruptId": f"approval_{call_id}", "status": "resolved", "payload": payload}]
    body = {"threadId": chat, "runId": "r2", "messages": [AG_USER], "resume": resume}
    return await post(http, url, body, **kw)


def two_bookings() -> list[ScriptedResponse]:
    return [*booking("Booked.")[:1], *booking("Booked.")]


async def test_anonymous_vercel_requests_never_reach_each_others_pause() -> None:
    # Client A (no chat id) pauses; client B (no chat id) answers A's call ids.
    async with site(VercelAIAdapter, two_bookings()) as (server, url, http):
        call_id = await pause(VercelAIAdapter, http, url, None)
        stolen = await approve(VercelAIAdapter, http, url, None, call_id)
        # An anonymous message of B's does not touch anything of A's either.
        await pause(VercelAIAdapter, http, url, None)
    assert "booked Kyoto" not in stolen.text
    assert "no paused run" in stolen.text
    assert len(server.requests) == 2  # the stolen answer reached no model


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_a_second_user_cannot_answer_edit_or_read_anothers_pause(adapter: Any) -> None:
    async with site(adapter, booking("Booked."), authorize=by_header) as (server, url, http):
        call_id = await pause(adapter, http, url, "c1", user="victim")
        forged = await approve(
            adapter, http, url, "c1", call_id, edit={"city": "Attacker"}, user="mallory"
        )
        plain = await approve(adapter, http, url, "c1", call_id, user="mallory")
        mine = await approve(adapter, http, url, "c1", call_id, user="victim")
    for attempt in (forged, plain):
        assert "booked" not in attempt.text
        assert "Let me check and book" not in attempt.text  # no snapshot of the victim's chat
    assert "booked Kyoto" in mine.text, mine.text
    assert len(server.requests) == 2  # the victim's two turns only


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_a_refused_request_gets_403_whether_the_chat_exists_or_not(adapter: Any) -> None:
    options = {"authorize": by_header, "resumable": True}
    async with site(adapter, booking("Booked."), **options) as (_, url, http):
        call_id = await pause(adapter, http, url, "c1", user="victim")
        answers = [await approve(adapter, http, url, chat, call_id) for chat in ("c1", "nope")]
        reads = [await http.get(f"{url}/{chat}/stream") for chat in ("c1", "nope")]
        stops = [await http.delete(f"{url}/{chat}/stream") for chat in ("c1", "nope")]
        mine = await approve(adapter, http, url, "c1", call_id, user="victim")
    for pair in (answers, reads, stops):
        assert [r.status_code for r in pair] == [403, 403]
        assert pair[0].json() == pair[1].json()
    assert "booked Kyoto" in mine.text


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_another_user_cannot_read_or_stop_a_resumable_run(adapter: Any) -> None:
    options = {"authorize": by_header, "resumable": True}
    async with site(adapter, booking("Booked."), **options) as (_, url, http):
        await pause(adapter, http, url, "c1", user="victim")
        other = {"x-user": "mallory"}
        read = await http.get(f"{url}/c1/stream", headers=other)
        stop = await http.delete(f"{url}/c1/stream", headers=other)
        own = await http.get(f"{url}/c1/stream", headers={"x-user": "victim"})
    assert read.status_code == 204, read.text
    assert stop.status_code == 404
    assert own.status_code == 200
    assert "tool-approval-request" in own.text or "RUN_FINISHED" in own.text


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_an_approval_edits_arguments_only_of_a_tool_the_app_allows(adapter: Any) -> None:
    async with site(adapter, booking("Booked.")) as (server, url, http):
        call_id = await pause(adapter, http, url, "c1")
        edited = await approve(adapter, http, url, "c1", call_id, edit={"city": "Attacker"})
        plain = await approve(adapter, http, url, "c1", call_id)  # the pause still waits
    assert edited.status_code == 400
    assert "cannot be edited" in edited.json()["error"]
    assert "booked Kyoto" in plain.text
    async with site(adapter, booking("Booked."), editable_tools=["book"]) as (_, url, http):
        call_id = await pause(adapter, http, url, "c1")
        edited = await approve(adapter, http, url, "c1", call_id, edit={"city": "Paris"})
    assert "booked Paris" in edited.text, edited.text
    del server


async def test_an_async_authorize_is_awaited() -> None:
    async def allow(request: Any, chat_id: str) -> str | None:
        await anyio.lowlevel.checkpoint()
        del chat_id
        return request.headers.get("x-user")

    factory = partial(VercelAIAdapter, authorize=allow)
    async with site(factory, booking("Booked.")) as (_, url, http):
        call_id = await pause(VercelAIAdapter, http, url, "c1", user="victim")
        other = await approve(VercelAIAdapter, http, url, "c1", call_id, user="mallory")
        mine = await approve(VercelAIAdapter, http, url, "c1", call_id, user="victim")
    assert "booked" not in other.text
    assert "booked Kyoto" in mine.text


def test_server_ids_are_unguessable() -> None:
    from llm_worker.ui._vercel_app import _message_id  # pyright: ignore[reportPrivateUsage]

    ids = {_message_id({}, []) for _ in range(100)}
    assert len(ids) == 100
    assert all(len(i) >= len("msg_") + 32 for i in ids)


def test_serve_refuses_a_public_host_without_authorize(capsys: pytest.CaptureFixture[str]) -> None:
    from llm_worker.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="--authorize"):
        check_exposure("0.0.0.0", None)
    check_exposure("0.0.0.0", "app:allow")  # an app that authorizes may serve anyone
    assert capsys.readouterr().err == ""
    check_exposure("127.0.0.1", None)
    assert "serving on this machine only" in capsys.readouterr().err
    code = main(["serve", "no_such_module:make", "--host", "0.0.0.0"])
    assert code != 0
    assert "--authorize" in capsys.readouterr().err


class _User:
    """What Starlette's `AuthenticationMiddleware` puts in `scope["user"]`."""

    is_authenticated = True

    def __init__(self, name: str) -> None:
        self.identity = name


def with_user(app: Any) -> Any:
    """`app` behind a stand-in for an authentication middleware (the user from a header)."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers", ()))
        if b"x-user" in headers:
            scope["user"] = _User(headers[b"x-user"].decode())
        await app(scope, receive, send)

    return wrapped


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_without_authorize_the_scopes_user_owns_the_chat(adapter: Any) -> None:
    async with (
        scripted("anthropic", booking("Booked.")) as (server, factory),
        serve(with_user(adapter(factory))) as url,
        httpx.AsyncClient(timeout=10) as http,
    ):
        call_id = await pause(adapter, http, url, "c1", user="victim")
        other = await approve(adapter, http, url, "c1", call_id, user="mallory")
        mine = await approve(adapter, http, url, "c1", call_id, user="victim")
    assert "booked" not in other.text
    assert "booked Kyoto" in mine.text
    assert len(server.requests) == 2


def docs_authorize() -> str:
    """The `authorize` example of docs/web.md's Security section."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "web.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    [block] = [b for b in blocks if "def authorize(" in b]
    return block


async def test_the_docs_authorize_example_keeps_users_apart() -> None:
    class Session:
        def __init__(self, user_id: str) -> None:
            self.user_id = user_id

    sessions = {"s-victim": Session("victim"), "s-mallory": Session("mallory")}
    async with scripted("anthropic", booking("Booked.")) as (server, factory):
        namespace: dict[str, Any] = {
            "make_worker": factory,
            "sessions": sessions,
            "VercelAIAdapter": VercelAIAdapter,
        }
        exec(compile(docs_authorize(), "docs/web.md (authorize)", "exec"), namespace)
        async with serve(namespace["adapter"]) as url, httpx.AsyncClient(timeout=10) as http:
            body = {"id": "c1", "messages": [USER], "trigger": "submit-message"}
            with anyio.fail_after(10):
                anonymous = await http.post(url, json=body)
                http.cookies.set("session", "s-victim")
                paused = await http.post(url, json=body)
                asked = [c for c in chunks(paused.text) if c["type"] == "tool-approval-request"]
                http.cookies.set("session", "s-mallory")
                other = await approve(VercelAIAdapter, http, url, "c1", asked[0]["toolCallId"])
    assert anonymous.status_code == 403
    assert "booked" not in other.text
    assert len(server.requests) == 1


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_an_authorize_that_raises_is_a_500_that_shows_nothing_of_it(adapter: Any) -> None:
    def broken(request: Any, chat_id: str) -> str | None:
        raise RuntimeError("cannot reach db.internal with password hunter2")

    async with site(adapter, booking("Booked."), authorize=broken) as (server, url, http):
        posted = await post(http, url, {"id": "c1", "threadId": "c1", "runId": "r1"})
        read = await http.get(f"{url}/c1/stream")
    for response in (posted, read):
        assert response.status_code == 500
        assert "hunter2" not in response.text
    assert server.requests == []


def test_the_process_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_worker.ui import _sign

    monkeypatch.setattr(_sign, "_process", [])
    monkeypatch.setenv(_sign.ENV, "short")
    with pytest.raises(ValueError, match="16 bytes"):  # at start, not at the first request
        VercelAIAdapter(_no_worker)
    monkeypatch.setattr(_sign, "_process", [])
    monkeypatch.setenv(_sign.ENV, "x" * 32)
    VercelAIAdapter(_no_worker)
    assert _sign.current().mac("k", None, {}) == _sign.Signer("x" * 32).mac("k", None, {})


def _no_worker() -> Any:
    raise AssertionError("no request reaches the factory here")


async def test_an_ag_ui_reconnect_by_post_reaches_only_the_owners_run() -> None:
    options = {"authorize": by_header, "resumable": True}
    script = [*booking("Booked.")[:1], ScriptedResponse.text("Your own chat.")]
    async with site(AGUIAdapter, script, **options) as (_, url, http):
        await pause(AGUIAdapter, http, url, "c1", user="victim")
        rejoin = {"threadId": "c1", "runId": "r1", "messages": [AG_USER], "tools": []}
        mine = await post(http, url, rejoin, user="victim")  # the kept run, replayed
        theirs = await post(http, url, rejoin, user="mallory")  # a run of mallory's own
    assert "Let me check and book" in mine.text
    assert "Let me check and book" not in theirs.text
    assert "Your own chat." in theirs.text


@pytest.mark.parametrize("key", [b"k" * 16, b"k" * 64, b"k" * 65, bytes(range(200)), "клю" * 6])
def test_a_signature_is_hmac_sha256_as_the_stdlib_makes_it(key: bytes | str) -> None:
    # The signer builds HMAC from its two keyed hash states: the signatures that servers
    # made before (with `hmac`), and servers sharing the key make, must still check.
    import hashlib
    import hmac

    import orjson

    from llm_worker.messages import ImagePart, ToolResultPart
    from llm_worker.ui import _sign
    from llm_worker.ui._parts import result_mac, result_proven

    raw = key.encode() if isinstance(key, str) else key
    signer = _sign.Signer(key)
    fields = {"signature": "s", "n": 2.0, "deep": [{"x": 1.0}], "mac": "dropped"}
    message = ["thinking", [1, "x"], {"signature": "s", "n": 2, "deep": [{"x": 1}]}]
    expected = hmac.new(raw, orjson.dumps(message, option=orjson.OPT_SORT_KEYS), "sha256")
    assert signer.mac("thinking", (1.0, "x"), fields) == expected.hexdigest()[:32]
    image = ImagePart(data=b"\x89PNG", media_type="image/png")
    arguments = {"city": "Kyoto", "nights": 2.0}
    with _sign.signing_key(key):
        mac = result_mac("c1", "lookup", "A", False, [image], arguments=arguments)
        digest = hashlib.sha256(b"\x89PNG").hexdigest()
        bound = ["c1", "lookup", "A", False, arguments, [["image", "image/png", None, digest]]]
        assert mac == signer.mac("tool_result", bound, {})
        result = ToolResultPart("c1", "A", name="lookup", media=[image])
        assert result_proven(result, mac, {"city": "Kyoto", "nights": 2})
        assert not result_proven(result, mac, {"city": "Paris", "nights": 2})
