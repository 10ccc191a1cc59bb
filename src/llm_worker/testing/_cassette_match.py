"""Which recording answers a request: the provider-neutral request compared, and the diff of a miss.

A request body is read back into the neutral `Request` (`decode_request`), so a recording is
matched by what was asked — model, system prompt, messages, tools, options — and not by the
order of the body's keys or by call order alone. Fields named in `ignore` (dotted paths,
`*` for every item: `"temperature"`, `"messages.*.content.*.citations"`) and text matching an
`ignore_patterns` regex (a timestamp in the system prompt) are left out of the comparison.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Final

import orjson

from llm_worker._json import as_dict, as_list
from llm_worker.testing._cassette_file import CassetteError, Exchange, containers
from llm_worker.testing._decode import decode_request

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from llm_worker.messages import Request

__all__ = ("CassetteMissError", "Matcher", "endpoint", "normalize", "unused_lines")

_IGNORED: Final = "<ignored>"
_MAX_FIELDS: Final = 5  # fields a miss's message shows; the count says how many more differ
_EXCERPT: Final = 30


class CassetteMissError(CassetteError):
    """No recording of the cassette matches a request made in replay.

    The message names the nearest recording, the fields that differ and their first
    differing characters.
    """


@cache
def _adapter() -> TypeAdapter[Request]:
    from pydantic import TypeAdapter

    from llm_worker.messages import Request

    return TypeAdapter(Request)


def normalize(provider: str, model: str, body: object) -> dict[str, Any]:
    """A request body as the neutral request's JSON, without empty fields.

    A body no decoder reads (another API of the same host) is kept as it is, under `body`.
    """
    try:
        request = decode_request(provider, body, model=model)
    except Exception:  # any body still records: it is compared as it was sent
        return {"body": body}
    data = _adapter().dump_python(request, mode="json")
    return as_dict(_pruned(data))


def _pruned(value: object) -> object:
    """`value` without `None`, `[]` and `{}` entries in its objects (a readable file)."""
    mapping, items = containers(value)
    if mapping is not None:
        return {k: _pruned(v) for k, v in mapping.items() if v is not None and v not in ([], {})}
    if items is not None:
        return [_pruned(v) for v in items]
    return value


@dataclass(slots=True, frozen=True)
class Matcher:
    """Compares requests with the fields and text a cassette ignores left out.

    Attributes:
        ignore: Dotted paths of fields left out (`*` stands for every key or item).
        patterns: Regexes whose matches in any text are left out.
    """

    ignore: tuple[tuple[str, ...], ...] = ()
    patterns: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def of(cls, ignore: Iterable[str], patterns: Iterable[str | re.Pattern[str]]) -> Matcher:
        """A matcher from field paths and regexes (strings compiled)."""
        return cls(
            tuple(tuple(path.split(".")) for path in ignore),
            tuple(re.compile(p) if isinstance(p, str) else p for p in patterns),
        )

    def key(self, exchange: Exchange) -> bytes:
        """What two requests must share to match, as canonical JSON."""
        return orjson.dumps(self.compared(exchange), option=orjson.OPT_SORT_KEYS)

    def compared(self, exchange: Exchange) -> dict[str, Any]:
        """The request as matching sees it: provider, model, endpoint, ignored parts left out."""
        data: dict[str, Any] = {
            "provider": exchange.provider,
            "model": exchange.model,
            "endpoint": endpoint(exchange.path),
            **orjson.loads(orjson.dumps(exchange.request)),  # a copy to cut fields from
        }
        for path in self.ignore:
            _drop(data, path)
        return as_dict(self._masked(data))

    def _masked(self, value: object) -> object:
        if not self.patterns:
            return value
        if isinstance(value, str):
            for pattern in self.patterns:
                value = pattern.sub(_IGNORED, value)
            return value
        mapping, items = containers(value)
        if mapping is not None:
            return {k: self._masked(v) for k, v in mapping.items()}
        if items is not None:
            return [self._masked(v) for v in items]
        return value

    def miss(self, made: Exchange, recorded: list[Exchange], used: set[int], where: str) -> str:
        """Why no recording answers `made`: the nearest one and how it differs."""
        request = _flat(self.compared(made))
        if not recorded:
            return f"{where} holds no recording for this request ({_label(made)})"
        diffs = [_differences(request, _flat(self.compared(r))) for r in recorded]
        # The nearest: fewest differing fields; an unused one before a used one, then order.
        best = min(range(len(recorded)), key=lambda i: (len(diffs[i]), i in used, i))
        lines = [
            f"no recording in {where} matches this request ({_label(made)}); the nearest is "
            f"recording {best + 1} of {len(recorded)}"
            + (" (already replayed)" if best in used else "")
        ]
        found = diffs[best]
        if not found:
            lines[0] += ", the same request, already replayed: it was made more often than recorded"
        else:
            lines[0] += f", which differs in {len(found)} field(s):"
            lines.extend(found[:_MAX_FIELDS])
            if len(found) > _MAX_FIELDS:
                lines.append(f"  … and {len(found) - _MAX_FIELDS} more")
        lines.append(
            "Record it again (pytest --llm-record, or Cassette(mode='record')), or leave a "
            "field out of matching (Cassette(ignore=[...], ignore_patterns=[...]))."
        )
        return "\n".join(lines)


def endpoint(path: str) -> str:
    """The API a path posts to, below any base path (`messages`, `countTokens`, …).

    `count_tokens`, `input_tokens` and `countTokens` beside `messages`, `responses`,
    `completions` and `streamGenerateContent`. Matched with the request: a counting call's
    body reads as the same neutral request as the answer it counts for, and must not be
    answered by that answer's stream.
    """
    return path.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]


def _label(exchange: Exchange) -> str:
    return f"{exchange.provider}, {exchange.model}"


def _drop(data: object, path: tuple[str, ...]) -> None:
    """Remove the field at `path` (a `*` step: every key or item) from `data`, in place."""
    if not path:
        return
    step, rest = path[0], path[1:]
    children: list[object]
    mapping, items = containers(data)
    if mapping is not None:
        if not rest:
            keys = list(mapping) if step == "*" else [step]
            for key in keys:
                mapping.pop(key, None)
            return
        children = list(mapping.values()) if step == "*" else [mapping.get(step)]
    elif items is not None:
        children = items if step == "*" else _indexed(items, step)
    else:
        return
    for child in children:
        _drop(child, rest)


def _indexed(items: list[Any], step: str) -> list[object]:
    return [items[int(step)]] if step.isdigit() and int(step) < len(items) else []


def _flat(value: object, path: str = "") -> dict[str, object]:
    """Every leaf of a JSON value by its path (`messages[0].content[1].text`)."""
    leaves: dict[str, object] = {}
    mapping, items = containers(value)
    if mapping:
        for key, child in mapping.items():
            leaves.update(_flat(child, f"{path}.{key}" if path else key))
    elif items:
        for n, child in enumerate(items):
            leaves.update(_flat(child, f"{path}[{n}]"))
    else:
        leaves[path] = value
    return leaves


def _differences(made: dict[str, object], recorded: dict[str, object]) -> list[str]:
    return list(_describe(made, recorded))


def _describe(made: dict[str, object], recorded: dict[str, object]) -> Iterator[str]:
    for path, value in made.items():
        if path not in recorded:
            yield f"  {path}: {_show(value)} in the request, absent from the recording"
        elif recorded[path] != value:
            yield _changed(path, value, recorded[path])
    for path, value in recorded.items():
        if path not in made:
            yield f"  {path}: {_show(value)} in the recording, absent from the request"


def _changed(path: str, made: object, recorded: object) -> str:
    if not (isinstance(made, str) and isinstance(recorded, str)):
        return f"  {path}: requested {_show(made)}, recorded {_show(recorded)}"
    at = next(
        (i for i, (a, b) in enumerate(zip(made, recorded, strict=False)) if a != b),
        min(len(made), len(recorded)),
    )
    start = max(0, at - 20)
    return (
        f"  {path}: differs at character {at + 1}\n"
        f"    requested: {_excerpt(made, start)}\n"
        f"    recorded:  {_excerpt(recorded, start)}"
    )


def _excerpt(text: str, start: int) -> str:
    piece = text[start : start + _EXCERPT]
    return ("…" if start else "") + repr(piece) + ("…" if start + _EXCERPT < len(text) else "")


def _show(value: object) -> str:
    text = orjson.dumps(value).decode() if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def unused_lines(recorded: list[Exchange], unused: list[int]) -> Iterator[str]:
    """One line per unused recording: its number, model and the last user text it sent."""
    for n in unused:
        exchange = recorded[n]
        yield f"  recording {n + 1} ({_label(exchange)}): {_show(_last_text(exchange.request))}"


def _last_text(request: dict[str, Any]) -> str:
    for message in reversed(as_list(request.get("messages"))):
        for part in as_list(as_dict(message).get("content")):
            text = as_dict(part).get("text")
            if isinstance(text, str) and as_dict(message).get("role") == "user":
                return text
    return ""
