"""What `inspect` reads and how much of it: selectors, and the pages a cut output continues on.

`parse_selector` reads `lines:A-B`, `slice:A..B`, `key:PATH`, `grep:PATTERN` (each with an
optional `@N`) or nothing into a `Selector`; `render` lays out one selection under
`inspect_max_chars`, cutting at an item boundary when one is in reach, with a note naming the
selector of the next part.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeAlias

from llm_worker.blobs._summaries import ELLIPSIS
from llm_worker.errors import ToolError

__all__ = (
    "RESERVE",
    "Body",
    "GrepSelector",
    "KeySelector",
    "LinesSelector",
    "Selector",
    "SliceSelector",
    "WholeSelector",
    "parse_selector",
    "quoted",
    "render",
)

# -- selectors ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WholeSelector:
    """No selector: the metadata and the beginning. `offset` skips characters of the body."""

    offset: int = 0


@dataclass(frozen=True, slots=True)
class LinesSelector:
    """`lines:FIRST-LAST` (1-based, inclusive; `lines:7` one line, `lines:7-` to the end)."""

    first: int
    last: int | None
    offset: int = 0


@dataclass(frozen=True, slots=True)
class SliceSelector:
    """`slice:START..STOP` of a JSON array (Python's half-open slice; negatives from the end)."""

    start: int | None
    stop: int | None
    offset: int = 0


@dataclass(frozen=True, slots=True)
class KeySelector:
    """`key:PATH` of a JSON object; dots go deeper (`key:results.0.name`)."""

    path: str
    offset: int = 0


@dataclass(frozen=True, slots=True)
class GrepSelector:
    """`grep:PATTERN`: the text lines, or JSON entries, that a regular expression matches."""

    pattern: str
    offset: int = 0


Selector: TypeAlias = WholeSelector | LinesSelector | SliceSelector | KeySelector | GrepSelector

_N = r"[0-9]{1,18}"  # ASCII digits only; 18 keeps int() cheap
_OFFSET = re.compile(rf"(.*?)\s*@({_N})", re.DOTALL)
_LINES = re.compile(rf"({_N})(?:-({_N})?)?")
_SLICE = re.compile(rf"(-?{_N})?\.\.(-?{_N})?|(-?{_N})")
_MAX_PATH = 200
_USAGE = (
    "use lines:A-B for text (e.g. lines:20-50), slice:A..B for a JSON array (e.g. slice:0..10), "
    "key:NAME for a JSON object (e.g. key:results), grep:PATTERN to find lines or entries "
    "(e.g. grep:timeout), or no selector for an overview"
)


def quoted(text: str) -> str:
    """`repr(text)`, cut to 80 characters: how an input is shown in an error message."""
    return repr(text if len(text) <= 80 else text[:80] + ELLIPSIS)


def parse_selector(text: str | None) -> Selector:
    """Read a selector; `None` or `""` is the overview.

    A trailing `@N` skips N characters of the selection's output (how a cut output's next
    part is asked for); a grep pattern that itself ends in `@` and digits is written with a
    group, e.g. `grep:(?:x@1)`.

    Raises:
        ToolError: A malformed selector, with the forms that are accepted.
    """
    if text is None:
        return WholeSelector()
    body, offset = text.strip(), 0
    paged = _OFFSET.fullmatch(body)
    if paged:
        body, offset = paged.group(1), int(paged.group(2))
    if not body:
        return WholeSelector(offset)
    kind, colon, arg = body.partition(":")
    kind, arg = kind.strip().lower(), arg.strip()
    if kind in ("lines", "slice"):
        arg = "".join(arg.split())
    if colon and kind == "lines":
        return _lines_selector(text, arg, offset)
    if colon and kind == "slice":
        return _slice_selector(text, arg, offset)
    if colon and kind == "grep":
        if not arg:
            raise ToolError(
                f"selector {quoted(text)}: grep: needs a regular expression, e.g. grep:error"
            )
        return GrepSelector(arg, offset)
    if colon and kind == "key":
        if not arg or len(arg) > _MAX_PATH:
            raise ToolError(
                f"selector {quoted(text)}: key: needs a key of at most {_MAX_PATH} "
                "characters, e.g. key:results"
            )
        return KeySelector(arg, offset)
    raise ToolError(f"unknown selector {quoted(text)}: {_USAGE}")


def _lines_selector(text: str, arg: str, offset: int) -> LinesSelector:
    match = _LINES.fullmatch(arg)
    if match is None:
        raise ToolError(
            f"malformed selector {quoted(text)}: expected lines:FIRST-LAST with 1-based line "
            "numbers, e.g. lines:20-50 (lines:20 one line, lines:20- to the end)"
        )
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) else None
    if match.group(2) is None and not arg.endswith("-"):
        last = first
    if last is not None and last < first:
        raise ToolError(f"selector {quoted(text)}: the last line comes before the first")
    return LinesSelector(first, last, offset)


def _slice_selector(text: str, arg: str, offset: int) -> SliceSelector:
    match = _SLICE.fullmatch(arg)
    if match is None:
        raise ToolError(
            f"malformed selector {quoted(text)}: expected slice:START..STOP (entries START to "
            "STOP-1, as a Python slice; either may be left out or negative), e.g. slice:3..8"
        )
    if match.group(3) is not None:
        index = int(match.group(3))
        return SliceSelector(index, index + 1 if index != -1 else None, offset)
    start, stop = match.group(1), match.group(2)
    return SliceSelector(int(start) if start else None, int(stop) if stop else None, offset)


# -- paging ------------------------------------------------------------------------------------

# Room kept for the header, the section title and the notes; the body gets the rest.
RESERVE = 1_000


@dataclass(slots=True)
class Body:
    """A rendered selection: items (lines, entries) joined by newlines.

    `text` holds the selection from its character `start[0]` on: to its end when `complete`,
    else at least to its character offset + budget + 1. `start` also says how many newlines
    come before that character and where the last of them is (-1: none), so a reader that
    skipped the selection's beginning still numbers items. `first` numbers its first item
    (None: items are not addressable). `resume(k)` is the selector for items k.. of the
    selection; `page(n)` the selector for the selection from its character n.
    """

    title: str
    text: str
    complete: bool
    first: int | None
    unit: str
    page: Callable[[int], str]
    resume: Callable[[int], str] | None = None
    notes: list[str] = field(default_factory=lambda: [])
    start: tuple[int, int, int] = (0, 0, -1)


def _page(body: Body, offset: int, budget: int) -> tuple[str, str | None]:
    """The part of `body` to show from `offset`, and the note on what was cut, if anything."""
    text, (base, lines, newline) = body.text, body.start
    size = base + len(text)
    if offset and offset >= size and body.complete:
        raise ToolError(f"@{offset} is past the end of this selection ({size} characters)")
    rest = text[offset - base : offset - base + budget + 1]
    if len(rest) <= budget and body.complete:
        return rest, None
    head = rest[:budget]
    cut = head.rfind("\n")
    shown = head[:cut] if cut > 0 else head  # end at an item boundary when one is in reach
    end = offset + len(shown)
    item = None if body.first is None else body.first + lines + text.count("\n", 0, end - base)
    if cut > 0:
        where = f", up to the end of {body.unit} {item}" if item is not None else ""
        resume = body.resume(item + 1) if body.resume and item is not None else None
        following = resume or body.page(end + 1)
    else:
        last = text.rfind("\n", 0, end - base)
        at = end - ((base + last if last >= 0 else newline) + 1)
        where = f", inside {body.unit} {item} after its character {at}" if item is not None else ""
        following = body.page(end)
    return shown, (
        f"Output limit reached: shown characters {offset + 1}-{end} of this selection{where}. "
        f'Next part: selector "{following}".'
    )


def render(header: str, body: Body, offset: int, budget: int, cap: int) -> str:
    """`header`, then `body` from `offset` (at most `budget` characters), then the notes.

    The whole is at most `cap` characters.
    """
    shown, cut = _page(body, offset, budget)
    notes = [*body.notes, *([cut] if cut else [])]
    parts = [header, f"── {body.title} ──"]
    if shown:
        parts.append(shown)
    if notes:
        parts += ["── note ──", *notes]
    out = "\n".join(parts)
    return out[:cap]  # the bound holds whatever the notes say
