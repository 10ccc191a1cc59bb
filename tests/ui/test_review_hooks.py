"""Review probes: neighbour hooks (Pause, Abort) and pauses kept as JSON, through the adapters."""

from __future__ import annotations

from typing import Any

import pytest

from llm_worker import PauseState, TextPart, ToolUsePart, Worker
from llm_worker.hooks import Abort, Pause
from llm_worker.testing import ScriptedResponse
from llm_worker.ui import AGUIAdapter, VercelAIAdapter, messages_from_ui

from .conftest import Factory
from .test_review_adapters import USER, answered, chunks, post, site, text_of

pytestmark = pytest.mark.anyio


class JsonStore:
    """A pause store that keeps only JSON, as one over a database would."""

    def __init__(self) -> None:
        self.saved: dict[str, str] = {}

    async def put(self, chat_id: str, state: PauseState) -> None:
        self.saved[chat_id] = state.to_json()

    async def take(self, chat_id: str) -> PauseState | None:
        text = self.saved.pop(chat_id, None)
        return None if text is None else PauseState.from_json(text)


class Gate:
    """A before_tool_call hook: pauses each weather call once, or aborts the run."""

    def __init__(self, verdict: str) -> None:
        self.verdict = verdict

    async def before_tool_call(self, ctx: Any) -> Any:
        if self.verdict == "abort":
            return Abort("the policy forbids weather lookups")
        return None if ctx.resumed else Pause("a person checks each lookup")


def hooked(verdict: str) -> Any:
    def wrap(factory: Factory) -> Any:
        def make() -> Worker:
            worker = factory()
            worker.add_hooks(Gate(verdict))
            return worker

        make.workers = factory.workers  # type: ignore[attr-defined]
        return make

    return wrap


def lookup(answer: str) -> list[ScriptedResponse]:
    step = ScriptedResponse([TextPart("Checking."), ToolUsePart("", "weather", {"city": "Oslo"})])
    return [step, ScriptedResponse.text(answer)]


async def test_a_hooks_pause_kept_as_json_resumes_in_a_fresh_worker() -> None:
    store = JsonStore()
    adapter = lambda f: VercelAIAdapter(hooked("pause")(f), store=store)  # noqa: E731
    async with site(adapter, lookup("Sunny in Oslo.")) as (_, url, http):
        first = await post(http, url, {"id": "c1", "messages": [USER]})
        asks = [c for c in chunks(first.text) if c["type"] == "tool-approval-request"]
        assert len(asks) == 1 and len(store.saved) == 1
        call_id = str(asks[0]["toolCallId"])
        message = answered([], call_id, approved=True)
        message["parts"][-1]["type"] = "tool-weather"
        message["parts"][-1]["input"] = {"city": "Oslo"}
        second = await post(http, url, {"id": "c1", "messages": [USER, message], "messageId": "a1"})
    assert "Oslo: sunny" in second.text
    assert text_of(second.text) == "Sunny in Oslo."
    assert store.saved == {}


@pytest.mark.parametrize("adapter", [VercelAIAdapter, AGUIAdapter])
async def test_an_aborting_hook_ends_the_stream_with_its_reason_and_the_next_turn_goes_on(
    adapter: Any,
) -> None:
    script = [*lookup("unused")[:1], ScriptedResponse.text("Hello again.")]
    wrapped = lambda f: adapter(hooked("abort")(f))  # noqa: E731
    async with site(wrapped, script) as (_, url, http):
        if adapter is VercelAIAdapter:
            first = await post(http, url, {"id": "c1", "messages": [USER]})
            user2 = {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}
            history = [USER, {"id": "a1", "role": "assistant", "parts": _parts(first.text)}]
            assert messages_from_ui(history)  # what the browser keeps is a valid history
            second = await post(http, url, {"id": "c1", "messages": [*history, user2]})
            assert text_of(second.text) == "Hello again."
        else:
            body = {"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user",
                    "content": "x"}]}  # fmt: skip
            first = await post(http, url, body)
            assert chunks(first.text)[-1]["type"] == "RUN_ERROR"
    assert "the policy forbids weather lookups" in first.text


def _parts(body: str) -> list[dict[str, Any]]:
    """A rough assembly of a Vercel stream's parts (what the ai client keeps)."""
    parts: list[dict[str, Any]] = []
    for c in chunks(body):
        if c["type"] == "start-step":
            parts.append({"type": "step-start"})
        elif c["type"] == "text-start":
            parts.append({"type": "text", "text": ""})
        elif c["type"] == "text-delta":
            parts[-1]["text"] += c["delta"]
        elif c["type"].startswith("data-"):
            parts.append({"type": c["type"], "data": c["data"]})
    return parts


@pytest.mark.parametrize("adapter", [VercelAIAdapter, AGUIAdapter])
async def test_a_hooks_pause_reason_reaches_the_browser_as_a_notice(adapter: Any) -> None:
    wrapped = lambda f: adapter(hooked("pause")(f))  # noqa: E731
    async with site(wrapped, lookup("unused")) as (_, url, http):
        if adapter is VercelAIAdapter:
            response = await post(http, url, {"id": "c1", "messages": [USER]})
            kind = "data-llm-worker-notice"
            notices = [c["data"] for c in chunks(response.text) if c["type"] == kind]
        else:
            body = {"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user",
                    "content": "x"}]}  # fmt: skip
            response = await post(http, url, body)
            notices = [
                e["value"] for e in chunks(response.text)
                if e["type"] == "CUSTOM" and e["name"] == "llm-worker.notice"
            ]  # fmt: skip
    assert notices == [{"status": "paused", "reason": "a person checks each lookup"}]
