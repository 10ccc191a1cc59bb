"""Read tool-call steps out of the request bodies a provider really receives, and check them.

Each provider rejects (HTTP 400) a body in which a tool call has no result right after it, a
result answers no call, or a call is answered twice. `exchanges(provider, body)` walks a body
in that provider's own shape, asserts those rules, and returns every step as the calls and the
results that answer them, in a neutral form tests can compare:

- Anthropic: an assistant message's `tool_use` blocks must be answered by `tool_result` blocks
  opening the next (user) message, ids in call order; roles alternate, starting with user.
- OpenAI Chat: an assistant message's `tool_calls` must be followed by exactly that many
  `role: "tool"` messages, `tool_call_id`s in call order.
- OpenAI Responses: a run of assistant items holding `function_call` items must be followed by
  their `function_call_output` items, `call_id`s in call order; a `reasoning` item must be
  followed by the message or call it produced, named by id.
- Gemini: a `model` content's `functionCall` parts must be answered by `functionResponse`
  parts opening the next (user) content, names in call order (Gemini pairs by order); roles
  alternate, starting with user; a response holds exactly one of `output` / `error`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import orjson

__all__ = ("Exchange", "WireCall", "WireResult", "assert_failed", "assert_valid", "exchanges")


@dataclass(frozen=True, slots=True)
class WireCall:
    """A tool call as the body carries it (`id` is None on Gemini, which sends none)."""

    id: str | None
    name: str
    args: dict[str, Any]
    signature: str | None = None


@dataclass(frozen=True, slots=True)
class WireResult:
    """A tool result as the body carries it.

    `is_error` is None on the OpenAI APIs, which have no error flag (the text says it).
    """

    id: str | None
    name: str | None
    output: str
    is_error: bool | None


@dataclass(slots=True)
class Exchange:
    """One assistant step's tool calls and the results that answer them, in order."""

    calls: list[WireCall] = field(default_factory=lambda: [])
    results: list[WireResult] = field(default_factory=lambda: [])


def exchanges(provider: str, body: dict[str, Any]) -> list[Exchange]:
    """Every tool-call step of `body`, checked against `provider`'s pairing rules.

    Raises:
        AssertionError: The provider would reject the body's history.
    """
    return _READERS[provider](body)


def assert_valid(provider: str, body: dict[str, Any]) -> list[Exchange]:
    """`exchanges`, plus: each step answers each call exactly once, matched by id or name."""
    steps = exchanges(provider, body)
    for step in steps:
        assert len(step.results) == len(step.calls), step
        for call, result in zip(step.calls, step.results, strict=True):
            if call.id is not None:
                assert result.id == call.id, (call, result)
            if result.name is not None:
                assert result.name == call.name, (call, result)
        ids = [c.id for c in step.calls if c.id is not None]
        assert len(ids) == len(set(ids)), f"a call id is used twice: {ids}"
    return steps


def assert_failed(result: WireResult, says: str) -> None:
    """An error result: flagged where the wire has a flag (OpenAI has none), and says why."""
    assert result.is_error is not False, result
    assert says in result.output, result


def _alternating(roles: list[str], user: str) -> None:
    assert roles, "no messages"
    assert roles[0] == user, f"the first message is {roles[0]!r}"
    for before, after in pairwise(roles):
        assert before != after, f"two {before!r} messages in a row: {roles}"


# -- Anthropic -----------------------------------------------------------------------------------


def _anthropic(body: dict[str, Any]) -> list[Exchange]:
    messages: list[dict[str, Any]] = body["messages"]
    _alternating([m["role"] for m in messages], "user")
    steps: list[Exchange] = []
    answered = 0  # tool_result blocks expected at the start of the next user message
    for message in messages:
        blocks: list[dict[str, Any]] = message["content"]
        results = [b for b in blocks if b["type"] == "tool_result"]
        assert blocks[: len(results)] == results, "tool_result blocks must come first"
        if message["role"] == "assistant":
            calls = [b for b in blocks if b["type"] == "tool_use"]
            assert not results, "an assistant message holds a tool_result"
            step = Exchange([WireCall(b["id"], b["name"], b["input"]) for b in calls])
            answered = len(calls)
            if calls:
                steps.append(step)
            continue
        assert len(results) == answered, f"{answered} call(s) answered by {len(results)} results"
        if answered:
            steps[-1].results = [
                WireResult(
                    b["tool_use_id"], None, _text(b.get("content")), b.get("is_error", False)
                )
                for b in results
            ]
        answered = 0
    assert not answered, "the last message's tool calls have no results"
    return steps


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType, reportUnknownVariableType]
    return "" if content is None else str(content)


# -- OpenAI Chat Completions ---------------------------------------------------------------------


def _openai_chat(body: dict[str, Any]) -> list[Exchange]:
    messages: list[dict[str, Any]] = body["messages"]
    steps: list[Exchange] = []
    expected: list[dict[str, Any]] = []  # calls still waiting for their tool message
    for message in messages:
        if message["role"] == "tool":
            assert expected, f"a tool message answers no call: {message['tool_call_id']!r}"
            call = expected.pop(0)
            assert message["tool_call_id"] == call["id"], "tool messages out of call order"
            steps[-1].results.append(
                WireResult(message["tool_call_id"], None, _text(message["content"]), None)
            )
            continue
        assert not expected, f"calls without a tool message: {[c['id'] for c in expected]}"
        calls: list[dict[str, Any]] = message.get("tool_calls") or []
        if calls:
            assert message["role"] == "assistant"
            steps.append(
                Exchange(
                    [
                        WireCall(
                            c["id"],
                            c["function"]["name"],
                            orjson.loads(c["function"]["arguments"]),
                        )
                        for c in calls
                    ]
                )
            )
            expected = list(calls)
    assert not expected, f"calls without a tool message: {[c['id'] for c in expected]}"
    return steps


# -- OpenAI Responses ----------------------------------------------------------------------------


def _openai_responses(body: dict[str, Any]) -> list[Exchange]:
    items: list[dict[str, Any]] = body["input"]
    steps: list[Exchange] = []
    waiting: list[str] = []  # call_ids of the current step not answered yet
    for n, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "function_call_output":
            assert waiting, f"a function_call_output answers no call: {item['call_id']!r}"
            assert item["call_id"] == waiting.pop(0), "outputs out of call order"
            steps[-1].results.append(WireResult(item["call_id"], None, item["output"], None))
            continue
        if kind == "reasoning":
            after = items[n + 1] if n + 1 < len(items) else {}
            assert after.get("type") in ("message", "function_call"), "reasoning item alone"
            assert after.get("id"), "a reasoning item must be followed by its item, by id"
        assistant = kind in ("function_call", "reasoning") or item.get("role") == "assistant"
        assert assistant or not waiting, f"calls without an output: {waiting}"
        if kind != "function_call":
            continue
        if not waiting:  # the previous step is answered: this call opens a new one
            steps.append(Exchange())
        steps[-1].calls.append(
            WireCall(item["call_id"], item["name"], orjson.loads(item["arguments"]))
        )
        waiting.append(item["call_id"])
    assert not waiting, f"calls without an output: {waiting}"
    return steps


# -- Gemini --------------------------------------------------------------------------------------


def _gemini(body: dict[str, Any]) -> list[Exchange]:
    contents: list[dict[str, Any]] = body["contents"]
    _alternating([c["role"] for c in contents], "user")
    steps: list[Exchange] = []
    answered = 0
    for content in contents:
        parts: list[dict[str, Any]] = content["parts"]
        responses = [p["functionResponse"] for p in parts if "functionResponse" in p]
        assert all("functionResponse" in p for p in parts[: len(responses)]), (
            "functionResponse parts must come first"
        )
        if content["role"] == "model":
            assert not responses, "a model content holds a functionResponse"
            calls = [p for p in parts if "functionCall" in p]
            answered = len(calls)
            if calls:
                steps.append(Exchange([_gemini_call(p) for p in calls]))
            continue
        assert len(responses) == answered, f"{answered} call(s) answered by {len(responses)}"
        if answered:
            steps[-1].results = [_gemini_result(r) for r in responses]
        answered = 0
    assert not answered, "the last content's function calls have no responses"
    return steps


def _gemini_call(part: dict[str, Any]) -> WireCall:
    call = part["functionCall"]
    return WireCall(
        call.get("id"), call["name"], call.get("args", {}), part.get("thoughtSignature")
    )


def _gemini_result(response: dict[str, Any]) -> WireResult:
    payload: dict[str, Any] = response["response"]
    assert len(payload) == 1 and set(payload) <= {"output", "error"}, payload
    is_error = "error" in payload
    return WireResult(
        response.get("id"), response["name"], str(next(iter(payload.values()))), is_error
    )


_READERS: dict[str, Callable[[dict[str, Any]], list[Exchange]]] = {
    "anthropic": _anthropic,
    "openai_chat": _openai_chat,
    "openai_responses": _openai_responses,
    "gemini": _gemini,
}
