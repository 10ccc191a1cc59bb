"""The events' and messages' shared `__eq__` / `__repr__` are what `@dataclass` generates.

`llm_worker._fieldwise` gives the model's slotted dataclasses one field-wise `__eq__` and
`__repr__` instead of a compiled pair per class (import time). Each class is checked here
against a dataclass `@dataclass` makes from the same fields (`compare`, `repr` as declared),
holding the same values: equality both ways, `repr` to the byte (a prompt-cache key is a
digest of a message's repr), unhashability, and a value that holds its own object.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import fields
from typing import Any

import pytest

from llm_worker import events, messages
from llm_worker._fieldwise import fieldwise


@fieldwise
@dataclasses.dataclass(slots=True, eq=False, repr=False)
class _Probe:
    a: int


SHARED_EQ = _Probe.__eq__
CLASSES = [
    cls
    for module in (events, messages)
    for cls in vars(module).values()
    if isinstance(cls, type)
    and dataclasses.is_dataclass(cls)
    and cls.__module__ == module.__name__
    and cls.__dict__.get("__eq__") is SHARED_EQ
]
NAN = float("nan")
POOL: tuple[object, ...] = (None, 0, 1, 1.0, "a", "b", NAN, (), ("x",), ["x"], {"k": 1}, b"\x00")


def made(cls: type, values: list[object]) -> Any:
    obj = object.__new__(cls)
    for f, value in zip(fields(cls), values, strict=True):
        object.__setattr__(obj, f.name, value)
    return obj


def reference(cls: type) -> type:
    spec = [
        (f.name, object, dataclasses.field(compare=f.compare, repr=f.repr)) for f in fields(cls)
    ]
    ref = dataclasses.make_dataclass(cls.__name__, spec, slots=True)
    ref.__qualname__ = cls.__qualname__
    return ref


def test_every_event_and_message_class_but_the_frozen_ones_shares_them() -> None:
    names = {cls.__name__ for cls in CLASSES}
    assert {"TextDelta", "BlockStart", "UsageEvent", "Message", "TextPart", "Request"} <= names
    assert len(CLASSES) == 29
    for frozen in (messages.Origin, messages.SpecificTool, messages.OutputSchema):
        assert frozen not in CLASSES
        hash(made(frozen, [None] * len(fields(frozen))))  # hashable, from its fields


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_eq_and_repr_are_the_generated_ones(cls: type) -> None:
    ref = reference(cls)
    rng = random.Random(cls.__name__)
    size = len(fields(cls))
    assert cls.__hash__ is None
    for _ in range(60):
        left = [rng.choice(POOL) for _ in range(size)]
        # Often equal but for one field, so compare=False fields and each field count.
        right = list(left)
        if size and rng.random() < 0.7:
            right[rng.randrange(size)] = rng.choice(POOL)
        x, y = made(cls, left), made(cls, right)
        rx, ry = made(ref, left), made(ref, right)
        assert repr(x) == repr(rx)
        assert (x == y, x != y, y == x) == (rx == ry, rx != ry, ry == rx)
        assert x == made(cls, left)  # equal to a copy, NaN fields too (the same object)
        assert x != rx  # another class: NotImplemented both ways, then identity
        assert x != object()


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_an_object_inside_its_own_repr_shows_as_dots(cls: type) -> None:
    ref = reference(cls)
    shown = [f for f in fields(cls) if f.repr]
    if not shown:
        return
    values: list[object] = [None] * len(fields(cls))
    x, rx = made(cls, values), made(ref, values)
    object.__setattr__(x, shown[0].name, [x])
    object.__setattr__(rx, shown[0].name, [rx])
    assert repr(x) == repr(rx)
    assert "[...]" in repr(x)


def test_a_message_repr_is_the_same_text_as_before() -> None:
    # The prompt-cache key digests this text (`worker._cache.conversation_key`).
    message = messages.Message.user("hi")
    assert repr(message) == (
        "Message(role='user', content=[TextPart(text='hi', signature=None, item_id=None, "
        "origin=None, citations=[], phase=None, type='text')])"
    )
    assert message == messages.Message.user("hi")
    assert message != messages.Message.user("ho")
    assert repr(events.TextDelta("x")) == "TextDelta(text='x', logprobs=None)"
