"""A small evaluation helper: a Worker run over named cases, live or from cassettes, as a table.

No scoring of its own: `run_cases` collects each case's `RunResult`, usage, cost and time so
a prompt change can be compared run against run; a scorer (pydantic-evals, an assertion per
case in a parametrized pytest test) reads the results.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import KW_ONLY, dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from llm_worker.errors import ConfigurationError
from llm_worker.testing._cassette import Cassette, CassetteMode
from llm_worker.testing._cassette_file import file_name

if TYPE_CHECKING:
    from llm_worker.state import RunResult
    from llm_worker.worker import Worker

__all__ = (
    "COLUMNS",
    "CaseResult",
    "EvalCase",
    "case_file",
    "format_table",
    "run_cases",
    "table_rows",
)

COLUMNS: Final = ("case", "status", "requests", "input", "output", "cost $", "seconds", "answer")
"""The columns of `table_rows` (tokens in and out, the run's cost in US dollars)."""

_ANSWER: Final = 60


@dataclass(slots=True, frozen=True)
class EvalCase:
    """One input a Worker is evaluated on.

    Attributes:
        name: The case's name (its cassette is `<name>.jsonl`, made safe for a file name).
        input: The prompt.
        expected: What a scorer of your own compares the answer with (not read here).
        metadata: Anything else a scorer needs.
    """

    name: str
    input: str
    _: KW_ONLY
    expected: Any = None
    metadata: dict[str, Any] = field(default_factory=lambda: {})


@dataclass(slots=True)
class CaseResult:
    """How one case ran.

    Attributes:
        case: The case.
        result: The run's result, or `None` if it raised.
        error: What it raised (a miss of its cassette, a provider error), else `None`.
        seconds: The run's wall time.
    """

    case: EvalCase
    result: RunResult[Any] | None
    error: BaseException | None
    seconds: float

    @property
    def status(self) -> str:
        """`finished`, `paused`, `cancelled`, or `error: <ErrorType>`."""
        if self.result is None:
            return f"error: {type(self.error).__name__}"
        return self.result.status.value

    @property
    def cost(self) -> Decimal | None:
        """The run's price in US dollars, when every request's is known (`cost` extra)."""
        if self.result is None:
            return None
        try:
            return self.result.cost
        except Exception:  # the cost extra is not installed: no price, not a failed case
            return None


async def run_cases(
    make_worker: Callable[[], Worker[Any] | Awaitable[Worker[Any]]],
    cases: Iterable[EvalCase],
    *,
    cassettes: str | Path | None = None,
    mode: CassetteMode = "replay",
) -> list[CaseResult]:
    """Run a fresh Worker on each case, one after the other; a failing case is kept, not raised.

    Args:
        make_worker: Makes the Worker of one case (its client an HTTP provider client when
            cassettes are used); an `async def` too (a Worker whose MCP tools connect first).
        cases: The cases.
        cassettes: A folder of one cassette per case; `None` runs live.
        mode: The cassettes' mode (`"replay"`, `"record"`, `"auto"`).

    Raises:
        ConfigurationError: Two cases' names make one cassette file name.
    """
    cases = list(cases)
    if cassettes is not None:
        _distinct(cases)
    results: list[CaseResult] = []
    for case in cases:
        started = time.monotonic()
        try:
            made = make_worker()
            worker = await made if inspect.isawaitable(made) else made
            result = await _run(worker, case, cassettes, mode)
        except Exception as exc:  # a case's failure is its row, the next case still runs
            results.append(CaseResult(case, None, exc, time.monotonic() - started))
        else:
            results.append(CaseResult(case, result, None, time.monotonic() - started))
    return results


def _distinct(cases: list[EvalCase]) -> None:
    """Two cases with one cassette file would record over each other and replay the wrong one."""
    seen: dict[str, str] = {}
    for case in cases:
        name = case_file(case.name)
        if name in seen:
            raise ConfigurationError(
                f"cases {seen[name]!r} and {case.name!r} would share the cassette "
                f"{name}.jsonl: give them distinct names"
            )
        seen[name] = case.name


async def _run(
    worker: Worker[Any], case: EvalCase, cassettes: str | Path | None, mode: CassetteMode
) -> RunResult[Any]:
    async with worker:
        if cassettes is None:
            return await worker.run(case.input)
        cassette = Cassette(Path(cassettes) / f"{case_file(case.name)}.jsonl", mode=mode)
        async with cassette.wrap(worker):
            return await worker.run(case.input)


def case_file(name: str) -> str:
    """A case's name as a file name (see `file_name`; an empty one is `case`)."""
    return file_name(name, empty="case")


def table_rows(results: Iterable[CaseResult]) -> list[tuple[str, ...]]:
    """One row of text per case, in the order of `COLUMNS`."""
    rows: list[tuple[str, ...]] = []
    for item in results:
        result = item.result
        usage = result.usage if result is not None else None
        answer = result.text if result is not None else str(item.error)
        cost = item.cost
        rows.append(
            (
                item.case.name,
                item.status,
                str(result.requests) if result is not None else "-",
                str(usage.input_tokens) if usage is not None else "-",
                str(usage.output_tokens) if usage is not None else "-",
                f"{cost:.6f}" if cost is not None else "-",
                f"{item.seconds:.2f}",
                _cut(" ".join(answer.split())),
            )
        )
    return rows


def format_table(results: Iterable[CaseResult]) -> str:
    """The results as a plain-text table (`llm-worker eval` prints it with rich)."""
    rows = [COLUMNS, *table_rows(results)]
    widths = [max(len(row[n]) for row in rows) for n in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(line.rstrip() for line in lines)


def _cut(text: str) -> str:
    return text if len(text) <= _ANSWER else text[: _ANSWER - 1] + "…"
