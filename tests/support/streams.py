"""Provider-neutral helpers of the client tests: run a client, check its events, assemble them.

Each provider's `test_<provider>_support.py` binds these to its client (a factory that builds
it for a `WireServer` or an `httpx.AsyncClient`) and keeps what is its own there (reading its
recordings, its summary of an answer, extra rules).

- `collect` / `replay` / `replay_bytewise`: the real client against a `WireServer` answer, or
  an in-process transport feeding one byte per read; every wait bounded;
- `recorded_response`: a recording's answer as the server sends it;
- `assemble`: the assistant `Message` of a finished stream, built by the library's own
  `Assembler` (what the Worker keeps in the history);
- `check_invariants`: the event-model rules every stream keeps, failed ones included.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import anyio
import httpx

from llm_worker.events import (
    BlockAbort,
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    ErrorEvent,
    Event,
    InputJsonDelta,
    ProviderMetadata,
    ResponseStatus,
    SignatureDelta,
    StatusEvent,
    TextDelta,
    ThinkingDelta,
    ToolUseMetadata,
)
from llm_worker.messages import Message, Origin, Request
from llm_worker.providers import HttpClient
from llm_worker.testing import Chunking, WireResponse, WireServer
from llm_worker.worker._assembler import Assembler
from support.recorded import load

TIMEOUT = 30.0

E = TypeVar("E", bound=Exception)


async def collect(
    client: HttpClient, request: Request, catch: type[E] = Exception
) -> tuple[list[Event], E | None]:
    """Every event of one stream, and the `catch` exception that ended it (if any)."""
    events: list[Event] = []
    error: E | None = None
    with anyio.fail_after(TIMEOUT):
        try:
            async for event in client.stream(request):
                events.append(event)
        except catch as exc:
            error = exc
    return events, error


async def replay(
    responses: Sequence[WireResponse],
    make_client: Callable[[WireServer], HttpClient],
    request: Request,
    catch: type[E] = Exception,
) -> tuple[list[Event], E | None, WireServer]:
    """Serve the answers in turn (retries take the next) to one request of a fresh client."""
    async with WireServer(responses) as server:
        client = make_client(server)
        try:
            events, error = await collect(client, request, catch)
        finally:
            await client.aclose()
    return events, error, server


class _OneByteAtATime(httpx.AsyncByteStream):
    def __init__(self, body: bytes) -> None:
        self._body = body

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for i in range(len(self._body)):
            yield self._body[i : i + 1]


async def replay_bytewise(
    response: WireResponse,
    make_client: Callable[[httpx.AsyncClient], HttpClient],
    request: Request,
) -> tuple[list[Event], Exception | None]:
    """The real client reading the body one byte per read, through an in-process transport.

    The same code path as over a socket (HTTP seam, framing, mapper) at a fraction of the
    cost: a socket write per byte costs ~0.2 ms, seconds for the larger recordings.
    """

    def handler(_: httpx.Request) -> httpx.Response:
        headers = {"content-type": response.content_type}
        stream = _OneByteAtATime(response.body_bytes())
        return httpx.Response(response.status, headers=headers, stream=stream)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        return await collect(make_client(http), request)


def recorded_response(
    api: str, name: str, chunking: Chunking | None = None, **options: Any
) -> WireResponse:
    """The recorded answer as the server sends it (status, content type, body)."""
    response = load(api, name)["response"]
    return WireResponse(
        response["body"],
        status=response["status"],
        content_type=response["content_type"],
        chunking=chunking or Chunking.whole(),
        **options,
    )


def assemble(events: Iterable[Event], origin: Origin) -> Message:
    """The assistant message of a finished stream, as the Worker keeps it."""
    assembler = Assembler(origin)
    for event in events:
        assembler.feed(event)
    return assembler.message


# -- the event-model rules -------------------------------------------------------------------

Deltas = Mapping[BlockType, tuple[type, ...]]

_OWN: dict[BlockType, type] = {
    BlockType.TEXT: TextDelta,
    BlockType.THINKING: ThinkingDelta,
    BlockType.TOOL_USE: InputJsonDelta,
}


def deltas(signed: Iterable[BlockType] = ()) -> Deltas:
    """The deltas each block type may carry: its own kind, and signatures where `signed`."""
    with_signature = set(signed)
    return {
        kind: (own, SignatureDelta) if kind in with_signature else (own,)
        for kind, own in _OWN.items()
    }


def check_invariants(
    events: list[Event], *, failed: bool, allowed: Deltas, reason_required: bool = True
) -> list[BlockStop]:
    """Assert the event-model rules; return the block stops.

    STARTED first (a failure may come before it) and COMPLETED last, or one `ErrorEvent` then
    FAILED last; one block open at a time, indexes 0, 1, 2, …, each delta of a kind `allowed`
    in the open block, a tool-use block (and only it) with `ToolUseMetadata`, an abort only
    right before the error; the stop reason on the last stop of a complete answer only (and
    there always, unless not `reason_required`: a provider that may end without one).
    """
    _check_statuses(events, failed=failed)
    stops = _check_blocks(events, allowed)
    for stop in stops[:-1]:
        assert stop.stop_reason is None and stop.raw_stop_reason is None, stop
    if failed:
        assert all(s.stop_reason is None for s in stops), "a failed answer must not look finished"
        return stops
    assert stops, "a complete answer has at least one block"
    last = stops[-1]
    assert last.stop_reason is not None or last.raw_stop_reason is None, last
    if reason_required:
        assert last.stop_reason is not None, "no block carried the stop reason"
    return stops


def _check_statuses(events: list[Event], *, failed: bool) -> None:
    statuses = [e.status for e in events if isinstance(e, StatusEvent)]
    errors = [n for n, e in enumerate(events) if isinstance(e, ErrorEvent)]
    if failed:
        # The closing status may carry the response's id and model (compared by status).
        assert _status(events[-1]) is ResponseStatus.FAILED, events[-1:]
        assert errors == [len(events) - 2], "one ErrorEvent, right before FAILED"
        assert statuses[:-1] in ([], [ResponseStatus.STARTED]), statuses
    else:
        assert not errors, f"unexpected error event {events[errors[0]]}"
        assert statuses == [ResponseStatus.STARTED, ResponseStatus.COMPLETED], statuses
        assert _status(events[-1]) is ResponseStatus.COMPLETED, events[-1:]
    if ResponseStatus.STARTED in statuses:
        assert events[0] == StatusEvent(ResponseStatus.STARTED)


def _status(event: Event) -> ResponseStatus | None:
    return event.status if isinstance(event, StatusEvent) else None


def _check_blocks(events: list[Event], allowed: Deltas) -> list[BlockStop]:
    open_block: BlockStart | None = None
    next_index = 0
    stops: list[BlockStop] = []
    for n, event in enumerate(events):
        if isinstance(event, BlockStart):
            assert open_block is None, f"block {event.index} started inside an open block"
            assert event.index == next_index
            tool = event.block_type is BlockType.TOOL_USE
            assert tool == isinstance(event.metadata, ToolUseMetadata), event
            provider = event.block_type is BlockType.PROVIDER
            assert provider == isinstance(event.metadata, ProviderMetadata), event
            open_block, next_index = event, next_index + 1
        elif isinstance(event, BlockDelta | BlockStop | BlockAbort):
            assert open_block is not None and event.index == open_block.index, (n, event)
            if isinstance(event, BlockDelta):
                kinds = allowed.get(open_block.block_type, ())  # provider blocks: none
                assert isinstance(event.delta, kinds), (open_block.block_type, event.delta)
                continue
            assert event.block_type is open_block.block_type, (n, event)
            open_block = None
            if isinstance(event, BlockStop):
                stops.append(event)
            else:
                assert isinstance(events[n + 1], ErrorEvent), (
                    "an abort comes right before the error"
                )
    assert open_block is None, "a block was left open"
    return stops
