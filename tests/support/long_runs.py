"""What the long-run (ContextPolicy) tests share: a 4 KB page tool, request checks, and the
wire runs' model and Worker."""

from __future__ import annotations

import re
from typing import Any

import anyio

from llm_worker import ContextCompacted, ContextPolicy, MemoryBlobStore, OutputPolicy, Worker, tool
from llm_worker.messages import Message, Request, ThinkingConfig, ThinkingPart, ToolUsePart
from llm_worker.state import RunStatus
from llm_worker.testing import (
    ScriptedClient,
    ScriptedModelServer,
    ScriptedRequest,
    ScriptedResponse,
)
from llm_worker.testing._script import prompt_tokens
from llm_worker.worker._context_stages import MARK

WINDOW = 16_000
BLOB = re.compile(r"\[blob:([0-9a-f-]+)\]")
PAGE = "lorem ipsum dolor sit amet " * 150  # ~4 KB with its header


@tool
async def read(n: int) -> str:
    """Read page n."""
    return f"page {n}: {PAGE}"


def page_reader(page: str) -> Any:
    """A `read` tool whose pages are `page` (the long runs' smaller window uses shorter ones)."""

    @tool
    async def read(n: int) -> str:
        """Read page n."""
        return f"page {n}: {page}"

    return read


def pairs_valid(messages: list[Message]) -> bool:
    """Every call answered in the next message, every result answering the call before it."""
    for i, message in enumerate(messages):
        calls = {p.id for p in message.tool_uses} if message.role == "assistant" else set()
        following = messages[i + 1] if i + 1 < len(messages) else None
        answers = {p.tool_use_id for p in following.tool_results} if following else set()
        if calls and (following is None or answers != calls):
            return False
        results = {p.tool_use_id for p in message.tool_results}
        before = {p.id for p in messages[i - 1].tool_uses} if i else set()
        if results and results != before:
            return False
    return True


def stored_page(request: Request) -> tuple[str, int] | None:
    """A compacted page's blob id and number, from what the model was sent."""
    for message in request.messages:
        for part in message.tool_results:
            found = BLOB.search(part.content)
            if found and "page " in part.content:
                return found.group(1), int(part.content.split("page ")[1].split(":")[0])
    return None


def prefix_shared_between(requests: list[Request], compactions: set[int]) -> None:
    """Assert each request sends its predecessor's messages again, unless compacted before it.

    All but the predecessor's last message (tool results the next answer's may join): the
    cacheable prefix holds between two compactions.
    """
    for k in range(1, len(requests)):
        if k in compactions:
            continue
        before, now = requests[k - 1].messages, requests[k].messages
        assert now[: len(before) - 1] == before[:-1], f"request {k} rewrote its prefix"


class WireModel:
    """Thinks (signed), then reads a page, each turn; inspects a compacted page once."""

    def __init__(self, turns: int, inspect_at: int = -1, thinking: bool = True) -> None:
        self.turns, self.inspect_at, self.thinking = turns, inspect_at, thinking
        self.answers = 0
        self.counted: list[int] = []
        self.requests: list[Any] = []
        self.inspected: tuple[str, int] | None = None
        self.read_back: str | None = None

    def __call__(self, ask: ScriptedRequest) -> ScriptedResponse:
        index, self.answers = self.answers, self.answers + 1
        self.counted.append(prompt_tokens(ask.request))
        self.requests.append(ask.request)
        if self.inspected is not None and self.read_back is None:
            self.read_back = ask.request.messages[-1].tool_results[0].content
        if index >= self.turns:
            return ScriptedResponse.text("done")
        if index == self.inspect_at:
            self.inspected = stored_page(ask.request)
            assert self.inspected is not None
            call = ToolUsePart("", "inspect", {"blob_id": self.inspected[0]})
        else:
            call = ToolUsePart("", "read", {"n": index})
        thought = [ThinkingPart(f"step {index}: " + "hmm " * 40, signature=f"sig{index}")]
        return ScriptedResponse([*thought, call] if self.thinking else [call])


def worker_on(
    client: Any,
    store: MemoryBlobStore,
    window: int = WINDOW,
    reader: Any = read,
    **options: Any,
) -> Worker:
    """A Worker reading pages with thinking on, in a window (16,000 tokens), with a summarizer."""
    options.setdefault("max_requests", 1_000)
    return Worker(
        client,
        tools=[reader],
        blob_store=store,
        output_policy=OutputPolicy(inline_threshold=8_000),
        thinking=ThinkingConfig(budget_tokens=1024),
        context=ContextPolicy(
            window_tokens=window,
            summarizer=ScriptedClient(ScriptedResponse.text("Pages were read in order.")),
        ),
        **options,
    )


# The 1,000-turn wire runs hold a 6,000-token window with ~1 KB pages: the same compactions
# (results stored, thinking dropped, summaries) as 16,000 tokens and 4 KB, with a third of
# the messages in each body, so a wire's 1,000 requests cost ~3.5 s of CPU, not ~5.5 s.
# test_context_wires.py runs the 16,000 tokens and 4 KB pages for 100 turns.
SMALL_WINDOW = 6_000
SMALL_PAGE = "lorem ipsum dolor sit amet " * 40


async def a_thousand_turns_on(wire: str, turns: int = 1_000) -> None:
    """Run `turns` turns over `wire`'s scripted server and check every request it received.

    No request over the window by the server's own count, every tool-call pair valid, a
    compacted page inspected by its id and read back, both the reversible and the summary
    stages used, and the prefix shared between compactions.
    """
    model = WireModel(turns, inspect_at=turns * 3 // 5, thinking=wire != "openai_chat")
    events: list[ContextCompacted] = []
    compacted_at: set[int] = set()
    async with ScriptedModelServer(wire, model) as server, server.client() as client:
        worker = worker_on(
            client,
            MemoryBlobStore(),
            window=SMALL_WINDOW,
            reader=page_reader(SMALL_PAGE),
            max_requests=turns + 10,
        )
        worker.on_context_compacted(events.append)
        worker.on_context_compacted(lambda _: compacted_at.add(len(model.requests)))
        with anyio.fail_after(280):
            result = await worker.run("Read every page.")
    assert result.status is RunStatus.FINISHED
    assert len(model.requests) == turns + 1
    assert max(model.counted) <= SMALL_WINDOW  # by the server's own count of what it received
    assert max(model.counted) > 0.7 * SMALL_WINDOW  # the window was used, not avoided
    assert all(pairs_valid(r.messages) for r in model.requests)
    assert {"tool_results", "summary"} <= {s for e in events for s in e.stages}
    assert model.inspected is not None and model.read_back is not None
    assert f"page {model.inspected[1]}: lorem" in model.read_back
    assert any(MARK in r.messages[0].text for r in model.requests)
    prefix_shared_between(model.requests, compacted_at)
