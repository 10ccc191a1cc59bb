"""`llm-worker chat` with piped input (no terminal), in-process."""

from __future__ import annotations

import io
import sys
from typing import Any

import pytest

from llm_worker.cli import main
from llm_worker.testing import ScriptedModelServer, ScriptedResponse


def test_chat_reads_turns_from_a_pipe_until_end_of_input(
    serve: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    offline_env: Any,
) -> None:
    answers = [ScriptedResponse.text("One."), ScriptedResponse.text("Two.")]
    monkeypatch.setattr(sys, "stdin", io.StringIO("first\n\n   \nsecond\n"))  # blank lines skipped
    with serve(ScriptedModelServer("anthropic", answers)) as server:
        base = ["--model", "anthropic:m", "--base-url", server.base_url, "--api-key", "k"]
        assert main(["chat", *base, "--thinking", "1024", "--max-tokens", "2000"]) == 0
    out = capsys.readouterr().out
    assert "you> first\nOne.\n" in out
    assert "you> second\nTwo.\n" in out
    assert out.count("usage: 1 request") == 2
    assert len(server.requests) == 2
    body = server.requests[1].json()
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["thinking"]["budget_tokens"] == 1024
    assert body["max_tokens"] == 2000


def test_chat_output_schema_asks_for_it_and_retries_an_invalid_answer(
    serve: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    offline_env: Any,
    tmp_path: Any,
) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(
        '{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}'
    )
    answers = [ScriptedResponse.text('{"n": "two"}'), ScriptedResponse.text('{"n": 2}')]
    monkeypatch.setattr(sys, "stdin", io.StringIO("one plus one\n"))
    with serve(ScriptedModelServer("gemini", answers)) as server:
        base = ["--model", "gemini:m", "--base-url", server.base_url, "--api-key", "k"]
        assert main(["chat", *base, "--output-schema", str(schema)]) == 0
    out = capsys.readouterr().out
    assert '{"n": 2}' in out
    assert len(server.requests) == 2
    config = server.requests[0].json()["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"]["required"] == ["n"]
    assert "n: expected integer" in str(server.requests[1].json()["contents"])
