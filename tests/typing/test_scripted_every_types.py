# pyright: reportUnnecessaryTypeIgnoreComment=true
"""One step for every request, checked by pyright strict (CI runs it on tests/typing).

Each `# pyright: ignore[...]` marks a call pyright must reject; if it stops rejecting it, the
ignore becomes unnecessary and pyright fails. The tests also run under pytest.
"""

from __future__ import annotations

from llm_worker.testing import (
    ScriptedClient,
    ScriptedModelServer,
    ScriptedRequest,
    ScriptedResponse,
)


def answer(call: ScriptedRequest) -> ScriptedResponse:
    return ScriptedResponse.text(f"request {call.index}")


def untyped(call: int) -> str:
    return str(call)


def test_one_step_stands_for_the_whole_script() -> None:
    assert ScriptedClient(answer).remaining == 1
    assert ScriptedClient(ScriptedResponse.text("same")).remaining == 1
    assert ScriptedModelServer("anthropic", answer).remaining == 1
    assert ScriptedModelServer("gemini", ScriptedResponse.text("same")).remaining == 1


def test_a_step_of_the_wrong_shape_is_refused() -> None:
    ScriptedClient(untyped)  # pyright: ignore[reportArgumentType]
    ScriptedModelServer("openai_chat", untyped)  # pyright: ignore[reportArgumentType, reportCallIssue]
