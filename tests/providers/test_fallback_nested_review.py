"""Review probes: a FallbackClient inside a FallbackClient, and a hostile inner stream."""

from __future__ import annotations

import anyio
import pytest

from llm_worker import Worker
from llm_worker.errors import OverloadedError
from llm_worker.messages import Origin, TextPart, ThinkingPart
from llm_worker.providers import Cooldown, FallbackClient
from llm_worker.testing import ScriptedClient, ScriptedResponse

pytestmark = pytest.mark.anyio


def broken() -> ScriptedResponse:
    error = OverloadedError("Overloaded", error_type="overloaded_error", streamed=True)
    return ScriptedResponse(
        [ThinkingPart("a thought", signature="sig-a"), TextPart("half")], fail_with=error
    )


async def test_a_nested_fallback_keeps_the_inner_answering_clients_mark() -> None:
    a = ScriptedClient([broken()], provider="anthropic", model="a-1")
    b = ScriptedClient(
        [ScriptedResponse([ThinkingPart("b thought", signature="sig-b"), TextPart("B")])],
        provider="gemini",
        model="b-1",
    )
    c = ScriptedClient(ScriptedResponse.text("C"), provider="openai_chat", model="c-1")
    inner = FallbackClient([a, b], cooldown=Cooldown.disabled())
    outer = FallbackClient([inner, c], cooldown=Cooldown.disabled())
    with anyio.fail_after(5):
        result = await Worker(outer).run("go")
    assert result.text == "B"
    thinking = [p for m in result.messages for p in m.content if isinstance(p, ThinkingPart)]
    # Gemini's signature is marked as Gemini's: it must never go back to Anthropic.
    assert [(p.signature, p.origin) for p in thinking] == [("sig-b", Origin("gemini", "b-1"))]
    assert [(u.provider, u.model) for u in result.request_usage][-1] == ("gemini", "b-1")


def test_a_worker_given_a_list_of_clients_is_told_to_use_fallback_client() -> None:
    from llm_worker.errors import ConfigurationError

    clients: list[object] = [ScriptedClient(ScriptedResponse.text("a")), "anthropic:x"]
    with pytest.raises(ConfigurationError, match=r"FallbackClient\(\[client"):
        Worker(clients)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType, reportCallIssue]
