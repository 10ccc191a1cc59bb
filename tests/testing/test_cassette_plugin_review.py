"""Review probes of the pytest plugin kept as tests: a cassette the test never opens, a long
parameter id."""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.test_cassette_plugin import AGENT_TEST, run

pytest_plugins = ["pytester"]


@pytest.fixture
def agent(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    return pytester.makepyfile(test_agent=AGENT_TEST)


def test_strict_fails_a_test_that_no_longer_opens_its_recorded_cassette(
    pytester: pytest.Pytester, agent: Path
) -> None:
    # A test that stopped calling the model (a cache now answers) passed with its whole
    # cassette unused: the file was never read, so nothing counted as unused.
    run(pytester, "--llm-record").assert_outcomes(passed=1)
    agent.write_text(agent.read_text().replace("await ask(cassette, PROMPT)", '"Sunny."'))
    result = run(pytester)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*CassetteUnusedError: 1 recording(s)*", "*recording 1 (anthropic*"]
    )


def test_a_long_parameter_id_gets_a_cut_file_name_of_its_own(
    pytester: pytest.Pytester, agent: Path
) -> None:
    # An id of 300 characters made a file name the file system refused (ENAMETOOLONG).
    agent.write_text(
        agent.read_text()
        + """

@pytest.mark.parametrize("city", ["Paris", "Oslo"], ids=["p" * 300 + "1", "p" * 300 + "2"])
async def test_long(cassette, city):
    assert await ask(cassette, f"Weather in {city}?") in ("Sunny.", "Snow.")
"""
    )
    run(pytester, "--llm-record", "-k", "long").assert_outcomes(passed=2)
    names = sorted(p.name for p in (pytester.path / "cassettes" / "test_agent").iterdir())
    assert len(names) == 2 and all(len(n.encode()) <= 255 for n in names)
    assert names[0].startswith("test_long-ppp") and names[0] != names[1]
    run(pytester, "-k", "long").assert_outcomes(passed=2)
