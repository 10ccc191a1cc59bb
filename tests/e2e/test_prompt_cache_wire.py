"""Prompt caching by default, over the real wires (`Worker(prompt_cache=...)`).

Anthropic: the library's breakpoints (one sliding with the conversation's end, one anchor
after the system prompt and tools) never take a request over 4 with the user's own, over a
long run; each request's end breakpoint is within Anthropic's 20-block lookback of the last
one, and each body starts with the previous one. OpenAI: one `prompt_cache_key` for a
conversation, through a pause -> JSON -> resume in a fresh Worker (Chat: OpenAI's own host
only). Gemini: nothing added. `prompt_cache=False`: nothing anywhere.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import anyio
import pytest

from llm_worker import (
    Message,
    PauseState,
    Request,
    RunStatus,
    TextPart,
    ToolUsePart,
    UsageEvent,
    Worker,
    tool,
)
from llm_worker.hooks import Pause, ToolCallContext
from llm_worker.providers import OpenAIChatClient
from llm_worker.testing import ScriptedModelServer, ScriptedRequest, ScriptedResponse
from support.e2e import PROVIDERS
from support.wire_bodies import assert_valid

pytestmark = pytest.mark.anyio

USAGE = UsageEvent(input_tokens=50, output_tokens=5)
SYSTEM = "You read pages."


@tool
async def read(n: int) -> str:
    """Read page n."""
    return f"page {n}"


def looping(turns: int) -> Any:
    def step(request: ScriptedRequest) -> ScriptedResponse:
        if request.index >= turns - 1:
            return ScriptedResponse([TextPart("done")], usage=USAGE)
        return ScriptedResponse([ToolUsePart("", "read", {"n": request.index})], usage=USAGE)

    return step


def marks(body: dict[str, Any]) -> list[str]:
    """Where the body's `cache_control` markers are."""
    found = ["top"] if "cache_control" in body else []
    system = body.get("system")
    if isinstance(system, list):
        found += ["system" for b in system if "cache_control" in b]  # pyright: ignore
    found += [f"tool {t['name']}" for t in body.get("tools", []) if "cache_control" in t]
    for i, message in enumerate(body["messages"]):
        found += [
            f"message {i}.{j}" for j, b in enumerate(message["content"]) if "cache_control" in b
        ]
    return found


def unmarked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = copy.deepcopy(messages)
    for message in out:
        for block in message["content"]:
            block.pop("cache_control", None)
    return out


def blocks_before(messages: list[dict[str, Any]], where: str) -> int:
    """The number of message blocks before a `message i.j` mark."""
    i, j = (int(n) for n in where.split()[1].split("."))
    return sum(len(m["content"]) for m in messages[:i]) + j


@pytest.mark.parametrize(
    ("turns", "client_options", "worker_options", "expected"),
    [
        (100, {}, {}, 2),  # the end and the anchor on the system prompt
        (20, {"prompt_cache": ("system", "tools", "messages")}, {}, 3),  # the client's three
        (
            20,
            {"prompt_cache": ("tools",)},
            {"options": {"cache_control": {"type": "ephemeral"}}},
            3,  # automatic caching takes a slot: top, the client's tool, the library's end
        ),
        (
            20,
            {"prompt_cache": ("system", "tools", "messages")},
            {"options": {"cache_control": {"type": "ephemeral"}}},
            4,  # the user's four: the library adds none
        ),
    ],
)
async def test_anthropic_never_more_than_four_breakpoints_over_a_long_run(
    turns: int, client_options: dict[str, Any], worker_options: dict[str, Any], expected: int
) -> None:
    async with ScriptedModelServer("anthropic", looping(turns), model="claude-sonnet-4-5") as s:
        worker = Worker(
            s.client(**client_options),
            tools=[read],
            system=SYSTEM,
            max_requests=turns,
            **worker_options,
        )
        with anyio.fail_after(60):
            result = await worker.run("read them all")
        bodies = [r.json() for r in s.requests]
    assert result.status is RunStatus.FINISHED and len(bodies) == turns
    counts = {len(marks(b)) for b in bodies}
    assert counts == {expected}, counts
    if not client_options and not worker_options:
        assert marks(bodies[-1])[0] == "system"
    ends: list[int] = []
    for before, after in itertools.pairwise(bodies):
        # The conversation only grows: each body starts with the previous one.
        assert unmarked(after["messages"])[: len(before["messages"])] == unmarked(
            before["messages"]
        )
    for body in bodies:
        last = [m for m in marks(body) if m.startswith("message")]
        if last:
            ends.append(blocks_before(body["messages"], last[-1]))
    # The sliding end moves with the conversation, within Anthropic's 20-block lookback.
    assert all(0 < b - a <= 20 for a, b in itertools.pairwise(ends)), ends[:5]
    assert_valid("anthropic", bodies[-1])


async def test_anthropic_thinking_blocks_never_carry_a_breakpoint() -> None:
    from llm_worker import ThinkingConfig, ThinkingPart

    script = [
        ScriptedResponse(
            [ThinkingPart("hm", signature="sig"), ToolUsePart("", "read", {"n": 1})],
            usage=USAGE,
        ),
        ScriptedResponse([TextPart("done")], usage=USAGE),
    ]
    async with ScriptedModelServer("anthropic", script, model="claude-sonnet-4-5") as s:
        worker = Worker(s.client(), tools=[read], thinking=ThinkingConfig(budget_tokens=1024))
        with anyio.fail_after(10):
            await worker.run("go")
        body = s.requests[1].json()
    for message in body["messages"]:
        for block in message["content"]:
            if block["type"] in ("thinking", "redacted_thinking"):
                assert "cache_control" not in block
    assert marks(body) == ["tool read", "message 2.0"]  # no system: the anchor is the tool


async def test_a_hook_can_take_caching_off_one_request() -> None:
    async with ScriptedModelServer("anthropic", looping(3), model="claude-sonnet-4-5") as s:
        worker = Worker(s.client(), tools=[read])

        def off_for_the_second(ctx: Any) -> None:
            if ctx.request_number == 2:
                ctx.request.prompt_cache = None

        worker.add_on_message_send_hook(off_for_the_second)
        with anyio.fail_after(10):
            await worker.run("go")
        bodies = [r.json() for r in s.requests]
    assert [len(marks(b)) for b in bodies] == [2, 0, 2]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_prompt_cache_false_adds_nothing(provider: str) -> None:
    async with ScriptedModelServer(provider, looping(3), model="m") as s:  # type: ignore[call-overload]
        worker = Worker(s.client(), tools=[read], system=SYSTEM, prompt_cache=False)
        with anyio.fail_after(10):
            await worker.run("go")
        raw = [r.body for r in s.requests]
    for body in raw:
        assert b"cache_control" not in body and b"prompt_cache_key" not in body


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_each_wire_gets_its_own_caching(provider: str) -> None:
    async with ScriptedModelServer(provider, looping(4), model="m") as s:  # type: ignore[call-overload]
        worker = Worker(s.client(), tools=[read], system=SYSTEM)
        with anyio.fail_after(10):
            await worker.run("go")
        bodies = [r.json() for r in s.requests]
        raw = [r.body for r in s.requests]
    keys = {b.get("prompt_cache_key") for b in bodies}
    if provider == "openai_responses":
        assert len(keys) == 1 and next(iter(keys)).startswith("llmw-")  # type: ignore[union-attr]
    else:
        # Chat: only to OpenAI's own host (a compatible server may refuse the field);
        # Gemini caches implicitly; Anthropic has breakpoints instead.
        assert keys == {None}
    marked = [b"cache_control" in body for body in raw]
    assert all(marked) if provider == "anthropic" else not any(marked)


def test_chat_sends_the_key_to_openai_only() -> None:
    request = Request([Message.user("hi")], prompt_cache="llmw-abc")
    ours = OpenAIChatClient(model="gpt-5", api_key="sk-test")
    other = OpenAIChatClient(model="m", api_key="k", base_url="https://api.mistral.ai/v1")
    assert ours.build_body(request)["prompt_cache_key"] == "llmw-abc"
    assert "prompt_cache_key" not in other.build_body(request)
    mine = Request([Message.user("hi")], prompt_cache="llmw-abc", options={"prompt_cache_key": "x"})
    assert ours.build_body(mine)["prompt_cache_key"] == "x"  # the user's own wins


async def test_responses_key_holds_across_a_pause_resumed_elsewhere() -> None:
    def pause_first(ctx: ToolCallContext) -> Pause | None:
        return Pause("approve") if ctx.call.input["n"] == 0 and not ctx.resumed else None

    async with ScriptedModelServer("openai_responses", looping(3), model="m") as s:
        first = Worker(s.client(), tools=[read])
        first.add_before_tool_call_hook(pause_first)
        with anyio.fail_after(10):
            paused = await first.run("go")
        assert paused.status is RunStatus.PAUSED and paused.state is not None
        state = PauseState.from_json(paused.state.to_json())
        second = Worker(s.client(), tools=[read])
        second.add_before_tool_call_hook(pause_first)
        with anyio.fail_after(10):
            done = await second.resume(state)
        other = Worker(s.client(), tools=[read])
        with anyio.fail_after(10):
            await other.run("another conversation")
        keys = [r.json()["prompt_cache_key"] for r in s.requests]
    assert done.status is RunStatus.FINISHED
    assert len(keys) == 4 and len(set(keys[:3])) == 1  # one conversation, one key
    assert keys[3] != keys[0]
