"""Review probes for FallbackClient: a stream cut at every point, on every wire and transport.

Each first client is a real HTTP server speaking its provider's wire format whose answer is cut
(the connection closed) at one point of the stream; a second client of another wire answers.
The history never holds the cut answer, no opaque data (signatures, encrypted reasoning, item
ids) crosses to the other provider — on the next request, and after pause -> JSON -> resume in
a fresh Worker — and a tool started early on the cut answer is not started again.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest

from llm_worker import Worker, tool
from llm_worker.events import UsageEvent
from llm_worker.messages import (
    TextPart,
    ThinkingConfig,
    ThinkingPart,
    ToolUsePart,
    messages_from_json,
    messages_to_json,
)
from llm_worker.providers import Cooldown, FallbackClient, RetryPolicy
from llm_worker.testing import ScriptedModelServer, ScriptedResponse, WireResponse, WireServer
from llm_worker.testing._model_server import WIRE_PROVIDERS

WIRES = ("anthropic", "gemini", "openai_chat", "openai_responses")
# The wire that answers when each one breaks (a different provider every time).
SPARE = {
    "anthropic": "gemini",
    "gemini": "openai_responses",
    "openai_chat": "anthropic",
    "openai_responses": "anthropic",
}
CUTS = ("in_thinking", "after_text", "in_tool_call", "between_calls", "after_usage")
THINKING = ThinkingConfig(budget_tokens=2048)

_log: dict[str, Path] = {}  # "file": the file of side effects of the running test


def _ran() -> list[str]:
    path = _log["file"]
    return path.read_text().split() if path.exists() else []


@tool(effect="read_only")
def record(n: int) -> str:
    """Record n (the file of side effects counts each start)."""
    with _log["file"].open("a") as out:
        out.write(f"{n}\n")
    return f"recorded {n}"


def _encode(wire: str, response: ScriptedResponse) -> bytes:
    module = importlib.import_module(f"llm_worker.testing._wire_{wire}")
    body: bytes = module.encode(response, model=f"model-{wire}")
    return body


def _answer(wire: str) -> ScriptedResponse:
    return ScriptedResponse(
        [
            ThinkingPart("thinking hard", signature=f"SIG-{wire}"),
            TextPart("HALFANSWER text"),
            ToolUsePart("call_1", "record", {"n": 1}),
            ToolUsePart("call_2", "record", {"n": 2}),
        ],
        usage=UsageEvent(input_tokens=10, output_tokens=5),
        chunk_size=4,
    )


def _event_end(body: bytes, at: int) -> int:
    sep = b"\r\n\r\n" if b"\r\n\r\n" in body else b"\n\n"
    return body.index(sep, at) + len(sep)


def _event_start(body: bytes, at: int) -> int:
    sep = b"\r\n\r\n" if b"\r\n\r\n" in body else b"\n\n"
    return body.rindex(sep, 0, at) + len(sep)


def _cut(wire: str, body: bytes, where: str) -> int:
    """The byte the connection closes at."""
    if where == "in_thinking":  # the first thinking delta, no signature yet
        return _event_end(body, body.index(b"thin"))
    if where == "after_text":  # every text delta sent, no call yet
        return _event_end(body, body.index(b'ext"'))
    if where == "in_tool_call":  # the first call's arguments half sent
        marker = b'\\"n\\"' if wire != "gemini" else b'"n":1'
        at = _event_end(body, body.index(marker))
        return at if wire != "gemini" else at - 20  # Gemini sends a call whole: cut inside it
    if where == "between_calls":  # the first call complete, the second not begun
        return _event_start(body, body.index(b"call_2" if wire != "gemini" else b'"n":2'))
    # after_usage: the usage sent, the end of the stream not
    ends = {
        "anthropic": lambda: _event_end(body, body.index(b"message_delta")),
        "gemini": lambda: len(body) - 3,  # the last chunk (finish + usage) not ended
        "openai_chat": lambda: _event_start(body, body.index(b"[DONE]")),
        "openai_responses": lambda: len(body) - 3,
    }
    return ends[wire]()


def _spare_script() -> list[ScriptedResponse]:
    return [
        ScriptedResponse(
            [
                ThinkingPart("spare thought", signature="SPARESIG"),
                ToolUsePart("", "record", {"n": 1}),
                ToolUsePart("", "record", {"n": 2}),
            ]
        ),
    ]


def _opaque_of(wire: str) -> list[str]:
    # What the first wire's answers carry that must never reach the spare: its signatures /
    # encrypted reasoning, and on OpenAI Responses its item ids.
    found = [f"SIG-{wire}", "HALFANSWER"]
    if wire == "openai_responses":
        found += ["rs_0000scripted", "msg_0001scripted"]
    return found


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["httpx", "aiohttp"])
@pytest.mark.parametrize("where", CUTS)
@pytest.mark.parametrize("wire", WIRES)
async def test_a_stream_cut_anywhere_falls_over_with_nothing_half_or_foreign(
    wire: str, where: str, transport: Literal["httpx", "aiohttp"], tmp_path: Path
) -> None:
    _log["file"] = tmp_path / "side_effects.txt"
    spare_wire = SPARE[wire]
    body = _encode(wire, _answer(wire))
    cut = _cut(wire, body, where)
    back = [
        WireResponse(_encode(wire, ScriptedResponse([ThinkingPart("t", signature="SIG-back"), t])))
        for t in (TextPart("A"), TextPart("A2"))
    ]
    async with (
        WireServer([WireResponse(body, cut_at=cut), *back]) as broken,
        ScriptedModelServer(spare_wire, _spare_script(), model=f"model-{spare_wire}") as spare,
        spare.client(transport=transport) as second,
    ):
        from llm_worker import providers

        cls: Any = getattr(providers, WIRE_PROVIDERS[wire][0])
        first = cls(
            model=f"model-{wire}",
            base_url=broken.base_url + WIRE_PROVIDERS[wire][1],
            api_key="k",
            retry=RetryPolicy.disabled(),
            transport=transport,
        )
        async with first:
            client = FallbackClient([first, second], cooldown=Cooldown.disabled())
            worker = Worker(client, tools=[record], thinking=THINKING, early_tool_start=True)
            with anyio.fail_after(20):
                result = await worker.run("go")
                # the spare called the tools; the first client, back, answered their results
                assert result.text == "A", (where, result.text)
                # the tools ran once each, whatever the cut answer started early
                assert sorted(_ran()) == ["1", "2"], _ran()
                # a fresh Worker from the JSON of the history: the next request goes to the
                # first client again, which must not get the spare's opaque data
                saved = messages_to_json(worker.history)
                fresh = Worker(
                    client, tools=[record], thinking=THINKING, history=messages_from_json(saved)
                )
                again = await fresh.run("again")
                assert again.text == "A2"
    assert len(broken.requests) == 3
    assert len(spare.requests) == 1
    sent_back = broken.requests[1].body.decode() + broken.requests[2].body.decode()
    assert "SPARESIG" not in sent_back
    to_spare = spare.requests[0].body.decode()
    for opaque in _opaque_of(wire):
        assert opaque not in to_spare, (opaque, where)
    assert "HALFANSWER" not in sent_back
