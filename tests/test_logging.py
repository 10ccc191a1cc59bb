"""The library's log records: retries, hook errors, blob stores — and never an API key.

Every error path runs with a recognisable key; every record (message, arguments, extra
fields, formatted traceback) and, with tracing on and content captured, every span attribute
and event is scanned for it: whole, in any case, and as a prefix of 12 characters.
"""

from __future__ import annotations

import logging

import anyio
import pytest

from llm_worker import ToolUsePart, Worker, tool
from llm_worker.blobs import MemoryBlobStore
from llm_worker.blobs._output import BlobId, Content
from llm_worker.errors import AuthenticationError, HookError
from llm_worker.hooks import AbortContext, ToolResultContext
from llm_worker.providers import AnthropicClient, RetryPolicy
from llm_worker.testing import ScriptedModelServer, ScriptedResponse, WireResponse, WireServer
from support.telemetry import Telemetry

pytestmark = pytest.mark.anyio

KEY = "sk-ant-LlmWorkerSecret-0123456789abcdefXYZ"


def error_body(kind: str, message: str) -> dict[str, object]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def leaks(text: str) -> list[str]:
    lowered = text.lower()
    return [k for k in (KEY.lower(), KEY[:12].lower(), KEY[-12:].lower()) if k in lowered]


def record_text(record: logging.LogRecord) -> str:
    formatted = logging.Formatter().format(record)
    return formatted + " " + " ".join(f"{k}={v!r}" for k, v in vars(record).items())


class BrokenStore(MemoryBlobStore):
    async def store(self, content: Content) -> BlobId:
        raise OSError("disk full")


@tool
async def big() -> str:
    """A large output."""
    return "x" * 5000


async def failing_paths(caplog: pytest.LogCaptureFixture, t: Telemetry) -> None:
    instrumentation = t.instrumentation(capture_content=True)
    overloaded = WireResponse(
        error_body("overloaded_error", f"busy; key {KEY.upper()} rejected"),
        status=529,
        content_type="application/json",
    )
    refused = WireResponse(
        error_body("authentication_error", f"invalid x-api-key: {KEY[:20]}..."),
        status=401,
        content_type="application/json",
    )
    async with WireServer([overloaded, refused]) as server:
        retry = RetryPolicy(initial_delay=0.0, jitter=0.0)
        client = AnthropicClient(model="m", api_key=KEY, base_url=server.base_url, retry=retry)
        async with client:
            worker = Worker(client, instrument=instrumentation)
            with pytest.raises(AuthenticationError):
                await worker.run("hi")

    def bad_hook(ctx: ToolResultContext) -> None:
        raise RuntimeError("hook broke")

    def bad_abort(ctx: AbortContext) -> None:
        raise RuntimeError("abort hook broke")

    script = [
        ScriptedResponse([ToolUsePart("c1", "big", {})]),
        ScriptedResponse([ToolUsePart("c2", "big", {})]),
    ]
    async with ScriptedModelServer("anthropic", script) as model:
        client = model.client(api_key=KEY)
        async with client:
            worker = Worker(
                client, tools=[big], blob_store=BrokenStore(), instrument=instrumentation
            )
            worker.add_after_tool_call_hook(bad_hook)
            worker.add_on_abort_hook(bad_abort)
            with pytest.raises(HookError):
                await worker.run("go")


async def test_no_record_and_no_span_holds_the_key_and_each_error_path_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    t = Telemetry()
    caplog.set_level(logging.DEBUG)
    with anyio.fail_after(20):
        await failing_paths(caplog, t)
    records = caplog.records
    assert [leaks(record_text(r)) for r in records if leaks(record_text(r))] == []
    for span in t.spans():
        texts = [repr(dict(span.attributes or {})), span.status.description or ""]
        texts += [repr(dict(e.attributes or {})) for e in span.events]
        assert leaks(" ".join(texts)) == [], span.name

    by_logger: dict[str, list[logging.LogRecord]] = {}
    for r in records:
        by_logger.setdefault(r.name, []).append(r)
    [retry] = by_logger["llm_worker.retries"]
    assert (retry.levelno, retry.status, retry.attempt, retry.wait) == (  # type: ignore[attr-defined]
        logging.INFO,
        529,
        1,
        0.0,
    )
    assert "overloaded_error (HTTP 529)" in retry.getMessage()
    hooks = [r.getMessage() for r in by_logger["llm_worker.hooks"]]
    assert any("hook broke" in m and "after_tool_call" in m for m in hooks)
    assert any("abort hook broke" in m for m in hooks)
    stored = [r for r in by_logger["llm_worker.blobs"] if r.levelno == logging.WARNING]
    assert stored and "could not be stored" in stored[0].getMessage()


async def test_the_library_installs_only_a_null_handler() -> None:
    """A NullHandler on the package logger (library convention), nothing that prints anywhere."""
    from llm_worker._log import logger

    logger("llm_worker.hooks").logger  # noqa: B018  (made at the first record, as here)
    handlers = logging.getLogger("llm_worker").handlers
    assert [type(h) for h in handlers] == [logging.NullHandler]
    for name in ("llm_worker.retries", "llm_worker.hooks", "llm_worker.blobs"):
        assert logging.getLogger(name).handlers == []


async def test_a_blob_store_write_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="llm_worker.blobs")
    script = [ScriptedResponse([ToolUsePart("c1", "big", {})]), ScriptedResponse.text("ok")]
    async with ScriptedModelServer("anthropic", script) as model:
        client = model.client()
        async with client:
            worker = Worker(client, tools=[big], blob_store=MemoryBlobStore())
            with anyio.fail_after(10):
                await worker.run("go")
    [record] = [r for r in caplog.records if r.name == "llm_worker.blobs"]
    assert record.levelno == logging.DEBUG
    assert record.getMessage().startswith("stored a tool output as blob ")
