"""A tool's return value as what a model reads: `as_output`, `split_media` and `json_text`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias, cast

import orjson

from llm_worker.messages import DocumentPart, ImagePart, MediaPart

if TYPE_CHECKING:
    from llm_worker.blobs import ToolOutput

__all__ = ("Mixed", "as_output", "json_text", "split_media")

_PLAIN_JSON = (dict, list, tuple, int, float)  # bool is an int

Mixed: TypeAlias = list[str | MediaPart]
"""Text and images or documents, in order: what a tool returns to show the model a picture."""


def as_output(value: object) -> str | ToolOutput | Mixed:
    """A tool's return value as what the model reads.

    A `str` as it is, a `ToolOutput` passed through, an image or document (alone, or in a
    list or tuple of strings and parts) as a `Mixed` list, anything else as JSON text.
    """
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    mixed = _mixed(value)
    if mixed is not None:
        return mixed
    if isinstance(value, _PLAIN_JSON):
        return json_text(cast("object", value))
    from llm_worker.blobs import ToolOutput

    if isinstance(value, ToolOutput):
        return value
    return json_text(value)


def _mixed(value: object) -> Mixed | None:
    if isinstance(value, ImagePart | DocumentPart):
        return [value]
    if not isinstance(value, list | tuple):
        return None
    items = cast("list[object] | tuple[object, ...]", value)
    if not any(isinstance(i, ImagePart | DocumentPart) for i in items):
        return None
    if not all(isinstance(i, str | ImagePart | DocumentPart) for i in items):
        return None  # parts among other values: JSON text, as before
    return cast("Mixed", list(items))


def split_media(mixed: Mixed) -> tuple[str, list[MediaPart]]:
    """The text of a `Mixed` list (its strings, one per line) and its images and documents."""
    texts = [item for item in mixed if isinstance(item, str)]
    return "\n".join(texts), [item for item in mixed if not isinstance(item, str)]


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
