"""`inspect`'s `grep:PATTERN`: the lines of a text, or the entries of JSON, that match a pattern.

The pattern comes from the model, so the work is bounded three ways: the pattern is at most
`MAX_PATTERN` characters, each line or entry is searched in its first `MAX_LINE` characters
only, and the whole search shares a budget of `SECONDS` seconds, enforced inside each match by
the `regex` module's `timeout` (the standard `re` cannot be interrupted, so one catastrophic
pattern could hang the worker). A search out of time stops and says how far it got. Only the
matches the page can show are kept; the others are counted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from llm_worker.blobs._selectors import RESERVE, Body, GrepSelector, quoted, render
from llm_worker.errors import ToolError

__all__ = ("MAX_LINE", "MAX_PATTERN", "SECONDS", "Grep", "render_grep")

MAX_PATTERN = 500
"""Characters of a grep pattern."""
MAX_LINE = 20_000
"""Characters of each line or entry that are searched; the rest of it is not."""
SECONDS = 1.0
"""Seconds one grep may spend matching, all lines together (`regex` checks its timeout now and
then, so a catastrophic pattern may overrun it a little: a few seconds at worst)."""


def _compile(pattern: str) -> Any:
    import regex

    if len(pattern) > MAX_PATTERN:
        raise ToolError(f"grep: the pattern is over {MAX_PATTERN} characters; shorten it")
    try:
        return regex.compile(pattern, regex.VERSION0)
    except regex.error as exc:
        raise ToolError(
            f"grep: {quoted(pattern)} is not a valid regular expression ({exc}); escape "
            "special characters with a backslash, e.g. grep:10\\.1000"
        ) from None


@dataclass(slots=True)
class Grep:
    """One search: feed it lines (or entries) in order; it keeps what the page can show.

    Args:
        selector: The `grep:` selector.
        want: Characters of matches to keep (the page's offset, budget and one more).
    """

    selector: GrepSelector
    want: int
    pattern: Any = None
    deadline: float = 0.0
    kept: list[str] = field(default_factory=lambda: [])
    size: int = 0
    matches: int = 0
    searched: int = 0
    long_items: int = 0
    out_of_time: bool = False

    def __post_init__(self) -> None:
        self.pattern = _compile(self.selector.pattern)
        self.deadline = time.monotonic() + SECONDS

    def feed(self, label: str, text: str, prefix: str = "") -> bool:
        """Search one line or entry (after `prefix`, e.g. its key); False once out of time.

        A match is kept as `label: text`.
        """
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.out_of_time = True
            return False
        if len(text) > MAX_LINE:
            self.long_items += 1
            text = text[:MAX_LINE]
        try:
            found = self.pattern.search(prefix + text if prefix else text, timeout=left)
        except TimeoutError:
            self.out_of_time = True
            return False
        self.searched += 1
        if found is not None:
            self.matches += 1
            if self.size < self.want:
                self.kept.append(f"{label}: {text}")
                self.size += len(self.kept[-1]) + 1
        return True

    def feed_all(self, items: list[tuple[str, str]]) -> bool:
        """`feed` each of `items` (label, text); False once the time budget is spent."""
        return all(self.feed(label, text) for label, text in items)

    @property
    def complete(self) -> bool:
        """Every match found is kept."""
        return len(self.kept) == self.matches

    def summary(self, unit: str, units: str) -> str:
        """`grep 'PATTERN': N matching lines` (`unit` / `units`: singular and plural)."""
        return f"grep {quoted(self.selector.pattern)}: {self.matches} matching " + (
            unit if self.matches == 1 else units
        )

    def notes(self, units: str) -> list[str]:
        """What the page should say about a search out of time or items searched in part."""
        notes: list[str] = []
        if not self.matches and not self.out_of_time:
            notes.append(
                f"Nothing matches in the {units}. The pattern is a regular expression searched "
                "in each one's text; (?i) ignores case."
            )
        if self.out_of_time:
            notes.append(
                f"The search ran out of time ({SECONDS:g} s) after {self.searched} {units}: "
                "the matches are those found so far. Use a simpler pattern (plain words, no "
                "nested repetition) to search the rest."
            )
        if self.long_items:
            notes.append(
                f"{self.long_items} of the {units} are over {MAX_LINE} characters: only their "
                f"first {MAX_LINE} were searched and are shown."
            )
        return notes


def render_grep(header: str, grep: Grep, units: tuple[str, str, str], cap: int) -> str:
    """The page of matches under `header`, at most `cap` characters, with a next-part note.

    `units`: what is matched, singular and plural, and how one match is laid out.
    """
    unit, plural, layout = units
    pattern = grep.selector.pattern
    body = Body(
        f"matching {plural}, each as {layout}",
        "\n".join(grep.kept),
        grep.complete,
        None,
        unit,
        page=lambda n: f"grep:{pattern}@{n}",
        notes=grep.notes(plural),
    )
    return render(
        f"{header} | {grep.summary(unit, plural)}", body, grep.selector.offset, cap - RESERVE, cap
    )
