"""The hook rules over every real wire format: what the provider receives after hooks acted.

- a before_tool_call rewrite (in place, nested) reaches the tool, while the model's own call
  goes back to the provider exactly as it was sent (thinking signatures and replays depend
  on it);
- a result an after_tool_call hook aborted on is never sent: the next request carries an
  error result saying the hooks did not check it, not the secret a later masking hook would
  have hidden.
"""

from __future__ import annotations

import anyio
import orjson
import pytest

from llm_worker import Aborted, ToolUsePart, Worker
from llm_worker.hooks import Abort, ToolCallContext, ToolResultContext
from llm_worker.testing import ScriptedResponse
from support.e2e import PROVIDERS, TIMEOUT, Desk, serve, worker_options
from support.wire_bodies import assert_valid

pytestmark = pytest.mark.anyio

SECRET = "hunter2"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_rewrite_reaches_the_tool_and_the_model_call_goes_back_unchanged(
    provider: str,
) -> None:
    async def proxied(ctx: ToolCallContext) -> None:
        ctx.call.input["city"] += " (via proxy)"

    desk = Desk()
    script = [
        ScriptedResponse([ToolUsePart("call_1", "lookup", {"city": "Kyoto"})]),
        ScriptedResponse.text("Clear."),
    ]
    async with serve(provider, script) as wire:
        worker = Worker(wire.client(), tools=desk.tools(), **worker_options(provider))
        worker.add_before_tool_call_hook(proxied)
        with anyio.fail_after(TIMEOUT):
            await worker.run("Weather in Kyoto?")
        body = wire.body(1)
    assert desk.ran == [("lookup", {"city": "Kyoto (via proxy)"})]
    (step,) = assert_valid(provider, body)
    assert [c.args for c in step.calls] == [{"city": "Kyoto"}]
    assert step.results[0].output == "Kyoto (via proxy): 21 C, clear"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_result_the_after_hooks_did_not_finish_is_never_sent(provider: str) -> None:
    async def audit(ctx: ToolResultContext) -> Abort | None:
        return Abort("audit log unavailable") if "Osaka" in ctx.call.input["city"] else None

    async def mask(ctx: ToolResultContext) -> None:
        ctx.result.content = ctx.result.content.replace(SECRET, "***")

    desk = Desk()
    script = [
        ScriptedResponse(
            [
                ToolUsePart("call_1", "lookup", {"city": f"Kyoto {SECRET}"}),
                ToolUsePart("call_2", "lookup", {"city": f"Osaka {SECRET}"}),
            ]
        ),
        ScriptedResponse.text("Noted."),
    ]
    async with serve(provider, script) as wire:
        worker = Worker(wire.client(), tools=desk.tools(), **worker_options(provider))
        worker.add_after_tool_call_hook(audit)
        worker.add_after_tool_call_hook(mask)
        with anyio.fail_after(TIMEOUT), pytest.raises(Aborted):
            await worker.run("Weather?")
        with anyio.fail_after(TIMEOUT):
            await worker.run("And now?")
        body = wire.body(1)
    (step,) = assert_valid(provider, body)
    kyoto, osaka = step.results
    assert kyoto.output == "Kyoto ***: 21 C, clear"
    assert "after_tool_call" in osaka.output and SECRET not in osaka.output
    assert osaka.is_error in (True, None)  # the OpenAI APIs have no error flag
    # The secret the model itself sent in its call goes back as it was; no tool output does.
    assert orjson.dumps(body).decode().count(f"{SECRET}: 21 C") == 0
