"""Review probes for `Worker.subscribe` (issue #28 item 11): odd callables as event methods.

Static and class methods, partials, callable instances and an object whose `__getattr__`
claims every method are subscribers like any other; a plain function that wraps an async one
(a decorator without `markcoroutinefunction`) passes the checks at registration, so its first
event refuses it with a `ConfigurationError` naming the method, instead of dropping its work
with only a "never awaited" warning.
"""

from __future__ import annotations

import functools
import gc
import warnings
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from llm_worker import ConfigurationError, TextBlockEvent, Worker
from llm_worker.hooks import Subscriber
from llm_worker.testing import ScriptedClient, ScriptedResponse

pytestmark = pytest.mark.anyio

TIMEOUT = 5.0
SEEN: list[str] = []


def answering() -> Worker:
    return Worker(ScriptedClient([ScriptedResponse.text("hello")]))


def record(kind: str, text: str) -> None:
    SEEN.append(f"{kind} {text}")


class Static:
    @staticmethod
    def on_text_complete(text: str) -> None:
        record("static", text)


class Class:
    @classmethod
    def on_text_complete(cls, text: str) -> None:
        record(cls.__name__, text)


class Partial:
    on_text_complete = functools.partial(record, "partial")


class Instance:
    class Handler:
        def __call__(self, text: str) -> None:
            record("instance", text)

    on_text_complete = Handler()


class Everything:
    """Claims every method: each takes whatever it is given."""

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args: SEEN.append(name)  # pyright: ignore[reportUnknownLambdaType]


@pytest.mark.parametrize("subscriber", [Static(), Class(), Partial(), Instance()])
async def test_odd_callables_are_methods_like_any_other(subscriber: object) -> None:
    SEEN.clear()
    worker = answering()
    worker.subscribe(subscriber)
    with anyio.fail_after(TIMEOUT):
        await worker.run("hi")
    assert len(SEEN) == 1 and SEEN[0].endswith(" hello")


async def test_an_object_claiming_every_method_gets_every_event() -> None:
    SEEN.clear()
    worker = answering()
    worker.subscribe(Everything())
    with anyio.fail_after(TIMEOUT):
        await worker.run("hi")
    for name in ("on_turn_start", "new_text_block_scope", "on_text_block", "on_text_complete"):
        assert name in SEEN
    assert SEEN[-1] == "on_turn_end"


def sync_wrapper(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any) -> Any:
        return fn(*args)

    return call


async def _complete(text: str) -> None:
    SEEN.append(text)


async def _block(scope: object, event: TextBlockEvent) -> None:
    SEEN.append(type(event).__name__)


class WrappedComplete(Subscriber):
    on_text_complete = staticmethod(sync_wrapper(_complete))


class WrappedBlock:
    on_text_block = staticmethod(sync_wrapper(_block))


@pytest.mark.parametrize(
    ("subscriber", "method"),
    [(WrappedComplete(), "WrappedComplete.on_text_complete"),
     (WrappedBlock(), "WrappedBlock.on_text_block")],
)  # fmt: skip
async def test_a_sync_wrapper_of_an_async_method_is_refused_at_its_first_event(
    subscriber: object, method: str
) -> None:
    SEEN.clear()
    worker = answering()
    worker.subscribe(subscriber)  # its signature says plain function: nothing to see yet
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with anyio.fail_after(TIMEOUT), pytest.raises(ConfigurationError, match=method):
            await worker.run("hi")
        gc.collect()
    assert SEEN == []
    # Only this test's coroutines: gc may collect another test's leftovers here too.
    names = ("'_complete' was never awaited", "'_block' was never awaited")
    assert not [w for w in caught if str(w.message).endswith(names)]


class NoScopeMaker(Subscriber[list[str]]):
    """pyright takes it: the scope is typed a list, but nothing makes one."""

    def on_text_block(self, scope: list[str], event: TextBlockEvent) -> None:
        scope.append(type(event).__name__)


class Inherits(NoScopeMaker):
    pass


class MakesIt(NoScopeMaker):
    def new_text_block_scope(self) -> list[str]:
        return []


@pytest.mark.parametrize("subscriber", [NoScopeMaker(), Inherits()])
def test_a_typed_scope_without_its_maker_is_refused_at_subscribe(subscriber: object) -> None:
    worker = answering()
    with pytest.raises(ConfigurationError, match=r"on_text_block takes a list\[str\] scope"):
        worker.subscribe(subscriber)


async def test_a_typed_scope_with_its_maker_gets_a_fresh_one() -> None:
    worker = answering()
    made = MakesIt()
    worker.subscribe(made)
    with anyio.fail_after(TIMEOUT):
        assert (await worker.run("hi")).text == "hello"
