"""A request body as JSON bytes, or a typed error naming the text no wire can carry."""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import orjson

from llm_worker._json import not_unicode
from llm_worker._wide_json import wide_json
from llm_worker.errors import InvalidMessagesError

__all__ = ("encoded", "encoded_request")

_R = TypeVar("_R")


def encoded_request(build: Callable[[_R], Mapping[str, Any]], request: _R) -> bytes:
    """`build(request)` as JSON bytes, the body built, encoded and dropped in one stretch.

    A long run's body is thousands of dicts and lists, alive only until it is encoded. Built
    under the cyclic garbage collector, each of them counted towards its passes: a dozen
    passes per request walked the body still being built and moved it to the older
    generations, whose growth then set off full passes over the whole heap (all the history
    included): at turn 1,000 one full pass took ~40 ms, and the collector ~14 % of a
    1,000-turn run's CPU. None of those objects can be in a cycle (plain JSON data, freed by
    reference counting the moment the bytes exist), so the collector is paused for this
    stretch: it is synchronous (no other task runs in it), bounded by one body, and the
    collector is switched on again only if it was on (a caller's `gc.disable()` is kept).
    Another thread's `gc.disable()` made within the same few milliseconds is undone; no
    garbage is lost, only collected after.

    Raises:
        InvalidMessagesError: As `encoded`.
    """
    if not gc.isenabled():
        return encoded(build(request))
    gc.disable()
    try:
        return encoded(build(request))
    finally:
        gc.enable()


_BUFFER = 4096  # orjson's smallest output buffer


def encoded(body: Mapping[str, Any]) -> bytes:
    """`body` as JSON, before anything is sent.

    Raises:
        InvalidMessagesError: Text in the request is not valid Unicode (a lone surrogate,
            e.g. from `os.fsdecode` or a cut UTF-16 string): named by its place in the body,
            e.g. `messages[3].content[0].text` — never by its content.
    """
    try:
        out = orjson.dumps(body)
    except orjson.JSONEncodeError as exc:
        try:  # a model's integer past 64 bits goes back with its digits
            return wide_json(body, exc)
        except orjson.JSONEncodeError:
            pass
        where = not_unicode(body, "")
        if where is None:
            raise InvalidMessagesError(f"the request body cannot be JSON: {exc}") from None
        raise InvalidMessagesError(
            f"the request holds text that is not valid Unicode (a lone surrogate) at "
            f"{where or 'the top'}: no wire can carry it; replace it before sending "
            "(e.g. text.encode('utf-8', 'replace').decode())"
        ) from None
    # orjson writes into a buffer of 4 KiB at least and hands it over whole: a request body
    # lives as long as its answer streams, so 1,000 runs at once held 4 MiB for bodies of a
    # few hundred bytes. A copy of a small one is its own size.
    return memoryview(out).tobytes() if len(out) < _BUFFER else out
