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
