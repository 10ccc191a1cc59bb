"""The pytest plugin of llm-worker: a `cassette` fixture per test, replayed unless told to record.

Installed with the package (entry point `pytest11`), it adds an option, an ini setting, a
marker and the fixture, and does nothing in a test that does not ask for `cassette`.

- `cassette`: a `Cassette` at `<test folder>/cassettes/<module>/<test name>.jsonl`, in replay
  mode; `--llm-record` records every test's cassette again (the real API, its key from the
  environment), `--llm-record=new` records only the requests a cassette lacks (`"auto"`).
- At the end of a test that passed, a recording it never requested fails it (turn off with
  `@pytest.mark.llm_cassette(strict=False)`).
- `@pytest.mark.llm_cassette(...)` passes options to the test's `Cassette` (`ignore`,
  `ignore_patterns`, `secrets`, `secret_patterns`, `chunking`, `timing`, `path`).
- The ini setting `llm_cassette_dir` names the folder (relative to each test file's).

Example:
    ```python
    @pytest.mark.anyio
    async def test_weather(cassette):
        async with cassette.client("anthropic:claude-sonnet-4-5") as client:
            result = await Worker(client, tools=[weather]).run("Weather in Paris?")
        assert "Paris" in result.text
    ```
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from llm_worker.testing._cassette import Cassette, CassetteMode

__all__ = ("cassette",)

_CALL = pytest.StashKey["pytest.TestReport"]()
_MODES: dict[str | None, CassetteMode] = {None: "replay", "all": "record", "new": "auto"}


def pytest_addoption(parser: pytest.Parser) -> None:
    """`--llm-record[=all|new]` and the `llm_cassette_dir` ini setting."""
    group = parser.getgroup("llm-worker", "llm-worker cassettes")
    group.addoption(
        "--llm-record",
        nargs="?",
        const="all",
        default=None,
        choices=("all", "new"),
        dest="llm_record",
        help="record the `cassette` fixtures against the real API (all: every request "
        "again; new: only requests a cassette has no recording of). Replay by default.",
    )
    parser.addini(
        "llm_cassette_dir",
        "folder of the `cassette` fixtures' files, relative to each test file's folder",
        default="cassettes",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Declare the `llm_cassette` marker."""
    config.addinivalue_line(
        "markers",
        "llm_cassette(**options): options of the test's cassette (ignore, ignore_patterns, "
        "secrets, secret_patterns, strict, chunking, timing, path)",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep each test's call report: the fixture checks unused recordings only if it passed."""
    report = yield
    if report.when == "call":
        item.stash[_CALL] = report
    return report


@pytest.fixture
def cassette(request: pytest.FixtureRequest) -> Iterator[Cassette]:
    """The test's cassette (replayed unless `--llm-record`); see the module's docstring."""
    from llm_worker.testing._cassette import Cassette

    marker = request.node.get_closest_marker("llm_cassette")
    options: dict[str, Any] = dict(marker.kwargs) if marker else {}
    strict = bool(options.pop("strict", True))
    path = Path(options.pop("path", None) or _path(request))
    mode = _MODES[request.config.getoption("llm_record")]
    # strict=False: unused recordings are checked here, once the test's blocks have all ended.
    tape = Cassette(path, mode=mode, strict=False, **options)
    yield tape
    report = request.node.stash.get(_CALL, None)
    if strict and report is not None and report.passed:
        tape.assert_all_used()


def _path(request: pytest.FixtureRequest) -> Path:
    from llm_worker.testing._cassette_file import file_name

    folder = Path(request.node.path).parent / str(request.config.getini("llm_cassette_dir"))
    module = Path(request.node.path).stem
    # `TestClass::test_name[param]` -> `TestClass.test_name-param`
    name = request.node.nodeid.split("::", 1)[-1].replace("::", ".")
    return folder / module / (file_name(name) + ".jsonl")
