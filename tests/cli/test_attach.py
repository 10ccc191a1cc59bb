"""`--image PATH` / `--file PATH` on `run` and `chat`: the files reach the model as parts."""

from __future__ import annotations

import base64
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from llm_worker.cli import main
from llm_worker.testing import ScriptedModelServer, ScriptedResponse
from support.media import PDF, png

PNG = png(3, 3)


def files(tmp_path: Path) -> tuple[Path, Path, Path]:
    (tmp_path / "cat.png").write_bytes(PNG)
    (tmp_path / "paper.pdf").write_bytes(PDF)
    (tmp_path / "notes.md").write_text("remember the milk\n")
    return tmp_path / "cat.png", tmp_path / "paper.pdf", tmp_path / "notes.md"


def test_run_sends_the_prompt_with_images_and_files_in_order(
    serve: Any, capsys: pytest.CaptureFixture[str], offline_env: Any, tmp_path: Path
) -> None:
    cat, paper, notes = files(tmp_path)
    with serve(ScriptedModelServer("anthropic", [ScriptedResponse.text("A cat.")])) as server:
        base = ["--model", "anthropic:m", "--base-url", server.base_url, "--api-key", "k"]
        args = ["--file", str(paper), "--image", str(cat), "--file", str(notes)]
        code = main(["run", "What are these?", *base, *args])
    out, err = capsys.readouterr()
    assert code == 0
    assert out.startswith("A cat.")
    assert "attached: paper.pdf (application/pdf, " in err and "cat.png (image/png, " in err
    [message] = server.requests[0].json()["messages"]
    assert message["content"] == [
        {"type": "text", "text": "What are these?"},
        {
            "type": "document",
            "source": {
                "type": "base64",
                "media_type": "application/pdf",
                "data": base64.b64encode(PDF).decode(),
            },
            "title": "paper.pdf",
        },
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": base64.b64encode(PNG).decode(),
            },
        },
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "remember the milk\n"},
            "title": "notes.md",
            "cache_control": {"type": "ephemeral"},  # prompt caching: the sliding breakpoint
        },
    ]


def test_run_json_keeps_the_image_in_the_messages(
    serve: Any, capsys: pytest.CaptureFixture[str], offline_env: Any, tmp_path: Path
) -> None:
    cat, _, _ = files(tmp_path)
    with serve(ScriptedModelServer("gemini", [ScriptedResponse.text("A cat.")])) as server:
        base = ["--model", "gemini:gemini-2.5-flash", "--base-url", server.base_url]
        code = main(["run", "What?", "--json", *base, "--api-key", "k", "--file", str(cat)])
    result = json.loads(capsys.readouterr().out)
    assert code == 0
    assert result["messages"][0]["content"][1]["data"] == base64.b64encode(PNG).decode()
    parts = server.requests[0].json()["contents"][0]["parts"]
    assert parts[1] == {
        "inlineData": {"mimeType": "image/png", "data": base64.b64encode(PNG).decode()}
    }


def test_chat_sends_the_files_with_the_first_message_only(
    serve: Any,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    offline_env: Any,
    tmp_path: Path,
) -> None:
    cat, _, _ = files(tmp_path)
    answers = [ScriptedResponse.text("A cat."), ScriptedResponse.text("Grey.")]
    monkeypatch.setattr(sys, "stdin", io.StringIO("what is it?\nwhat colour?\n"))
    with serve(ScriptedModelServer("openai_chat", answers)) as server:
        base = ["--model", "openai:m", "--base-url", f"{server.base_url}/v1", "--api-key", "k"]
        assert main(["chat", *base, "--image", str(cat)]) == 0
    out = capsys.readouterr().out
    assert "attached: cat.png (image/png, " in out
    messages = server.requests[1].json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[0]["content"][1]["type"] == "image_url"
    assert messages[2]["content"] == "what colour?"


BAD = [
    ("--image", b"%PDF-1.4\n", "ImagePart: .*paper is application/pdf data"),
    ("--file", b"\x00\x01\x02 binary", "DocumentPart: .*paper is of no known format"),
    ("--image", None, "cannot read --image .*paper: No such file"),
]


@pytest.mark.parametrize("case", BAD)
def test_a_bad_attachment_is_one_error_line_before_any_request(
    serve: Any,
    capsys: pytest.CaptureFixture[str],
    offline_env: Any,
    tmp_path: Path,
    case: tuple[str, bytes | None, str],
) -> None:
    option, content, message = case
    path = tmp_path / "paper"
    if content is not None:
        path.write_bytes(content)
    with serve(ScriptedModelServer("openai_chat", [])) as server:
        base = ["--model", "openai:m", "--base-url", f"{server.base_url}/v1", "--api-key", "k"]
        code = main(["run", "hi", *base, option, str(path)])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert re.search(message, err), err
    assert server.requests == []


def test_a_tool_result_image_is_shown_as_what_it_is_not_as_bytes() -> None:
    from rich.console import Console

    from llm_worker import ImagePart
    from llm_worker.cli._render import Renderer
    from llm_worker.state import ToolResultReady
    from llm_worker.tools import ToolResult

    console = Console(record=True, width=100, color_system=None)
    result = ToolResult("c1", "screenshot", "the screen", media=[ImagePart.from_bytes(PNG)])
    Renderer(console)(ToolResultReady(result))
    shown = console.export_text()
    assert "← screenshot\n  │ the screen\n  │ [image: image/png]\n" in shown
    assert "PNG" not in shown
