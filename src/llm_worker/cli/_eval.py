"""`llm-worker eval cases.py`: a Worker run over a file's cases, from cassettes or live, as a table.

The file defines `cases` (a list of `llm_worker.testing.EvalCase`) and `make_worker()` (a
fresh `Worker` per case). Each case replays its cassette (`<folder>/<case name>.jsonl`) by
default; `--record` / `--record-new` record them against the real API, `--live` runs without
cassettes. The table shows each case's status, requests, tokens, cost, time and answer, so
two prompts can be compared run against run; scoring is left to a scorer of your own. It is
a rich table when rich (the `cli` extra) is installed, plain text otherwise: this command
alone runs without it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from llm_worker._json import as_list
from llm_worker.errors import ConfigurationError
from llm_worker.testing._cassette import CassetteMode
from llm_worker.testing._eval import COLUMNS, CaseResult, EvalCase, format_table, run_cases
from llm_worker.testing._eval import table_rows as rows_of

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ("run_eval",)

_RIGHT = frozenset({"requests", "input", "output", "cost $", "seconds"})


async def run_eval(
    console: Console | None, path: Path, *, cassettes: Path | None, mode: CassetteMode | None
) -> int:
    """Run the file's cases and print the table; 1 if a case failed, else 0.

    Args:
        console: Where the rich table goes; `None` prints a plain one to stdout.
        path: The cases file.
        cassettes: The cassettes' folder (default: `cassettes/<file name>` beside the file).
        mode: The cassettes' mode, or `None` to run live.

    Raises:
        ConfigurationError: The file cannot be loaded, or lacks `cases` or `make_worker`.
    """
    module = _load(path)
    cases, make_worker = _contents(module, path)
    folder = None if mode is None else cassettes or path.parent / "cassettes" / path.stem
    results = await run_cases(make_worker, cases, cassettes=folder, mode=mode or "replay")
    title = f"{path.name}: {len(results)} case(s), {_source(folder, mode)}"
    if console is None:
        print(f"{title}\n{format_table(results)}")
    else:
        _print(console, title, results)
    return 0 if all(r.error is None for r in results) else 1


def _print(console: Console, title: str, results: list[CaseResult]) -> None:
    from rich.table import Table

    table = Table(title=title)
    for column in COLUMNS:
        table.add_column(column, justify="right" if column in _RIGHT else "left")
    for row in rows_of(results):
        table.add_row(*row)
    console.print(table)


def _source(folder: Path | None, mode: CassetteMode | None) -> str:
    return "live" if folder is None else f"cassettes in {folder} ({mode})"


def _load(path: Path) -> ModuleType:
    if not path.is_file():
        raise ConfigurationError(f"no cases file at {path}")
    spec = importlib.util.spec_from_file_location(f"_llm_worker_eval_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ConfigurationError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent.resolve()))  # the file may import its neighbours
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's file: whatever it raised, named with the file
        raise ConfigurationError(f"{path} raised while loading: {exc!r}") from exc
    finally:
        sys.path.remove(str(path.parent.resolve()))
    return module


def _contents(module: ModuleType, path: Path) -> tuple[list[EvalCase], Any]:
    raw: object = getattr(module, "cases", None)
    cases = as_list(raw)
    make_worker: object = getattr(module, "make_worker", None)
    if cases is not raw or not callable(make_worker):
        raise ConfigurationError(
            f"{path} must define `cases` (a list of llm_worker.testing.EvalCase) and "
            "`make_worker()` (a fresh Worker per case)"
        )
    found = [c for c in cases if isinstance(c, EvalCase)]
    if len(found) != len(cases):
        raise ConfigurationError(f"{path}: every item of `cases` must be an EvalCase")
    return found, make_worker
