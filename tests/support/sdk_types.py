"""A request body checked against an official SDK's request types (its TypedDicts).

pydantic validates an SDK's `Iterable[...]` fields lazily, so nested blocks would go
unchecked, and TypedDicts accept unknown keys; `mismatches` walks the body instead: every key
must be one the TypedDict declares, every `Required` key present, every value of the declared
type (a list for `Iterable`, one member of a union, a `Literal`'s value). A response model
(pydantic) where a request type is expected counts as a mismatch.
"""

from __future__ import annotations

import types
import typing
from collections import abc
from typing import Any

import typing_extensions as te
from pydantic import BaseModel

__all__ = ("mismatches",)

_LISTS = (list, abc.Iterable, abc.Sequence)
_WRAPPERS = (te.Required, te.NotRequired, te.ReadOnly, te.Annotated, typing.Annotated)
_SCALARS: dict[type, tuple[type, ...]] = {str: (str,), int: (int,), float: (int, float)}


def mismatches(value: Any, annotation: Any, path: str = "$") -> list[str]:
    """Where `value` differs from `annotation` (a TypedDict or a type inside one)."""
    origin = te.get_origin(annotation)
    args = te.get_args(annotation)
    if origin in _WRAPPERS:
        return mismatches(value, args[0], path)
    if origin in (typing.Union, types.UnionType):
        found = [mismatches(value, member, path) for member in args]
        return [] if [] in found else min(found, key=len)
    if origin in (te.Literal, typing.Literal):
        return [] if value in args else [f"{path}: {value!r} is not one of {args}"]
    if te.is_typeddict(annotation):
        return _typed_dict(value, annotation, path)
    if origin in _LISTS or getattr(annotation, "__name__", "") == "SequenceNotStr":
        return _array(value, args[0] if args else Any, path)
    return _plain(value, annotation, origin, path)


def _array(value: Any, inner: Any, path: str) -> list[str]:
    if not isinstance(value, list):
        return [f"{path}: not an array"]
    return [m for n, v in enumerate(value) for m in mismatches(v, inner, f"{path}[{n}]")]


def _typed_dict(value: Any, annotation: Any, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: not an object"]
    hints = te.get_type_hints(annotation, include_extras=True)
    found = [f"{path}.{k}: not a field of {annotation.__name__}" for k in value if k not in hints]
    found += [
        f"{path}.{k}: required by {annotation.__name__}"
        for k, hint in hints.items()
        if te.get_origin(hint) is te.Required and k not in value
    ]
    for key, item in value.items():
        if key in hints:
            found += mismatches(item, hints[key], f"{path}.{key}")
    return found


def _plain(value: Any, annotation: Any, origin: Any, path: str) -> list[str]:
    if annotation is type(None):
        return [] if value is None else [f"{path}: not null"]
    if annotation is bool:
        return [] if isinstance(value, bool) else [f"{path}: not a boolean"]
    if annotation in _SCALARS:
        ok = isinstance(value, _SCALARS[annotation]) and not isinstance(value, bool)
        return [] if ok else [f"{path}: not {annotation.__name__}"]
    if origin in (dict, abc.Mapping):
        return [] if isinstance(value, dict) else [f"{path}: not an object"]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [f"{path}: a response type ({annotation.__name__}) where a request type goes"]
    return []  # Any, object, and types a JSON body cannot hold
