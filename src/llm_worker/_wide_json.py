"""JSON text of values orjson refuses only for an integer past 64 bits (it writes none).

A model may send such an integer in a call's arguments (the tool-call parser keeps its
digits), and a tool may return one: the web streams write it with its exact digits, as
JSON allows, rather than failing the run. A browser reads it as the nearest double, which
the result signatures expect (`_sign._canonical`).
"""

from __future__ import annotations

import json
import math
from typing import Any, cast

import orjson

__all__ = ("exact_loads", "json_bytes", "wide_json")

# orjson refuses nesting past 255 levels: a value that deep fails as before, unwalked.
_DEPTH = 256
_LOW, _HIGH = -(2**63), 2**64  # orjson writes every integer in [_LOW, _HIGH)


def json_bytes(value: object) -> bytes:
    """`value` as orjson writes it, or with exact digits where an integer is past 64 bits.

    Raises:
        orjson.JSONEncodeError: What orjson raised, for anything else it refuses (a lone
            surrogate, a type JSON has no place for, nesting past its depth).
    """
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError as exc:
        return wide_json(value, exc)


def wide_json(value: object, exc: Exception) -> bytes:
    """After orjson refused `value` with `exc`: its JSON if only a wide integer was at fault.

    Non-finite floats become `null`, as orjson writes them; otherwise `exc` is raised again.
    """
    if not _has_wide(value, 0):
        raise exc
    try:
        text = json.dumps(_finite(value), ensure_ascii=False, separators=(",", ":"))
        return text.encode()
    except (TypeError, ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        raise exc from None


# A run of digits an integer past 64 bits needs (2**63 has 19); a string's digits may match
# too. Looked for as a run of "9" in the text with every digit made "9", every other byte a
# space: two passes in C at a byte each (`re`'s `[0-9]{19,}` tried a match at every offset,
# ~36 ns a character: 27 times the parse of a call's arguments).
_DIGITS = bytes(0x39 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_RUN = b"9" * 19


def exact_loads(text: str | bytes) -> Any:
    """`text` parsed as orjson parses it, but integers past 64 bits keep their digits.

    orjson reads such an integer as the nearest float (a payment of 2**70 + 1 would be
    resumed as 2**70); only text that orjson accepted and that holds a long run of digits
    is parsed again, by the standard parser, which reads the same values otherwise.

    Raises:
        orjson.JSONDecodeError: `text` is not JSON (as orjson judges it).
    """
    value = orjson.loads(text)
    data = text.encode() if isinstance(text, str) else text  # (orjson took it: no lone surrogate)
    if data.translate(_DIGITS).find(_LONG_RUN) < 0:
        return value
    try:
        return json.loads(text)
    except RecursionError:  # nested deeper than the standard parser goes: as orjson read it
        return value


def _has_wide(value: object, depth: int) -> bool:
    if depth >= _DEPTH:
        return False
    kind = type(value)
    if kind is int:
        return not _LOW <= cast(int, value) < _HIGH
    if kind is dict:
        items = cast("dict[object, object]", value).values()
        return any(_has_wide(v, depth + 1) for v in items)
    if kind is list or kind is tuple:
        return any(_has_wide(v, depth + 1) for v in cast("list[object]", value))
    return False


def _finite(value: object) -> Any:
    kind = type(value)
    if kind is float:
        return value if math.isfinite(cast(float, value)) else None
    if kind is dict:
        return {k: _finite(v) for k, v in cast("dict[object, object]", value).items()}
    if kind is list or kind is tuple:
        return [_finite(v) for v in cast("list[object]", value)]
    return value
