"""Validate a JSON answer in on_turn_end and ask the model to fix it.

An on_turn_end hook sees each answer that has no tool call. Here it parses the answer against
a pydantic model; when that fails it returns `ContinueWithMessages` with the validation errors,
and the Worker sends them to the model for another try. `max_continuations` bounds the
retries, so a model that never gets it right cannot loop forever (the run then fails with
`LimitExceededError`).

Run: `python examples/json_fix_on_turn_end.py` (offline unless an API key is set; see _common.py).
"""

from __future__ import annotations

import anyio
from _common import model
from pydantic import BaseModel, ValidationError

from llm_worker import Message, Worker
from llm_worker.hooks import ContinueWithMessages, TurnEndContext
from llm_worker.testing import ScriptedResponse


class Forecast(BaseModel):
    city: str
    temperature_c: float
    conditions: str


def parse(text: str) -> Forecast:
    # Models like to wrap JSON in a Markdown fence; accept that much.
    body = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```")
    return Forecast.model_validate_json(body)


async def require_forecast_json(ctx: TurnEndContext) -> ContinueWithMessages | None:
    try:
        forecast = parse(ctx.text)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}" for e in exc.errors()
        )
        print(f"✗ answer {ctx.continuations + 1} is not a valid Forecast: {problems}")
        print("  → asking the model to fix it")
        fix = (
            f"Your answer is not valid: {problems}. Reply with only a JSON object with the "
            f"fields city (string), temperature_c (number) and conditions (string)."
        )
        return ContinueWithMessages([Message.user(fix)])
    print(f"✓ answer {ctx.continuations + 1} is a valid Forecast: {forecast!r}")
    return None  # None means Finish: the answer is final


SCRIPT = [
    # A first answer with a word where a number belongs and a missing field.
    ScriptedResponse.text('{"city": "Kyoto", "temperature_c": "warm"}'),
    ScriptedResponse.text('{"city": "Kyoto", "temperature_c": 21.5, "conditions": "clear"}'),
]


async def main() -> None:
    async with model(SCRIPT, provider="openai_chat") as (client, server):
        worker = Worker(
            client,
            system="You answer with JSON only.",
            max_continuations=2,  # at most two requests for a fix
        )
        worker.add_on_turn_end_hook(require_forecast_json)
        result = await worker.run(
            "Give tomorrow's forecast for Kyoto as JSON with city, temperature_c and conditions."
        )
        print(f"{result.status.value} after {result.requests} requests: {result.text}")
        if server is not None:
            last = server.requests[-1].body.decode()
            print(f"the fix request reached the model: {'Your answer is not valid' in last}")
    forecast = parse(result.text)
    print(f"forecast.temperature_c = {forecast.temperature_c}")


if __name__ == "__main__":
    anyio.run(main)
