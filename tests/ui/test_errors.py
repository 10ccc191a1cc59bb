"""What a browser reads of a failed run: never the internals an arbitrary exception carries."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from llm_worker import TextPart, ToolUsePart, Worker
from llm_worker.errors import RateLimitError
from llm_worker.testing import ScriptedResponse
from llm_worker.ui import AGUIAdapter, VercelAIAdapter, to_agui_events, to_vercel_stream

from .conftest import Factory
from .test_review_adapters import USER, chunks, post, site

pytestmark = pytest.mark.anyio

SECRET = "postgres://admin:hunter2@db.internal:5432/app in /srv/app/billing.py"
GENERIC = "An error occurred."
AGUI_USER = {"id": "u1", "role": "user", "content": "Hi"}
AGUI = {"threadId": "t1", "runId": "r1", "messages": [AGUI_USER]}
BODIES: dict[Any, dict[str, Any]] = {
    VercelAIAdapter: {"id": "c1", "messages": [USER]},
    AGUIAdapter: AGUI,
}


class Leaky:
    """A before_tool_call hook whose own failure names a database and a path."""

    async def before_tool_call(self, ctx: Any) -> Any:
        raise RuntimeError(f"cannot reach {SECRET}")


def leaky(factory: Factory) -> Any:
    def make() -> Worker:
        worker = factory()
        worker.add_hooks(Leaky())
        return worker

    return make


def lookup() -> list[ScriptedResponse]:
    return [ScriptedResponse([TextPart("Checking."), ToolUsePart("", "weather", {"city": "Oslo"})])]


def shown(adapter: Any, text: str) -> str:
    """The error text the browser reads in a response body."""
    if adapter is VercelAIAdapter:
        [error] = [c["errorText"] for c in chunks(text) if c["type"] == "error"]
        return error
    [error] = [c for c in chunks(text) if c["type"] == "RUN_ERROR"]
    return f"{error['message']} [{error['code']}]"


@pytest.mark.parametrize("adapter", [VercelAIAdapter, AGUIAdapter])
async def test_an_arbitrary_exception_reaches_the_browser_as_a_generic_text_and_the_log_whole(
    adapter: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async with site(lambda f: adapter(leaky(f)), lookup()) as (_, url, http):
        with caplog.at_level(logging.ERROR, logger="llm_worker.ui"):
            response = await post(http, url, BODIES[adapter])
    assert "hunter2" not in response.text
    assert "db.internal" not in response.text
    assert "/srv/app" not in response.text
    assert shown(adapter, response.text).startswith(GENERIC)
    assert any("hunter2" in (r.exc_text or "") for r in caplog.records)


@pytest.mark.parametrize("adapter", [VercelAIAdapter, AGUIAdapter])
async def test_a_provider_rate_limit_is_shown_as_the_provider_said_it(adapter: Any) -> None:
    limited = RateLimitError("slow down: 20 requests per minute", error_type="rate_limit_error")
    script = [ScriptedResponse.text("x", fail_with=limited)] * 4
    async with site(adapter, script) as (_, url, http):
        response = await post(http, url, BODIES[adapter])
    text = shown(adapter, response.text)
    assert "RateLimitError" in text
    assert "slow down: 20 requests per minute" in text


@pytest.mark.parametrize("adapter", [VercelAIAdapter, AGUIAdapter])
async def test_on_error_chooses_the_text(adapter: Any) -> None:
    def on_error(exc: BaseException) -> str:
        return f"Sorry ({type(exc).__name__})"

    async with site(lambda f: adapter(leaky(f), on_error=on_error), lookup()) as (_, url, http):
        response = await post(http, url, BODIES[adapter])
    assert shown(adapter, response.text).startswith("Sorry (HookError)")
    assert "hunter2" not in response.text


@pytest.mark.parametrize("adapter", [VercelAIAdapter, AGUIAdapter])
async def test_an_on_error_that_fails_still_ends_the_stream_with_the_generic_text(
    adapter: Any,
) -> None:
    def on_error(exc: BaseException) -> str:
        raise ValueError(f"bad formatter for {exc}")

    async with site(lambda f: adapter(leaky(f), on_error=on_error), lookup()) as (_, url, http):
        response = await post(http, url, BODIES[adapter])
    assert shown(adapter, response.text).startswith(GENERIC)
    assert "hunter2" not in response.text


async def broken() -> AsyncIterator[object]:
    raise OSError(f"No such file: {SECRET}")
    yield  # an async generator that fails at once


async def test_to_vercel_stream_masks_by_default_and_takes_on_error() -> None:
    default = "".join([t async for t in to_vercel_stream(broken(), message_id="m1")])
    assert "hunter2" not in default
    assert [c["errorText"] for c in chunks(default) if c["type"] == "error"] == [GENERIC]
    chosen = to_vercel_stream(broken(), message_id="m1", on_error=lambda e: "Try later.")
    custom = "".join([t async for t in chosen])
    assert [c["errorText"] for c in chunks(custom) if c["type"] == "error"] == ["Try later."]


async def test_to_agui_events_masks_by_default_and_takes_on_error() -> None:
    default = "".join([t async for t in to_agui_events(broken(), thread_id="t", run_id="r")])
    assert "hunter2" not in default
    [error] = [c for c in chunks(default) if c["type"] == "RUN_ERROR"]
    assert error == {"type": "RUN_ERROR", "message": GENERIC, "code": "RunError"}
    events = to_agui_events(broken(), thread_id="t", run_id="r", on_error=lambda e: "Try later.")
    custom = "".join([t async for t in events])
    assert [c["message"] for c in chunks(custom) if c["type"] == "RUN_ERROR"] == ["Try later."]
