"""Summaries of stored outputs: what the history carries instead of a large tool output.

`summarize` writes the summary forms of text, a JSON array and a JSON object (plus one for a
top-level JSON scalar), at most `summary_max_bytes` UTF-8 bytes, lines shortened visibly with
`…`, cut on a character boundary; `cut_summary` bounds a tool's own summary the same way. The
JSON forms read the content's `JsonShape` (`_json_scan`): a large array is never built to be
summarized.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

from llm_worker.blobs._json_scan import (
    JsonShape,
    content_shape,
    dict_or_none,
    dumps_json,
    key_text,
    type_name,
)
from llm_worker.blobs._output import Content, OutputPolicy, StructuredContent, TextContent

__all__ = (
    "ELLIPSIS",
    "clean",
    "count_lines",
    "cut_summary",
    "entry_schema",
    "scalar_header",
    "summarize",
)


ELLIPSIS = "…"
"""Marks text that was cut, in summaries and in inspect's output."""
_MIN_LINE = 24  # bytes a listed key keeps at least before the list is shortened instead
_MIN_SAMPLE = 40  # bytes a sample entry needs to be worth showing beside a whole schema
_UNBOUNDED = 1 << 40

_Hint = list[tuple[str, list[str]]]
"""The section that names the inspect tool and its grep selector (empty: no hint)."""


def _hint(inspect: str | None) -> _Hint:
    # A title alone, kept short: the room it takes is the sample lines' room.
    return [] if inspect is None else [(f"{inspect}: grep:REGEX", [])]


def _titles(hint: _Hint) -> tuple[str, ...]:
    return tuple(title for title, _ in hint)


def clean(text: str) -> str:
    """`text` with lone surrogates replaced, so it can go into a JSON request body."""
    # A summary goes into a JSON request body: no lone surrogates.
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


def _size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _cut_bytes(text: str, limit: int) -> str:
    """The longest prefix of `text` with at most `limit` UTF-8 bytes (never half a character)."""
    if limit <= 0:
        return ""
    return text[: limit + 1].encode("utf-8")[:limit].decode("utf-8", "ignore")


def _shorten(line: str, cap: int) -> str:
    if _size(line) <= cap:
        return line
    return _cut_bytes(line, cap - len(ELLIPSIS.encode())) + ELLIPSIS if cap >= 3 else ""


def _water_fill(sizes: list[int], budget: int) -> int:
    """The largest cap with sum(min(size, cap)) <= budget.

    Short lines stay whole; long lines share what is left equally.
    """
    remaining = max(budget, 0)
    ordered = sorted(sizes)
    for i, size in enumerate(ordered):
        share = remaining // (len(ordered) - i)
        if size > share:
            return share
        remaining -= size
    return ordered[-1] if ordered else 0


def cut_summary(summary: str, max_bytes: int) -> str:
    """`summary` cut to `max_bytes` UTF-8 bytes with a visible `…` (a tool's own summary)."""
    return _shorten(clean(summary), max_bytes)


def _compose(
    header: str,
    sections: list[tuple[str, list[str]]],
    max_bytes: int,
    whole: tuple[str, ...] = (),
) -> str:
    """Header and sections, at most `max_bytes`; long lines share the room left equally.

    The lines of the sections titled in `whole` are kept whole when they fit at all: the
    other lines share what they leave.
    """
    header = clean(header)
    titled = [(f"── {title} ──", [clean(line) for line in lines]) for title, lines in sections]
    fixed = _size(header) + sum(_size(title) + 1 for title, _ in titled)
    pinned = {f"── {title} ──" for title in whole}
    kept = [line for title, lines in titled if title in pinned for line in lines]
    rest = [line for title, lines in titled if title not in pinned for line in lines]
    room = max_bytes - fixed - len(kept) - len(rest)
    if kept and sum(_size(line) for line in kept) <= room:
        room -= sum(_size(line) for line in kept)
    else:
        pinned, rest = set[str](), kept + rest
    cap = _water_fill([_size(line) for line in rest], room)
    parts = [header]
    for title, section in titled:
        parts.append(title)
        parts.extend(line if title in pinned else _shorten(line, cap) for line in section)
    out = "\n".join(parts)
    return out if _size(out) <= max_bytes else _cut_bytes(out, max_bytes)


def count_lines(text: str) -> int:
    """Lines of `text`: a newline ends a line; a last line without one counts too."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _line(text: str, start: int, end: int, limit: int) -> str:
    line = text[start : min(end, start + limit)]
    return line[:-1] if line.endswith("\r") and end - start <= limit else line


def _head_lines(text: str, count: int, limit: int) -> list[str]:
    lines: list[str] = []
    start = 0
    for _ in range(count):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        lines.append(_line(text, start, end, limit))
        start = end + 1
    return lines


def _tail_lines(text: str, count: int, limit: int) -> list[str]:
    lines: list[str] = []
    end = len(text) - 1 if text.endswith("\n") else len(text)
    for _ in range(count):
        start = text.rfind("\n", 0, end) + 1
        lines.append(_line(text, start, end, limit))
        end = start - 1
    return lines[::-1]


def _text_summary(tag: str, text: str, policy: OutputPolicy) -> str:
    total = count_lines(text)
    head = min(policy.head_lines, total)
    tail = min(policy.tail_lines, total - head)  # never a line twice
    limit = policy.summary_max_bytes + 1  # characters: enough to know a line must be cut
    sections: list[tuple[str, list[str]]] = []
    if head:
        sections.append(("head", _head_lines(text, head, limit)))
    if tail:
        sections.append(("tail", _tail_lines(text, tail, limit)))
    return _compose(f"{tag} text | {total} lines", sections, policy.summary_max_bytes)


def entry_schema(first: Any, limit: int) -> str:
    """An array entry's keys with their types (about `limit` characters), or its type."""
    members = dict_or_none(first)
    if members is None:
        return type_name(first)
    parts: list[str] = []
    size = 0
    for key, value in members.items():
        parts.append(f"{key_text(key)}: {type_name(value)}")
        size += len(parts[-1]) + 2
        if size > limit:
            break
    return ", ".join(parts) if parts else "(no keys)"


def _array_summary(tag: str, shape: JsonShape, policy: OutputPolicy, hint: _Hint) -> str:
    header = f"{tag} json_array | {shape.count} entries"
    if not shape.count:
        return _compose(header, [], policy.summary_max_bytes)
    limit = policy.summary_max_bytes + 1
    schema = entry_schema(shape.head[0], limit)
    sections = [("schema", [schema]), *hint]
    if hint and _size(_compose(header, sections, _UNBOUNDED)) > policy.summary_max_bytes:
        sections = sections[:1]  # the schema comes first; the tool's description names grep
        hint = []
    # Fewer sample entries rather than a cut schema: an entry is shown only with room for
    # a useful part of it once the schema (and the hint) are whole.
    room = policy.summary_max_bytes - _size(_compose(header, sections, _UNBOUNDED))
    room -= _size("\n── head ──")
    head: list[str] = []
    for entry in shape.head[: policy.array_head]:
        if room < _MIN_SAMPLE + 1:
            break
        head.append(dumps_json(entry)[:limit])
        room -= min(_size(head[-1]), _MIN_SAMPLE) + 1
    if head:
        sections.insert(1, ("head", head))
    return _compose(header, sections, policy.summary_max_bytes, whole=("schema", *_titles(hint)))


def _listed(lines: list[str], total: int, budget: int, unit: str) -> list[str]:
    """As many of `lines` as fit `budget` bytes at `_MIN_LINE` bytes each, then `… +N more`."""
    if total == len(lines) and sum(_size(line) + 1 for line in lines) <= budget:
        return lines
    reserve = len(f"{ELLIPSIS} +{total} more {unit}".encode()) + 1
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = min(_size(line), _MIN_LINE) + 1
        if used + cost + reserve > budget:
            break
        kept.append(line)
        used += cost
    return [*kept, f"{ELLIPSIS} +{total - len(kept)} more {unit}"]


def _object_summary(tag: str, shape: JsonShape, policy: OutputPolicy, hint: _Hint) -> str:
    header = f"{tag} json_object | {shape.count} keys"
    if not shape.count:
        return _compose(header, [], policy.summary_max_bytes)
    budget = policy.summary_max_bytes - _size(_compose(header, hint, _UNBOUNDED))
    budget -= _size("\n── keys ──")
    shown = islice(shape.keys.items(), max(budget // 4, 1))  # no more could ever fit
    lines = [f"{key_text(key)}: {kind}" for key, kind in shown]
    keys = ("keys", _listed(lines, shape.count, budget, "keys"))
    return _compose(header, [keys, *hint], policy.summary_max_bytes, whole=_titles(hint))


def scalar_header(tag: str, value: Any) -> str:
    """The header of a scalar: `[blob:<id>] json_string | N chars`, `… json_integer`."""
    size = f" | {len(value)} chars" if isinstance(value, str) else ""
    return f"{tag} json_{type_name(value)}{size}"


def _scalar_summary(tag: str, shape: JsonShape, policy: OutputPolicy) -> str:
    value = shape.head[0]
    text = dumps_json(value)[: policy.summary_max_bytes + 1]
    return _compose(scalar_header(tag, value), [("value", [text])], policy.summary_max_bytes)


def summarize(
    blob_id: str,
    content: Content,
    policy: OutputPolicy | None = None,
    *,
    inspect: str | None = None,
) -> str:
    """The summary the history carries for a stored output.

    ```
    [blob:<id>] text | {N} lines            [blob:<id>] json_array | {N} entries
    ── head ──                              ── schema ──
    {first 5 lines}                         {keys of the first entry: type}
    ── tail ──                              ── head ──
    {last 3 lines}                          {first 2 entries, compact JSON}

    [blob:<id>] json_object | {N} keys      [blob:<id>] json_string | {N} chars
    ── keys ──                              ── value ──
    {key: type (size)}, one a line          {the value, compact JSON}
    ```

    Lines end at a newline (a carriage return before it is dropped). A text of at most
    head + tail lines shows each line once (the tail holds the lines after the head); an
    empty text, array or object has the header only. An array's schema is its first
    entry's keys with their types (or the entry's type when it is not an object). A
    top-level JSON scalar has the fourth form (`json_integer`, `json_number`,
    `json_boolean`, `json_null` have no `| N chars`). The whole is at most
    `policy.summary_max_bytes` UTF-8 bytes: long lines share the room left equally and are
    shortened with `…` on a character boundary; keys that do not fit end with
    `… +N more keys`. An array's schema is never cut while it fits at all: sample entries
    are left out first.

    With `inspect` (the name of the tool that reads stored outputs), an array or object
    summary — many records, where paging is slow — ends with a line that names the tool and
    its `grep:` selector,
    `── inspect: grep:REGEX ──`; it is never shortened (an array drops it rather
    than cut its schema).

    Args:
        blob_id: The id shown in the header.
        content: The stored content.
        policy: The caps (the defaults when `None`).
        inspect: The inspect tool's name, for the closing hint; `None` leaves it out.

    Raises:
        BlobError: Structured content whose JSON text is not valid.
    """
    policy = policy or OutputPolicy()
    tag = f"[blob:{blob_id}]"
    if isinstance(content, TextContent):
        return _text_summary(tag, content.text, policy)
    if not isinstance(content, StructuredContent):
        raise TypeError(f"not a Content.Text or Content.Structured: {content!r}")
    shape = content_shape(content, policy.array_head)
    if shape.kind == "json_array":
        return _array_summary(tag, shape, policy, _hint(inspect))
    if shape.kind == "json_object":
        return _object_summary(tag, shape, policy, _hint(inspect))
    return _scalar_summary(tag, shape, policy)
