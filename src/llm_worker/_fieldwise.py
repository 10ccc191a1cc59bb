"""One field-wise `__eq__` and `__repr__` for the model's many slotted dataclasses.

`@dataclass` compiles an `__eq__` and a `__repr__` for each class it makes (a source text,
then `exec`): for the 30-odd event and message classes that was about a tenth of what
`import llm_worker` and building a client cost (≈ 0.9 M instructions a class). These two
functions do what the generated ones do, read from `dataclasses.fields` at a class's first
comparison or repr, for every class alike:

- `__eq__`: `NotImplemented` unless both are of the same class; else the tuples of the fields
  compared (`compare=True`) are compared, as the generated method does (a tuple compares an
  item to itself as equal, so a field holding one NaN object still compares equal).
- `__repr__`: `Class(name=value!r, …)` over the fields shown (`repr=True`), `...` for an
  object met again inside its own repr.
- `__hash__` is `None`, as a dataclass with `eq=True` and not frozen has it.

A class takes them with `@fieldwise` over `@dataclass(slots=True, eq=False, repr=False)`;
frozen classes keep the generated methods (their `__hash__` is made from the fields).
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable
from dataclasses import fields
from operator import attrgetter
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ("fieldwise",)

_T = TypeVar("_T", bound=type)

_Key = Callable[[object], tuple[object, ...]]
_compared: dict[type, _Key] = {}
_shown: dict[type, tuple[str, ...]] = {}


def fieldwise(cls: _T) -> _T:
    """Give a dataclass made with `eq=False, repr=False` the field-wise `__eq__` and `__repr__`."""
    # `__hash__` None: unhashable, as a dataclass with `eq=True` that is not frozen.
    for name, method in (("__eq__", _eq), ("__repr__", _repr), ("__hash__", None)):
        setattr(cls, name, method)
    return cls


def _eq(self: DataclassInstance, other: object) -> bool:
    cls = self.__class__
    if other.__class__ is not cls:
        return NotImplemented
    key = _compared.get(cls)
    if key is None:
        key = _compared[cls] = _key([f.name for f in fields(self) if f.compare])
    return key(self) == key(other)


def _key(names: list[str]) -> _Key:
    # The tuple of the compared fields' values (`attrgetter` gives a tuple for two or more).
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


@reprlib.recursive_repr()
def _repr(self: DataclassInstance) -> str:
    cls = self.__class__
    names = _shown.get(cls)
    if names is None:
        names = _shown[cls] = tuple(f.name for f in fields(self) if f.repr)
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
    return f"{cls.__qualname__}({shown})"
