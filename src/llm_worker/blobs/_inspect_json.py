"""`inspect` on a JSON blob: entries of an array, keys and values of an object, a scalar.

The JSON text is scanned entry by entry (`_json_scan`): an array is counted and sliced, and an
object searched for a key, without building the whole value.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import islice
from typing import Any

from llm_worker.blobs._grep import Grep, render_grep
from llm_worker.blobs._json_pager import PageText, page_entries
from llm_worker.blobs._json_scan import (
    array_items,
    describe,
    dict_or_none,
    dumps_json,
    json_kind,
    key_text,
    list_or_none,
    loads_json,
    object_members,
    type_name,
)
from llm_worker.blobs._selectors import (
    RESERVE,
    Body,
    GrepSelector,
    KeySelector,
    LinesSelector,
    Selector,
    SliceSelector,
    WholeSelector,
    quoted,
    render,
)
from llm_worker.blobs._summaries import ELLIPSIS, entry_schema, scalar_header
from llm_worker.errors import ToolError

__all__ = (
    "Pull",
    "array_selector_error",
    "counted_bounds",
    "inspect_json",
    "page_array",
    "render_array",
    "text_pull",
)


Pull = Callable[[], bytes | str | None]


def page_array(
    tag: str,
    selector: SliceSelector | WholeSelector,
    cap: int,
    source: Callable[[], Pull],
    *,
    at: tuple[int | None, int | None] = (None, None),
) -> str:
    """What `selector` reads of a JSON array whose text `source()` streams (in a thread).

    `at` is, when a blob index says them, the number of the entry the stream starts at and the
    array's length: the stream is then read only until the page is full. Otherwise it is the
    whole array from its `[`, read to its end to count it (twice for a negative index).

    Raises:
        NotJson: The text is not a JSON array.
    """
    number, count = at
    if count is None and isinstance(selector, SliceSelector) and _negative(selector):
        count = page_entries(source(), number=None, bounds=(0, 0), window=(0, 0), to_the_end=True)
        count = count.count
    start, stop = counted_bounds(selector, count or 0)
    window = (selector.offset, selector.offset + cap - RESERVE + 1)
    paged = page_entries(
        source(), number=number, bounds=(start, stop), window=window, to_the_end=count is None
    )
    total = paged.count if count is None else count
    complete = paged.rendered >= min(stop, total) - min(start, total)
    found = (total, paged.page, complete, paged.first)
    return render_array(tag, selector, (start, stop), found, cap)


def _negative(selector: SliceSelector) -> bool:
    return (selector.start or 0) < 0 or (selector.stop or 0) < 0


def text_pull(text: str) -> Pull:
    """The text in pieces of 1 Mi characters, then `None`."""
    pieces = iter(range(0, len(text), _PIECE))
    return lambda: next((text[i : i + _PIECE] for i in pieces), None)


_PIECE = 1 << 20
_ALL = 1 << 62


def _grep_array(tag: str, text: str, selector: GrepSelector, cap: int) -> str:
    grep = Grep(selector, selector.offset + cap - RESERVE + 1)
    count = 0
    for count, value in enumerate(array_items(text), 1):
        if not grep.out_of_time:
            grep.feed(str(count - 1), dumps_json(value))
    units = ("entry", "entries", "index: entry (read one with slice:I..I+1)")
    return render_grep(f"{tag} json_array | {count} entries", grep, units, cap)


def _grep_object(tag: str, text: str, selector: GrepSelector, cap: int) -> str:
    grep = Grep(selector, selector.offset + cap - RESERVE + 1)
    count = 0
    for key, value in object_members(text):
        count += 1
        if not grep.out_of_time:
            grep.feed(key_text(key), dumps_json(value), f"{key_text(key)}: ")
    return render_grep(
        f"{tag} json_object | {count} keys", grep, ("key", "keys", "key: value"), cap
    )


def _inspect_array(tag: str, text: str, selector: Selector, cap: int) -> str:
    if isinstance(selector, GrepSelector):
        return _grep_array(tag, text, selector, cap)
    if not isinstance(selector, SliceSelector | WholeSelector):
        raise array_selector_error(tag, selector)
    return page_array(tag, selector, cap, lambda: text_pull(text))


def array_selector_error(tag: str, selector: Selector) -> ToolError:
    """The error for a `lines:` or `key:` selector on an array."""
    kind = "lines:" if isinstance(selector, LinesSelector) else "key:"
    return ToolError(
        f"{tag} is a json_array: {kind} does not apply; select entries, e.g. slice:0..10"
    )


def counted_bounds(selector: SliceSelector | WholeSelector, count: int) -> tuple[int, int]:
    """The entries `selector` asks for, `start` and `stop`, once the array's length is known."""
    if isinstance(selector, WholeSelector):
        return 0, _ALL
    start, stop = selector.start, selector.stop
    if (start or 0) < 0 or (stop or 0) < 0:
        start, stop, _ = slice(start, stop).indices(count)
    return start or 0, _ALL if stop is None else stop


def render_array(
    tag: str,
    selector: Selector,
    bounds: tuple[int, int],
    found: tuple[int, PageText, bool, Any],
    cap: int,
) -> str:
    """What `inspect` answers for entries `bounds` of an array.

    `found` is the array's length, the page of the selection's text (one JSON value a line),
    whether the selection is all the entries asked for, and the first entry (for the
    overview's schema).
    """
    (start, stop), (count, page, complete, first) = bounds, found
    budget = cap - RESERVE
    whole = isinstance(selector, WholeSelector)
    low, high = min(start, count), max(min(stop, count), min(start, count))
    header = f"{tag} json_array | {count} entries"
    notes: list[str] = []
    if whole and count:
        header += f"\n── schema ──\n{entry_schema(first, 300)[:300]}"
    elif not whole and stop > count and (stop != _ALL or start > count):
        notes.append(f"The array has {count} entries: the slice is clamped to {low}..{high}.")
    if not whole and low == high:
        notes.append(f"No entries in this range; the array has {count} (slice:0..{count}).")
    body = Body(
        f"entries {low}..{high}, one JSON value a line",
        page.text,
        complete,
        low,
        "entry",
        page=(lambda n: f"@{n}") if whole else (lambda n: f"slice:{low}..{high}@{n}"),
        resume=lambda k: f"slice:{k}..{high}",
        notes=notes,
        start=(min(page.lo, page.size), page.lines, page.last_newline),
    )
    return render(header, body, selector.offset, budget, cap)


def _resolve(value: Any, path: str, where: str) -> Any:
    if not path:
        return value
    if (members := dict_or_none(value)) is not None:
        return _resolve_key(members, path, where)
    if (entries := list_or_none(value)) is not None:
        head, _, rest = path.partition(".")
        if re.fullmatch(r"-?[0-9]{1,18}", head) and -len(entries) <= int(head) < len(entries):
            return _resolve(entries[int(head)], rest, _child(where, head))
        raise ToolError(
            f"{where!r} is an array of {len(entries)} entries: "
            f"follow it with an index, e.g. {where}.0"
        )
    name = type_name(value)
    article = "an" if name[0] in "aeiou" else "a"
    raise ToolError(f"{where!r} is {article} {name}: it has no key {quoted(path)}")


def _child(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _resolve_key(members: dict[str, Any], path: str, where: str) -> Any:
    # Keys may hold dots: try the whole path as a key, then ever shorter prefixes.
    splits = [len(path), *(i for i in range(len(path) - 1, 0, -1) if path[i] == ".")]
    error: ToolError | None = None
    for split in splits:
        if path[:split] in members:
            try:
                key = path[:split]
                return _resolve(members[key], path[split + 1 :], _child(where, key))
            except ToolError as exc:
                error = error or exc
    if error is not None:
        raise error
    keys = _key_list(list(islice(members, 21)))
    raise ToolError(f"no key {quoted(path)} in {where!r}; its keys: {keys}")


def _key_list(keys: list[str]) -> str:
    names = [key if len(key) <= 40 else key[:40] + ELLIPSIS for key in keys[:20]]
    return ", ".join(names) + (", …" if len(keys) > 20 else "") if names else "(none)"


def _find_key(tag: str, text: str, path: str) -> tuple[int, Any]:
    # Only the top-level members on the path are kept: the others are parsed and dropped.
    matches: dict[str, Any] = {}
    keys: dict[str, None] = {}
    for key, value in object_members(text):
        keys[key] = None
        if path == key or path.startswith(key + "."):
            matches[key] = value
    if not matches:
        names = _key_list(list(islice(keys, 21)))
        raise ToolError(f"{tag} has no key {quoted(path)}; its keys: {names}")
    return len(keys), _resolve_key(matches, path, "")


def _value_body(value: Any) -> str:
    if (entries := list_or_none(value)) is not None:
        return "\n".join(dumps_json(entry) for entry in entries)
    return dumps_json(value, pretty=isinstance(value, dict))


def _inspect_object(tag: str, text: str, selector: Selector, cap: int) -> str:
    if isinstance(selector, GrepSelector):
        return _grep_object(tag, text, selector, cap)
    if isinstance(selector, LinesSelector | SliceSelector):
        kind = "lines:" if isinstance(selector, LinesSelector) else "slice:"
        raise ToolError(
            f"{tag} is a json_object: {kind} does not apply; select a key, e.g. key:NAME"
        )
    budget = cap - RESERVE
    if isinstance(selector, KeySelector):
        count, value = _find_key(tag, text, selector.path)
        path = selector.path
        body = Body(
            f"key {path}: {describe(value)}",
            _value_body(value),
            True,
            None,
            "",
            page=lambda n: f"key:{path}@{n}",
        )
        return render(f"{tag} json_object | {count} keys", body, selector.offset, budget, cap)
    keys = {key: describe(value) for key, value in object_members(text)}
    listing = "\n".join(f"{key_text(key)}: {kind}" for key, kind in keys.items())
    body = Body(
        "keys",
        listing,
        True,
        1,
        "key",
        page=lambda n: f"@{n}",
        notes=["Read a value with key:NAME (dots go deeper: key:results.0.name)."],
    )
    return render(f"{tag} json_object | {len(keys)} keys", body, selector.offset, budget, cap)


def _inspect_scalar(tag: str, text: str, selector: Selector, cap: int) -> str:
    value = loads_json(text)
    if not isinstance(selector, WholeSelector):
        raise ToolError(f"{tag} is a single JSON {type_name(value)}: inspect it without a selector")
    body = Body("value", dumps_json(value), True, None, "", page=lambda n: f"@{n}")
    return render(scalar_header(tag, value), body, selector.offset, cap - RESERVE, cap)


def inspect_json(tag: str, text: str, selector: Selector, cap: int) -> str:
    """What `selector` reads of the JSON text `text`, at most `cap` characters.

    Raises:
        ToolError: A selector of the wrong kind, a missing key, or text that is not JSON.
    """
    kind = json_kind(text)
    inspect = (
        _inspect_array
        if kind == "array"
        else _inspect_object
        if kind == "object"
        else _inspect_scalar
    )
    try:
        return inspect(tag, text, selector, cap)
    except ValueError as exc:  # NotJson, or a damaged scalar blob
        raise ToolError(f"{tag} does not hold valid JSON ({exc})") from exc
