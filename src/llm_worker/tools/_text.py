"""A tool's return value as what a model reads: `as_output`, `split_media` and `json_text`."""

from __future__ import annotations

import dataclasses
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

    A `str` as it is, a `ToolOutput` passed through, an image or document (alone, in a list
    or tuple of strings and parts, or inside JSON-like data where a placeholder takes its
    place in the text) as a `Mixed` list, anything else as JSON text.
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
    walked = isinstance(value, list | tuple | dict) or _fields(value) is not None
    if not walked or not _holds_media(cast("object", value)):
        return None
    items = cast("list[object]", value)
    if isinstance(value, list | tuple) and all(isinstance(i, (str, *MediaTypes)) for i in items):
        return cast("Mixed", list(items))
    return _lifted(cast("object", value))


MediaTypes = (ImagePart, DocumentPart)


class _Found(Exception):
    pass


def _spot(value: object) -> object:
    if isinstance(value, MediaTypes):
        raise _Found
    return _fields(value)  # None for other types: only whether a part is inside matters


def _fields(value: object) -> dict[str, object] | None:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return None


def _holds_media(value: object) -> bool:
    # orjson walks the value in C; a Python walk of every large JSON result would cost more.
    option = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS
    try:
        orjson.dumps(value, default=_spot, option=option)
    except TypeError as exc:
        return isinstance(exc.__cause__, _Found)
    return False


def _lifted(value: object) -> Mixed | None:
    # Parts inside JSON-like data ({"caption": ..., "image": part}) go to the media, a
    # placeholder naming each stays in the JSON text: an image is never written as text.
    media: list[MediaPart] = []
    rest = _lift(value, media, set(), 0)
    return [json_text(rest), *media] if media else None


def _lift(value: object, media: list[MediaPart], seen: set[int], depth: int) -> object:
    if isinstance(value, MediaTypes):
        media.append(value)
        return f"[{value.type} {len(media)}: {value.media_type or 'by url'}]"
    value = cast("object", _fields(value) or value)
    key = id(value)
    if depth > 32 or key in seen or not isinstance(value, dict | list | tuple):
        return value  # a cycle or a deep structure: JSON text handles it as before
    seen.add(key)
    if isinstance(value, dict):
        pairs = cast("dict[object, object]", value).items()
        return {k: _lift(v, media, seen, depth + 1) for k, v in pairs}
    return [_lift(v, media, seen, depth + 1) for v in cast("list[object]", value)]


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
