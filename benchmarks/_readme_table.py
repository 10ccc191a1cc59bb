"""README's performance table, from the rows of one `peers.py --readme` run.

`uv sync --group bench && uv run --group bench python benchmarks/peers.py --readme` measures
the Chat Completions streams (20,000 deltas in one write; 2,000 one per read) for the subjects
below and prints the table to paste into README.md ("Benchmarks"), with the run's date, load
and commit, so the README's figures are always one run's.
"""

from __future__ import annotations

import statistics
import subprocess
from pathlib import Path

# Subject -> its row's label, in the README's order; the default's rows in bold.
SUBJECTS = {
    "raw_aiohttp": "the limit: raw aiohttp, split by hand + orjson",
    "ours_default": "**llm-worker `OpenAIChatClient`, the default**",
    "ours_httpx": 'llm-worker `OpenAIChatClient`, `transport="httpx"`',
    "worker_default": "**llm-worker `Worker.stream`, the default**",
    "raw_aiohttp_lines": "raw aiohttp, its own line reader + orjson",
    "openai_sdk": "openai SDK, `stream=True`",
    "openai_agents": "OpenAI Agents SDK, `Runner.run_streamed`",
    "pydantic_ai": "pydantic-ai, `run_stream`",
    "litellm": "litellm, `acompletion(stream=True)`",
}
COMMAND = "uv sync --group bench && uv run --group bench python benchmarks/peers.py --readme"


def _median(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if key in r]
    return statistics.median(values) if values else None


def _cells(runs: list[dict]) -> list[str]:
    """CPU µs per event and the ratio to the limit (the median of the rounds' ratios)."""
    cpu, ratio = _median(runs, "cpu_us"), _median(runs, "ratio")
    return ["—" if cpu is None else f"{cpu:.1f}", "—" if ratio is None else f"{ratio:.2f}"]


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=False, cwd=Path(__file__).parent)  # fmt: skip
    return done.stdout.strip() or "?"


COMMIT = _commit()  # at import: peers.py imports this module as its run starts


def table(text: dict[str, list[dict]], paced: dict[str, list[dict]], *, when: str,
          loads: tuple[float, float], rounds: int) -> str:  # fmt: skip
    """The README's paragraph head and table for the rows of the text and paced streams."""
    lines = [
        f"`{COMMAND}`, {when} at main `{COMMIT}`, median of {rounds} rounds; load average "
        f"{loads[0]:.1f} at the start, {loads[1]:.1f} at the end.",
        "",
        "| Chat Completions stream | 20,000 deltas in one write | \u00d7 the limit "
        "| one delta per read (paced) | \u00d7 the limit |",  # the sign as in the README
        "|---|---|---|---|---|",
    ]
    for subject, label in SUBJECTS.items():
        if subject not in text and subject not in paced:
            continue
        cells = _cells(text.get(subject, [])) + _cells(paced.get(subject, []))
        if label.startswith("**"):
            cells = [f"**{cell}**" for cell in cells]
        lines.append(f"| {label} | {' | '.join(cells)} |")
    return "\n".join(lines)
