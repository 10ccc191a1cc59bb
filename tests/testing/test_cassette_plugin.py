"""The pytest plugin, driven with pytester: record, replay by default, a diff, strict, `=new`."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

KEY = "sk-plugin-Canary0123456789abcdefGHIJKL"

AGENT_TEST = f'''
import pytest
from llm_worker import Worker
from llm_worker.testing import ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio
PROMPT = "Weather in Paris?"
ANSWERS = {{"Weather in Paris?": "Sunny.", "Weather in Oslo?": "Snow."}}


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def ask(cassette, prompt):
    if cassette.mode == "replay":  # no model at all: the cassette answers
        async with cassette.client("anthropic:scripted-model") as client:
            return (await Worker(client).run(prompt)).text
    answer = ScriptedResponse.text(ANSWERS[prompt])
    async with ScriptedModelServer("anthropic", [answer]) as server:
        async with cassette.client(
            "anthropic:scripted-model", base_url=server.base_url, api_key="{KEY}"
        ) as client:
            return (await Worker(client).run(prompt)).text


async def test_weather(cassette):
    assert await ask(cassette, PROMPT) == "Sunny."
'''

SECOND_TEST = """

async def test_oslo(cassette):
    assert await ask(cassette, "Weather in Oslo?") == "Snow."
"""


def test_the_plugin_is_installed_by_its_entry_point() -> None:
    found = entry_points(group="pytest11", name="llm_worker")
    assert [e.value for e in found] == ["llm_worker.testing.pytest_plugin"]


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # Only the plugins these runs need: the environment's others cost seconds per run.
    plugins = ("-p", "anyio", "-p", "llm_worker.testing.pytest_plugin", "-p", "no:cacheprovider")
    return pytester.runpytest_inprocess(*plugins, *args)


@pytest.fixture
def recorded(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(test_agent=AGENT_TEST)
    run(pytester, "--llm-record").assert_outcomes(passed=1)
    path = pytester.path / "cassettes" / "test_agent" / "test_weather.jsonl"
    assert path.exists()
    return path


def test_a_recorded_test_replays_by_default_with_the_model_gone(
    pytester: pytest.Pytester, recorded: Path
) -> None:
    text = recorded.read_text()
    assert "Sunny." in text and "Weather in Paris?" in text
    assert KEY[:12] not in text and KEY[-12:] not in text
    run(pytester).assert_outcomes(passed=1)


def test_a_changed_prompt_fails_the_test_with_the_diff(
    pytester: pytest.Pytester, recorded: Path
) -> None:
    source = pytester.path / "test_agent.py"
    source.write_text(source.read_text().replace('PROMPT = "Weather in Paris?"', 'PROMPT = "x"'))
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*CassetteMissError*", "*messages[[]0[]].content[[]0[]].text: differs at character 1*"]
    )


def test_strict_fails_a_test_that_left_a_recording_unused(
    pytester: pytest.Pytester, recorded: Path
) -> None:
    lines = recorded.read_text().splitlines()
    recorded.write_text("\n".join([*lines, *lines[1:]]) + "\n")  # the exchange twice
    result = run(pytester)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*CassetteUnusedError*", "*recording 2 (anthropic*"])
    source = pytester.path / "test_agent.py"
    marked = "@pytest.mark.llm_cassette(strict=False)\nasync def test_weather"
    source.write_text(source.read_text().replace("async def test_weather", marked))
    run(pytester).assert_outcomes(passed=1)


def test_record_new_keeps_the_recorded_and_adds_the_missing(
    pytester: pytest.Pytester, recorded: Path
) -> None:
    before = recorded.read_text()
    source = pytester.path / "test_agent.py"
    source.write_text(source.read_text() + SECOND_TEST)
    run(pytester).assert_outcomes(passed=1, failed=1)  # no cassette for the new test yet
    run(pytester, "--llm-record=new").assert_outcomes(passed=2)
    assert recorded.read_text() == before  # replayed, not recorded again
    assert (recorded.parent / "test_oslo.jsonl").exists()
    run(pytester).assert_outcomes(passed=2)
