"""Review probes: hostile text through the encoders' fast path, read by the official clients
(`ai`, @ag-ui/client) over the four wire formats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from llm_worker import TextPart, ThinkingPart, ToolUsePart, Worker
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.ui import to_agui_events, to_vercel_stream
from llm_worker.ui._agui import HEADERS as AGUI_HEADERS
from llm_worker.ui._vercel import HEADERS as VERCEL_HEADERS

from .conftest import CONSUMERS, PROVIDERS, consumed, run_node, serve

pytestmark = pytest.mark.anyio

# Short and long, ASCII and not: quotes, backslashes, control characters, DEL, the line
# separators JavaScript once refused in strings, astral characters, a closing script tag.
HOSTILE = (
    'say "hi" \\ </script>\x00\x01\x1f\x7f \u2028\u2029 \U0001f600 é'
    + "\n\t\r\b\f"
    + "汉字 \U0001f4a9 " * 400
)


def _script() -> list[ScriptedResponse]:
    return [
        ScriptedResponse(
            [
                ThinkingPart("think: " + HOSTILE, signature='sig"\\\u2028'),
                TextPart(HOSTILE),
                ToolUsePart('call"\\\u2028\U0001f600', "weather", {"city": HOSTILE[:40]}),
                TextPart("a"),
            ]
        ),
        ScriptedResponse.text(HOSTILE[:60]),
    ]


@pytest.mark.parametrize("protocol", sorted(CONSUMERS))
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_hostile_text_reaches_the_client_intact(
    protocol: str, provider: str, node_modules: Path
) -> None:
    consumer = CONSUMERS[protocol]
    plan = [{"send": "go"}]
    async with consumed(consumer, node_modules, provider, _script(), plan) as run:
        out, _, factory, _ = run
    history = factory.workers[0].history
    assert consumer.history(out) == history
    texts = [p.text for m in history for p in m.content if isinstance(p, TextPart)]
    assert HOSTILE in texts


async def _cancelled_mid_block(protocol: str, kind: str) -> tuple[list[str], list[Any]]:
    """The SSE events of a run cancelled (`worker.cancel()`) inside its first `kind` block."""
    script = [
        ScriptedResponse(
            [ThinkingPart("th " * 40, signature="s"), TextPart("hello " * 40)], delay=0.0001
        )
    ]
    worker = Worker(ScriptedClient(script))
    lines: list[str] = []
    marker = {
        "text": ("text-delta", "TEXT_MESSAGE_CONTENT"),
        "reasoning": ("reasoning-delta", "REASONING_MESSAGE_CONTENT"),
    }[kind][protocol == "ag-ui"]
    with anyio.fail_after(10):
        async with worker.stream("go") as stream:
            if protocol == "vercel":
                encoded = to_vercel_stream(stream, message_id="m1")
            else:
                encoded = to_agui_events(stream, thread_id="thread-1", run_id="r1")
            async for line in encoded:
                lines.append(line)
                if sum(marker in seen for seen in lines) == 2:
                    worker.cancel()
    return lines, worker.history


def _replay(lines: list[str], headers: dict[str, str]) -> Any:
    """An ASGI app answering every request with these SSE events."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        while (await receive()).get("more_body"):
            pass
        raw = [(k.encode(), v.encode()) for k, v in headers.items()]
        await send({"type": "http.response.start", "status": 200, "headers": raw})
        await send({"type": "http.response.body", "body": "".join(lines).encode()})

    return app


@pytest.mark.parametrize("kind", ["text", "reasoning"])
@pytest.mark.parametrize("protocol", sorted(CONSUMERS))
async def test_a_run_cancelled_mid_block_ends_cleanly_in_the_client(
    protocol: str, kind: str, node_modules: Path
) -> None:
    lines, history = await _cancelled_mid_block(protocol, kind)
    headers = VERCEL_HEADERS if protocol == "vercel" else AGUI_HEADERS
    async with serve(_replay(lines, headers)) as url:
        out = await run_node(node_modules, CONSUMERS[protocol].script, url, '[{"send": "go"}]')
    assert out["errors"] == []
    # What the client holds is what the Worker kept of the broken-off answer.
    assert CONSUMERS[protocol].history(out) == history
