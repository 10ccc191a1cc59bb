"""`llm-worker eval cases.py` and `run_cases`: cases recorded once, replayed into a table."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from llm_worker import Worker
from llm_worker.cli import main
from llm_worker.providers import from_string
from llm_worker.testing import (
    EvalCase,
    ScriptedModelServer,
    ScriptedRequest,
    ScriptedResponse,
    format_table,
    run_cases,
)
from llm_worker.testing._eval import COLUMNS

CASES = """
import os
from llm_worker import Worker
from llm_worker.providers import from_string
from llm_worker.testing import EvalCase

cases = [EvalCase("greeting", "Say hi"), EvalCase("sum / 1", "What is 2 + 2?")]


def make_worker():
    client = from_string("openai:scripted-model", base_url=os.environ["EVAL_URL"], api_key="k")
    return Worker(client, system="Be brief.")
"""


def answer(call: ScriptedRequest) -> ScriptedResponse:
    return ScriptedResponse.text("Four." if "2 + 2" in call.request.messages[-1].text else "Hi!")


def test_eval_records_then_replays_each_case_into_a_table(
    tmp_path: Path,
    serve: Any,
    offline_env: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cases = tmp_path / "cases.py"
    cases.write_text(CASES)
    with serve(ScriptedModelServer("openai_chat", answer)) as server:
        monkeypatch.setenv("EVAL_URL", server.base_url + "/v1")
        assert main(["eval", str(cases), "--record"]) == 0
    recorded = capsys.readouterr().out
    assert (tmp_path / "cassettes" / "cases" / "greeting.jsonl").exists()
    assert (tmp_path / "cassettes" / "cases" / "sum-1.jsonl").exists()
    monkeypatch.setenv("EVAL_URL", "http://127.0.0.1:9/v1")  # the model is gone
    assert main(["eval", str(cases)]) == 0
    out = capsys.readouterr().out
    for text in ("greeting", "sum / 1", "finished", "Four.", "Hi!", "(replay)"):
        assert text in out
    assert "(record)" in recorded
    # A changed prompt: that case fails with the miss, the other still runs; exit code 1.
    cases.write_text(CASES.replace("Say hi", "Say hello"))
    assert main(["eval", str(cases)]) == 1
    out = capsys.readouterr().out
    assert "error:" in out and "Four." in out


def test_eval_prints_a_plain_table_without_rich(
    tmp_path: Path,
    serve: Any,
    offline_env: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cases = tmp_path / "cases.py"
    cases.write_text(CASES)
    monkeypatch.setitem(sys.modules, "rich.console", None)  # `import rich.console` fails
    with serve(ScriptedModelServer("openai_chat", answer)) as server:
        monkeypatch.setenv("EVAL_URL", server.base_url + "/v1")
        assert main(["eval", str(cases), "--live"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "cases.py: 2 case(s), live"
    assert lines[1].split()[:2] == ["case", "status"]
    assert lines[2].startswith("greeting ") and lines[2].endswith("Hi!")
    assert main(["chat", "--model", "openai:m"]) == 1  # the other commands still need rich
    assert "needs the 'cli' extra" in capsys.readouterr().err


def test_eval_names_what_a_cases_file_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = tmp_path / "empty.py"
    cases.write_text("x = 1\n")
    assert main(["eval", str(cases)]) == 1
    assert "must define `cases`" in capsys.readouterr().err


@pytest.mark.anyio
async def test_run_cases_keeps_each_result_and_formats_a_plain_table(tmp_path: Path) -> None:
    url = ""

    def make_worker() -> Worker[Any]:
        return Worker(from_string("anthropic:scripted-model", base_url=url, api_key="k"))

    async with ScriptedModelServer("anthropic", answer) as server:
        url = server.base_url

        cases = [EvalCase("a", "What is 2 + 2?", expected="Four."), EvalCase("b", "hi")]
        live = await run_cases(make_worker, cases)
        recorded = await run_cases(make_worker, cases, cassettes=tmp_path, mode="record")
    replayed = await run_cases(make_worker, cases, cassettes=tmp_path)
    for results in (live, recorded, replayed):
        assert [r.result.text for r in results if r.result] == ["Four.", "Hi!"]
    assert [r.case.expected for r in replayed] == ["Four.", None]
    table = format_table(replayed).splitlines()
    assert table[0].split() == [c for column in COLUMNS for c in column.split()]
    assert table[1].startswith("a ") and "finished" in table[1] and "Four." in table[1]
