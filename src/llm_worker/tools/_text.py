"""A tool's return value as the text a model reads: `as_output` and `json_text`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import orjson

if TYPE_CHECKING:
    from llm_worker.blobs import ToolOutput

__all__ = ("as_output", "json_text")

_PLAIN_JSON = (dict, list, tuple, int, float)  # bool is an int


def as_output(value: object) -> str | ToolOutput:
    """A tool's return value as what the model reads: a `str`, a `ToolOutput`, or JSON text."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, _PLAIN_JSON):
        return json_text(cast("object", value))
    from llm_worker.blobs import ToolOutput

    if isinstance(value, ToolOutput):
        return value
    return json_text(value)


def json_text(value: object) -> str:
    """`value` as JSON text; what JSON cannot hold is written with `str`."""
    try:
        return orjson.dumps(value, default=_jsonable, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:  # orjson.JSONEncodeError: integers past 64 bits, deep nesting, …
        pass
    from pydantic_core import to_json

    try:
        return to_json(value, fallback=str).decode()
    except ValueError:  # a circular structure
        return str(value)


def _jsonable(value: object) -> Any:
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value, fallback=str)
