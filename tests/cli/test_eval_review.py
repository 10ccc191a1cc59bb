"""Review probes of `llm-worker eval` kept as tests: broken cases files, cases sharing a file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llm_worker import Worker
from llm_worker.cli import main
from llm_worker.errors import ConfigurationError
from llm_worker.providers import from_string
from llm_worker.testing import EvalCase, ScriptedModelServer, ScriptedResponse, run_cases


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("cases = [\n", "raised while loading: SyntaxError"),
        ("import no_such_module_here\n", "ModuleNotFoundError"),
        ("cases = 3\ndef make_worker(): ...\n", "must define `cases`"),
        ("cases = ['a']\ndef make_worker(): ...\n", "every item of `cases` must be an EvalCase"),
        (
            "from llm_worker.testing import EvalCase\n"
            "cases = [EvalCase('a b', 'x'), EvalCase('a-b', 'y')]\ndef make_worker(): ...\n",
            "'a b' and 'a-b' would share the cassette a-b.jsonl",
        ),
    ],
    ids=["syntax", "import", "not-a-list", "not-cases", "one-file"],
)
def test_a_broken_cases_file_is_one_line_on_stderr_and_exit_1(
    source: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = tmp_path / "cases.py"
    cases.write_text(source)
    assert main(["eval", str(cases)]) == 1
    captured = capsys.readouterr()
    assert says in captured.err and "Traceback" not in captured.err + captured.out


@pytest.mark.anyio
async def test_cases_that_would_share_a_cassette_are_refused_before_any_runs(
    tmp_path: Path,
) -> None:
    # Two cases named alike recorded into one file: the second overwrote the first, whose
    # replay then missed (or, same prompt, answered with the other case's answer).
    made: list[Worker[Any]] = []

    def make_worker() -> Worker[Any]:
        made.append(Worker(from_string("openai:m", base_url="http://127.0.0.1:9", api_key="k")))
        return made[-1]

    same = [EvalCase("greet", "hi"), EvalCase("greet", "hello")]
    with pytest.raises(ConfigurationError, match="'greet' and 'greet' would share"):
        await run_cases(make_worker, same, cassettes=tmp_path, mode="record")
    assert made == []
    assert not (tmp_path / "greet.jsonl").exists()
    long = [EvalCase("x" * 300 + "1", "hi"), EvalCase("x" * 300 + "2", "hi")]
    results = await run_cases(make_worker, long, cassettes=tmp_path)  # distinct: no file yet
    assert [type(r.error).__name__ for r in results] == ["CassetteFileError"] * 2
    assert "File name too long" not in str(results[0].error)


def test_an_async_make_worker_runs_each_case(
    tmp_path: Path, serve: Any, offline_env: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # It made each case a TypeError row ("coroutine" is no async context manager).
    cases = tmp_path / "cases.py"
    cases.write_text(
        "from llm_worker import Worker\n"
        "from llm_worker.providers import from_string\n"
        "from llm_worker.testing import EvalCase\n"
        "cases = [EvalCase('one', 'hi')]\n"
        "async def make_worker():\n"
        "    return Worker(from_string('openai:m', base_url=URL, api_key='k'))\n"
    )
    with serve(ScriptedModelServer("openai_chat", [ScriptedResponse.text("Hi!")])) as server:
        source = cases.read_text().replace("URL", repr(server.base_url + "/v1"))
        cases.write_text(source)
        assert main(["eval", str(cases), "--live"]) == 0
    out = capsys.readouterr().out
    assert "finished" in out and "Hi!" in out
