"""Chat Completions tool-call fragments serialized into one open tool block at a time.

`ChatStreamMapper` feeds each delta's `tool_calls` to a `ToolCalls`; see its docstring for
how fragments are told apart (by `index`, and by `id` where servers reuse an index).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from llm_worker._json import as_str
from llm_worker.errors import MalformedStreamError
from llm_worker.providers._blocks import BlockEmitter, wrong_type
from llm_worker.providers._openai_chat_request import PROVIDER

__all__ = ("ToolCalls",)

_PROVIDER: Final = PROVIDER


@dataclass(slots=True)
class _Call:
    """A tool call not emitted yet."""

    id: str | None
    name: str | None
    args: list[str] = field(default_factory=lambda: [])


class ToolCalls:
    """Serializes tool-call fragments by call into one open tool block at a time.

    Calls are keyed by order of appearance, not by the wire `index`: OpenAI gives each
    parallel call its own index, but Ollama (and LiteLLM's `ollama_chat`, and proxies built on
    them) stream every call whole at `index` 0, each with its own `id`. So a fragment whose
    `id` differs from the id of the call last seen at its index, and that names its function,
    opens a new call; a fragment without an id continues the last call of its index (OpenAI
    sends the id once, in the first fragment), and one that repeats that call's id continues
    it too. A new id without a name continues the call: some servers (Poolside) give every
    fragment after the first an id of its own, and a call always names its function in its
    first fragment. A server that sends no ids but whole calls at one index is read the same
    way: a named fragment with arguments after a complete object is the next call (an object
    cannot grow).
    """

    __slots__ = (
        "_closed",
        "_id_of",
        "_ids",
        "_keys",
        "_last",
        "_live_args",
        "_live_ok",
        "_pending",
        "_seen",
        "live",
    )

    def __init__(self) -> None:
        self._pending: dict[int, _Call] = {}
        self.live: int | None = None
        self._live_args: list[str] = []
        self._live_ok = (-1, False)  # (arguments length checked, whether a complete object)
        self._closed: set[int] = set()
        self._ids: dict[str, int] = {}  # call id -> key
        self._id_of: dict[int, str] = {}  # key -> call id, where the call has one
        self._keys: dict[int, int] = {}  # wire index -> key of the last call seen there
        self._seen = 0  # calls seen: the next key
        self._last = -1  # key of the last fragment's call

    def feed(self, calls: Any, emitter: BlockEmitter) -> None:
        """Take the `tool_calls` fragments of one delta."""
        for call in calls:
            function: Any = call.get("function") or {}
            args = _arguments(function.get("arguments"))
            key = self._key(call, args)
            if key == self.live:
                if args:
                    self._live_args.append(args)
                    emitter.input_json(args)
            elif key in self._closed:
                _late(key, args)
            else:
                # Held until the call opens: counted now, so what is held stays in bounds.
                emitter.charge(len(args))
                self._buffer(key, call, function, args)
                self._advance(emitter)

    def _key(self, call: Any, args: str) -> int:
        call_id = call.get("id")
        if call_id is not None and call_id.__class__ is not str:
            raise wrong_type("a tool_calls fragment", "id", call_id)
        index = call.get("index")
        if type(index) is int:
            key = self._keys.get(index, -1)
            if key < 0 or self._other_call(key, call_id, call, args):
                # A first call at this index, or another call at a used one. (A call whose id
                # another call has is refused by the emitter: one id, one execution.)
                key = self._keys[index] = self._new()
        elif call_id:
            # No index (whole calls in a non-streamed answer, Gemini's compatible endpoint): a
            # new id is a new call, a known one continues its call ...
            key = self._ids.get(call_id, -1)
            if key < 0:
                key = self._new()
        else:
            # ... as does no id, unless a named call follows a whole one.
            key = self._last
            if key < 0 or self._other_call(key, None, call, args):
                key = self._new()
        self._last = key
        return key

    def _other_call(self, key: int, call_id: str | None, call: Any, args: str) -> bool:
        function: Any = call.get("function") or {}
        named = bool(function.get("name"))
        if call_id and self._id_of.get(key, call_id) != call_id:
            return named  # a new id: a new call if it names one, else a server's fresh id
        if not call_id and not named:
            return False  # OpenAI's continuation fragments
        # The same id again (or none, with a name): a repeat on a fragment of that call,
        # unless the call is already whole and more arguments come (one call sent twice under
        # one id, or whole calls without ids).
        return bool(args.strip()) and self._whole(key)

    def _whole(self, key: int) -> bool:
        if key in self._closed or (key == self.live and self._live_complete()):
            return True
        pending = self._pending.get(key)
        return pending is not None and _is_object("".join(pending.args))

    def _new(self) -> int:
        key = self._seen
        self._seen += 1
        return key

    def _buffer(self, key: int, call: Any, function: Any, args: str) -> None:
        name = function.get("name")
        if name is not None and name.__class__ is not str:
            raise wrong_type("a tool_calls fragment", "function.name", name)
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = _Call(None, None)
        if pending.id is None:
            pending.id = as_str(call.get("id")) or None
            if pending.id is not None:
                self._ids[pending.id] = key
                self._id_of[key] = pending.id
        if pending.name is None:
            pending.name = as_str(function.get("name")) or None
        if args:
            pending.args.append(args)

    def _advance(self, emitter: BlockEmitter) -> None:
        # Open buffered calls in index order while nothing blocks them: the live call must be
        # finished (a complete JSON object) and the next call must have its name.
        while self._pending:
            if self.live is not None:
                if not self._live_complete():
                    return
                self._close_live(emitter)
            index = min(self._pending)
            if self._pending[index].name is None:
                return
            self._open(index, self._pending.pop(index), emitter)

    def _live_complete(self) -> bool:
        text = "".join(self._live_args)
        checked, ok = self._live_ok
        if checked != len(text):
            ok = _is_object(text)
            self._live_ok = (len(text), ok)
        return ok

    def _open(self, index: int, call: _Call, emitter: BlockEmitter) -> None:
        call_id = call.id or f"call_{uuid.uuid4().hex[:24]}"  # some servers send no id
        emitter.tool_use(call_id, call.name or "")
        args = "".join(call.args)
        self.live = index
        self._live_args = [args] if args else []
        self._live_ok = (-1, False)
        if args:
            emitter.input_json(args, charged=len(args))

    def _close_live(self, emitter: BlockEmitter) -> None:
        if self.live is not None:
            emitter.stop()
            self._closed.add(self.live)
            self.live = None

    def interrupt(self, emitter: BlockEmitter) -> None:
        """Text or thinking arrives: the live call is over (its block closes)."""
        self._close_live(emitter)

    def finish(self, emitter: BlockEmitter) -> None:
        """The answer is complete: close the live call, emit the buffered ones in order."""
        self._close_live(emitter)
        for index in sorted(self._pending):
            self._open(index, self._pending.pop(index), emitter)
            self._close_live(emitter)


def _arguments(value: Any) -> str:
    if value is None or type(value) is str:
        return value or ""
    # Some servers send the arguments as a JSON object rather than as JSON text.
    return orjson.dumps(value).decode()


def _is_object(text: str) -> bool:
    try:
        return type(orjson.loads(text)) is dict
    except orjson.JSONDecodeError:
        return False


def _late(index: int, args: str) -> None:
    if args.strip():
        raise MalformedStreamError(
            f"tool call {index} received more arguments after it was finished",
            provider=_PROVIDER,
        )
