"""`llm-worker run`: one prompt streamed or as JSON, and the errors a new user meets."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llm_worker.cli import main
from llm_worker.events import UsageEvent
from llm_worker.messages import ThinkingPart, ToolUsePart
from llm_worker.testing import ScriptedModelServer, ScriptedResponse, WireResponse, WireServer

USAGE = UsageEvent(input_tokens=120, output_tokens=30, cache_read_input_tokens=100)


def run_args(server: Any, *extra: str) -> list[str]:
    return ["--model", "openai:m", "--base-url", f"{server.base_url}/v1", "--api-key", "k", *extra]


def one_error_line(err: str) -> str:
    """The whole of stderr is one line starting with `error:`."""
    assert err.endswith("\n")
    assert err.count("\n") == 1, err
    assert err.startswith("error: "), err
    assert "Traceback" not in err
    return err


def test_run_json_prints_the_result(
    serve: Any, capsys: pytest.CaptureFixture[str], offline_env: Any
) -> None:
    answer = ScriptedResponse.text("Four.", usage=USAGE)
    with serve(ScriptedModelServer("openai_chat", [answer])) as server:
        code = main(
            [
                "run",
                "What is 2 + 2?",
                "--json",
                *run_args(server, "--system", "Answer in one word.", "--thinking", "high"),
                "--max-tokens",
                "64",
            ]
        )
    out, err = capsys.readouterr()
    assert code == 0
    assert err == ""
    result = json.loads(out)  # stdout is the JSON and nothing else
    assert result["status"] == "finished"
    assert result["text"] == "Four."
    assert result["requests"] == 1
    assert result["usage"]["input_tokens"] == 120
    assert result["usage"]["output_tokens"] == 30
    assert result["usage"]["cache_read_input_tokens"] == 100
    assert [m["role"] for m in result["messages"]] == ["user", "assistant"]
    body = server.requests[0].json()
    assert body["messages"][0] == {"role": "system", "content": "Answer in one word."}
    assert body["reasoning_effort"] == "high"
    assert body["max_completion_tokens"] == 64


def test_run_streams_the_answer_to_stdout_and_the_rest_to_stderr(
    serve: Any,
    capsys: pytest.CaptureFixture[str],
    offline_env: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "notes.txt").write_text("buy milk\n")
    monkeypatch.chdir(tmp_path)
    answers = [
        ScriptedResponse(
            [
                ThinkingPart("I should read the notes."),
                ToolUsePart("", "read_file", {"path": "notes.txt"}),
            ]
        ),
        ScriptedResponse.text("Your notes say: buy milk."),
    ]
    with serve(ScriptedModelServer("openai_responses", answers)) as server:
        args = ["run", "Read my notes", "--tools", "--model", "openai-responses:m"]
        code = main([*args, "--base-url", f"{server.base_url}/v1", "--api-key", "k"])
    out, err = capsys.readouterr()
    assert code == 0
    assert out == "Your notes say: buy milk.\n"
    assert "thinking: I should read the notes." in err
    assert '→ read_file {"path":"notes.txt"}' in err
    assert "← read_file" in err
    assert "buy milk" in err
    assert "usage: 2 requests" in err
    # the tool result went back to the model
    assert "buy milk" in server.requests[1].body.decode()


def test_run_with_the_tools_option_offers_folder_tools_only_then(
    serve: Any, capsys: pytest.CaptureFixture[str], offline_env: Any
) -> None:
    with serve(
        ScriptedModelServer(
            "anthropic", [ScriptedResponse.text("Hi."), ScriptedResponse.text("Hi.")]
        )
    ) as server:
        base = ["--model", "anthropic:m", "--base-url", server.base_url, "--api-key", "k"]
        assert main(["run", "hi", *base]) == 0
        assert main(["run", "hi", "--tools", *base]) == 0
    assert "tools" not in server.requests[0].json()
    names = [t["name"] for t in server.requests[1].json()["tools"]]
    assert names == ["list_files", "read_file"]
    capsys.readouterr()


def test_missing_key(capsys: pytest.CaptureFixture[str], offline_env: Any) -> None:
    assert main(["run", "hi", "--model", "anthropic:claude-sonnet-4-5"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    line = one_error_line(err)
    assert "no API key for anthropic:claude-sonnet-4-5" in line
    assert "ANTHROPIC_API_KEY" in line
    assert "--api-key" in line


@pytest.mark.parametrize("model", ["gpt-4o", "mistral:large", "openai:"])
def test_unknown_model_string(
    model: str, capsys: pytest.CaptureFixture[str], offline_env: Any
) -> None:
    assert main(["run", "hi", "--model", model]) == 1
    line = one_error_line(capsys.readouterr().err)
    assert f"unknown model string {model!r}" in line
    assert "anthropic:claude-sonnet-4-5" in line  # an example of the right form


def test_unreachable_server(capsys: pytest.CaptureFixture[str], offline_env: Any) -> None:
    with socket.socket() as sock:  # a port nobody listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        code = main(
            ["run", "hi", "--model", "openai:m", "--base-url", f"http://127.0.0.1:{port}/v1"]
        )
    assert code == 1
    line = one_error_line(capsys.readouterr().err)
    assert f"could not reach http://127.0.0.1:{port}/v1" in line


def test_refused_key(serve: Any, capsys: pytest.CaptureFixture[str], offline_env: Any) -> None:
    refusal = WireResponse(
        {
            "error": {
                "type": "invalid_request_error",
                "code": "invalid_api_key",
                "message": "Bad key",
            }
        },
        status=401,
        content_type="application/json",
    )

    with serve(WireServer([refusal])) as server:
        args = ["run", "hi", "--model", "openai:m", "--base-url", f"{server.base_url}/v1"]
        assert main([*args, "--api-key", "sk-secret"]) == 1
    line = one_error_line(capsys.readouterr().err)
    assert "Bad key" in line
    assert "sk-secret" not in line


def test_bad_thinking_value_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["run", "hi", "--model", "openai:m", "--thinking", "lots"])
    assert exit_.value.code == 2
    assert "expected a token budget (e.g. 2048) or an effort" in capsys.readouterr().err


@pytest.mark.parametrize("effort", ["none", "xhigh", "max"])
def test_every_effort_level_is_a_thinking_value(effort: str) -> None:
    from llm_worker.cli._chat import parse_thinking
    from llm_worker.messages import ThinkingConfig

    assert parse_thinking(effort) == ThinkingConfig(effort=effort)  # type: ignore[arg-type]


def test_errors_in_a_child_process_are_one_line(offline_env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "llm_worker.cli", "run", "hi", "--model", "gemini:gemini-2.5-flash"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=offline_env,
        timeout=30,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == b""
    line = one_error_line(done.stderr.decode())
    assert "GEMINI_API_KEY or GOOGLE_API_KEY" in line


SCHEMA = {
    "title": "Answer",
    "type": "object",
    "properties": {"value": {"type": "integer"}, "unit": {"type": "string"}},
    "required": ["value", "unit"],
}


def test_run_output_schema_prints_the_validated_json(
    serve: Any, capsys: pytest.CaptureFixture[str], offline_env: Any, tmp_path: Path
) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    script = [
        ScriptedResponse.text("four"),  # not JSON: sent back, then answered right
        ScriptedResponse.text('{"value": 4, "unit": "apples"}'),
    ]
    with serve(ScriptedModelServer("openai_chat", script)) as server:
        code = main(["run", "2 + 2 apples?", *run_args(server, "--output-schema", str(schema))])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out) == {"value": 4, "unit": "apples"}
    body = server.requests[0].json()
    assert body["response_format"]["json_schema"]["name"] == "Answer"
    assert body["response_format"]["json_schema"]["strict"] is True


def test_run_output_schema_with_json_carries_the_output(
    serve: Any, capsys: pytest.CaptureFixture[str], offline_env: Any, tmp_path: Path
) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    answer = ScriptedResponse.text('{"value": 4, "unit": "pears"}')
    with serve(ScriptedModelServer("openai_chat", [answer])) as server:
        code = main(["run", "?", "--json", *run_args(server, "--output-schema", str(schema))])
    out, _ = capsys.readouterr()
    assert code == 0
    assert json.loads(out)["output"] == {"value": 4, "unit": "pears"}


def test_run_output_schema_that_never_validates_is_one_error_line(
    serve: Any, capsys: pytest.CaptureFixture[str], offline_env: Any, tmp_path: Path
) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    script = [ScriptedResponse.text("no"), ScriptedResponse.text('{"value": "x"}')]
    with serve(ScriptedModelServer("openai_chat", script)) as server:
        code = main(["run", "?", *run_args(server, "--output-schema", str(schema))])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    assert "did not match the output type after 2 attempts" in one_error_line(err)


@pytest.mark.parametrize(
    ("content", "problem"),
    [(None, "cannot read"), ("{not json", "is not JSON"), ("[1]", "is not a JSON Schema")],
)
def test_run_output_schema_file_problems_are_usage_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str | None, problem: str
) -> None:
    schema = tmp_path / "schema.json"
    if content is not None:
        schema.write_text(content)
    args = ["run", "?", "--model", "openai:m", "--output-schema", str(schema)]
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    assert problem in capsys.readouterr().err
