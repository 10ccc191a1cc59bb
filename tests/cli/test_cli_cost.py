"""The CLI shows the estimated cost after each run (and says when the model has no price)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from llm_worker.cli import main
from llm_worker.events import UsageEvent
from llm_worker.testing import ScriptedModelServer, ScriptedResponse

USAGE = UsageEvent(input_tokens=1000, output_tokens=100, cache_read_input_tokens=200)


def args(server: Any, model: str) -> list[str]:
    return ["--model", model, "--base-url", f"{server.base_url}/v1", "--api-key", "k"]


def test_run_json_carries_the_cost_as_an_exact_decimal_string(
    serve: Any, capsys: pytest.CaptureFixture[str], offline_env: Any
) -> None:
    answer = ScriptedResponse.text("Four.", usage=USAGE)
    with serve(ScriptedModelServer("openai_chat", [answer], model="gpt-4o")) as server:
        code = main(["run", "2 + 2?", "--json", *args(server, "openai:gpt-4o")])
    out, _ = capsys.readouterr()
    assert code == 0
    # gpt-4o: $2.50 / M input, $1.25 / M cached input, $10 / M output
    assert Decimal(json.loads(out)["cost_usd"]) == Decimal("0.00325")


@pytest.mark.parametrize(("model", "shown"), [("gpt-4o", "cost $0.00325"), ("m", "cost unknown")])
def test_run_shows_the_cost_on_its_usage_line(
    serve: Any, capsys: pytest.CaptureFixture[str], offline_env: Any, model: str, shown: str
) -> None:
    answer = ScriptedResponse.text("Four.", usage=USAGE)
    # The server answers as that model: the cost prices the model that answered.
    with serve(ScriptedModelServer("openai_chat", [answer], model=model)) as server:
        code = main(["run", "2 + 2?", *args(server, f"openai:{model}")])
    _, err = capsys.readouterr()
    assert code == 0
    words = " ".join(err.split())  # the console may wrap the line at its width
    assert "usage: 1 request · input 1000 tokens (200 cached) · output 100 tokens · " + shown in (
        words
    )
