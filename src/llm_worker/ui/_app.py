"""What both web adapters do around a run: the Worker per request, the pause store, the HTTP.

`Endpoint` answers the ASGI requests of an adapter: the POST that starts (or resumes) a run,
and, when runs are resumable, the `GET {path}/{id}/stream` that reconnects to one and the
`DELETE {path}/{id}/stream` that stops it. A protocol adapter says only how a request body
becomes a run (`_begin`).
"""

from __future__ import annotations

import inspect
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Mapping,
    Sequence,
)
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import anyio

from llm_worker._json import as_dict, as_list
from llm_worker._log import logger
from llm_worker.errors import ConfigurationError, InvalidMessagesError, PauseStateError
from llm_worker.messages import Message, Origin, ToolUsePart
from llm_worker.sessions import Session, SessionRecord
from llm_worker.state import Decision, PauseState, RunCompleted
from llm_worker.ui import _sign as sign
from llm_worker.ui._asgi import BadRequest, Receive, Scope, Send, read_json, send_json, stream_sse
from llm_worker.ui._auth import Authorize, Refused, chat_key, owner_of
from llm_worker.ui._errors import GENERIC_ERROR, ErrorText
from llm_worker.ui._frontend import FrontendTool, add_frontend_tools
from llm_worker.ui._record import MemoryToolRecord, Proven, Recorder, ToolRecord, reconcile
from llm_worker.ui._resumable import ResumableStreams, RunLog, StreamGone
from llm_worker.ui._session import NO_PAUSE_STORE, SessionFrom, close_session, open_session
from llm_worker.ui._sign import Signer
from llm_worker.ui._steer import Running, steer_id
from llm_worker.ui._store import MemoryPauseStore, PauseStore
from llm_worker.worker import RunStream, Worker
from llm_worker.worker._decisions import apply_decisions
from llm_worker.worker._toolset import check_resumable

__all__ = (
    "BODY_TIMEOUT",
    "MAX_BODY",
    "MAX_MESSAGES",
    "MAX_PARTS",
    "Begun",
    "Endpoint",
    "WorkerFactory",
    "check_edits",
    "check_id",
    "encoded",
    "make_worker",
    "off_loop",
    "origin_of",
    "resuming",
    "run_events",
    "start_run",
)

_T = TypeVar("_T")

WorkerFactory = Callable[..., "Worker[Any] | Awaitable[Worker[Any]]"]
"""What the adapters call once per request for a fresh `Worker` (tools, system prompt, model):
with no argument, or with the request's JSON body when it takes one (to read a thread id,
AG-UI `state` / `context`, or your own `body` fields)."""

MAX_BODY = 32 << 20
"""The default `max_body_bytes`: larger request bodies are refused (413)."""
MAX_MESSAGES = 5_000
"""The default `max_messages`: a request holding more is refused (413)."""
MAX_PARTS = 20_000
"""The default `max_parts`: a request holding more message parts (and tools, resume answers)
is refused (413). Converting one takes about 10 µs: 900,000 took 8.9 s of one core."""
BODY_TIMEOUT = 30.0
"""The default `body_timeout`: seconds a client has to send its whole body (else 408)."""
OFF_LOOP_PARTS = 1_000  # a history past this is converted in a worker thread
# A body of more JSON items (`{`, `[`, `,`, `:`) than this many per part allowed is refused
# before it is decoded: the decoding holds the GIL, a thread or not (900,000 objects: 0.3 s
# idle, 1.2 s on a busy host; 400,000 items, the default's bound: 0.1-0.4 s on a busy one).
ITEMS_PER_PART = 20

MAX_ID = 1024
"""The longest id (chat, thread, run, message) a request may name: the server keeps ids (the
pause, the resumable run, the record), and its bounds count entries, not the bytes of keys."""

REFUSED = "this request may not act on the chat"
"""The 403 text of a request `authorize` refused: the same whether the chat exists or not."""

_log = logger("llm_worker.ui")


async def make_worker(factory: WorkerFactory, body: dict[str, Any]) -> Worker:
    """The factory's Worker (given the body if it takes an argument; awaited if async).

    Raises:
        BadRequest: The factory failed or returned no Worker (500, a generic text: its
            exception, logged on `llm_worker.ui`, may name files, hosts or credentials).
    """
    try:
        worker = factory(body) if _takes_argument(factory) else factory()
        if inspect.isawaitable(worker):
            worker = await worker
        if not isinstance(worker, Worker):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"the worker factory returned {worker!r}, not a Worker")
    except Exception as exc:
        _log.error("the worker factory failed", exc_info=exc)
        raise BadRequest(500, GENERIC_ERROR) from exc
    return worker


def _takes_argument(factory: WorkerFactory) -> bool:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: called without arguments
        return False
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return any(p.kind in kinds or p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)


async def off_loop(convert: Callable[[list[Any]], _T], messages: list[Any]) -> _T:
    """`convert(messages)`, in a worker thread when they hold many parts.

    The conversion is pure CPU (about 10 µs a part): on the event loop a long history would
    stall every other stream for its duration.
    """
    if _count(messages) <= OFF_LOOP_PARTS:
        return convert(messages)
    return await anyio.to_thread.run_sync(convert, messages)


def check_counts(body: dict[str, Any], max_messages: int, max_parts: int) -> None:
    """Refuse a body of more messages or parts than the adapter converts (413).

    Parts are a Vercel message's `parts`, an AG-UI message's content items and tool calls,
    and the body's `tools` and `resume` entries: what the adapters convert one by one.
    Counting them is a few list lengths, done before any conversion.
    """
    messages = as_list(body.get("messages"))
    if len(messages) > max_messages:
        text = f"the request holds {len(messages):,} messages, over the limit of {max_messages:,}"
        raise BadRequest(413, text + " (max_messages)")
    parts = _count(messages) + len(as_list(body.get("tools"))) + len(as_list(body.get("resume")))
    if parts > max_parts:
        text = f"the request holds {parts:,} message parts, over the limit of {max_parts:,}"
        raise BadRequest(413, text + " (max_parts)")


def _count(messages: list[Any]) -> int:
    total = 0
    for message in messages:
        if isinstance(message, dict):
            fields = cast("dict[str, Any]", message)  # JSON: checked field by field below
            for name in ("parts", "content", "toolCalls"):
                if isinstance(items := fields.get(name), list):
                    total += len(cast("list[Any]", items))
    return total


def check_id(value: str, what: str) -> str:
    """`value`, an id the server keeps; refused (400) past `MAX_ID` characters.

    Raises:
        BadRequest: The id is longer than `MAX_ID`.
    """
    if len(value) > MAX_ID:
        raise BadRequest(400, f"the {what} is {len(value):,} characters, over {MAX_ID:,}")
    return value


def origin_of(worker: Worker) -> Origin:
    """The provider and model the Worker stamps on its opaque data."""
    return Origin(worker.client.provider, worker.client.model)


def start_run(worker: Worker, history: list[Message]) -> RunStream:
    """The run answering the browser's messages.

    They are the conversation: all but the last are the history, the last (the user's new
    message, or the results of front-end tools) is the run's input.
    """
    worker.history[:] = history[:-1]
    return worker.stream(history[-1:])


async def run_events(
    start: Callable[[], RunStream],
    store: PauseStore,
    key: str,
    record: ToolRecord | None = None,
    paused: Sequence[ToolUsePart] = (),
) -> AsyncGenerator[object, None]:
    """The events of the run `start` opens; a pause is stored before the browser can see it.

    A run without a key (a request naming no chat) keeps no pause: nothing could resume it
    but another anonymous request, which must never reach it. Each tool result goes into
    `record` as it comes, before the browser sees it (a stop or a disconnect later must not
    lose what the tool did), with the call it answers: one the run made, or, resuming a
    pause, one of its `paused` calls.

    Close it (`aclosing`) when the reader stops early: that closes the run, which cancels
    its work cleanly.
    """
    recorder = Recorder(paused)
    async with start() as run:
        async for event in run:
            if key and record is not None and (entry := recorder.entry(event)) is not None:
                await record.add(key, [entry])
            if isinstance(event, RunCompleted) and event.result.state is not None and key:
                await store.put(key, event.result.state)
            yield event


async def resuming(
    store: PauseStore,
    key: str,
    state: PauseState,
    make: Callable[[], Awaitable[Worker]],
    decisions: Mapping[str, Decision],
    *,
    editable: Collection[str] = (),
) -> Worker:
    """The Worker that resumes `state`, once the decisions are known to fit it.

    A request that cannot resume (decisions naming calls that are not pending, edited
    arguments the tool refuses or that `editable` does not allow, a factory that fails) puts
    the pause back, so the browser can answer again: taking it is what makes a decision
    apply once, not what refuses one.

    Raises:
        BadRequest: The decisions do not fit the paused calls (400).
    """
    try:
        check_edits(state, decisions, editable)
        worker = await make()
        try:
            pending = apply_decisions(state, decisions, worker.tools)
            check_resumable(worker.tools, pending, state.tools)
        except PauseStateError as exc:
            await worker.aclose()
            raise BadRequest(400, f"the decisions do not fit the paused run: {exc}") from exc
    except BaseException:
        with anyio.CancelScope(shield=True):
            await store.put(key, state)
        raise
    return worker


def check_edits(
    state: PauseState, decisions: Mapping[str, Decision], editable: Collection[str]
) -> None:
    """Refuse edited arguments for a call of a tool not in `editable`.

    An approval answers "may this call run?"; arguments a browser sends with it would run
    the tool with whatever the browser chose, so an app allows that per tool.

    Raises:
        BadRequest: An approval edits a call of a tool that does not allow it (400).
    """
    names = {p.call.id: p.call.name for p in state.pending}
    for call_id, decision in decisions.items():
        name = names.get(call_id)
        if decision.allow and decision.input is not None and name not in editable:
            raise BadRequest(400, f"the arguments of {name or call_id!r} cannot be edited")


@dataclass(slots=True)
class Begun:
    """A run a POST started: its SSE events, and what a resumable log of it needs.

    Attributes:
        events: The run's SSE events (closing them cancels the run).
        key: The owner's chat the run belongs to (`chat_key`; empty: a run never kept).
        run_id: The run's own id (AG-UI `runId`; the assistant message id for Vercel).
        stopped: The SSE events that end the log of a run stopped by a stop call.
    """

    events: AsyncGenerator[str, None]
    key: str
    run_id: str
    stopped: tuple[str, ...]


class Endpoint:
    """The ASGI side shared by the adapters: requests in, SSE out, resumable runs kept.

    Subclasses set `headers` (of the SSE response), `post_hint` (the 405 text),
    `stopped` (the events that end a stopped run) and `behind` (those that end the stream of
    a reader that fell behind the log's bounds), and implement `_chat_id(body)` and
    `_begin(body, key)`; the AG-UI adapter also `_rejoin(body, key)`, its reconnect by POST.

    Every request goes through `authorize` first (see `Authorize`): its pause, its run, a
    reconnect and a stop are all found under the owner and the chat id together.
    """

    headers: Mapping[str, str] = {}
    post_hint = "POST here"
    stopped: tuple[str, ...] = ()  # the SSE events that end a stopped run's log
    behind: tuple[str, ...] = ()  # what ends the stream of a reader the log's bounds dropped

    def __init__(
        self,
        worker_factory: WorkerFactory,
        *,
        store: PauseStore | None = None,
        max_body_bytes: int = MAX_BODY,
        on_error: ErrorText | None = None,
        resumable: ResumableStreams | bool = False,
        authorize: Authorize | None = None,
        editable_tools: Collection[str] = (),
        max_messages: int = MAX_MESSAGES,
        max_parts: int = MAX_PARTS,
        body_timeout: float | None = BODY_TIMEOUT,
        signing_key: bytes | str | None = None,
        trust_client_history: bool = True,
        record: ToolRecord | None = None,
        session_from: SessionFrom | None = None,
    ) -> None:
        self.worker_factory = worker_factory
        self.session_from = session_from
        self.store: PauseStore = store if store is not None else MemoryPauseStore()
        self.max_body_bytes = max_body_bytes
        self.max_messages = max_messages
        self.max_parts = max_parts
        self.body_timeout = body_timeout
        self.on_error = on_error
        if resumable is True:
            resumable = ResumableStreams()
        self.streams = resumable if isinstance(resumable, ResumableStreams) else None
        self.authorize = authorize
        self.editable_tools = frozenset(editable_tools)
        # None: the process's key (`LLM_WORKER_SIGNING_KEY`, else random); made here so that
        # a key too short fails at start, not at the first request.
        self.signer = Signer(signing_key) if signing_key is not None else None
        if self.signer is None:
            sign.process_signer()
        self.trust_client_history = trust_client_history
        self.record: ToolRecord = record if record is not None else MemoryToolRecord()
        self.running = Running()  # the runs streaming now: `…/{id}/steer` reaches them

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one ASGI request."""
        if scope["type"] != "http":
            return
        # The run's tasks start inside: they sign and check with this adapter's key.
        token = sign.use(self.signer)
        try:
            await self._http(scope, receive, send)
        finally:
            sign.reset(token)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        method, stream_id = scope["method"], _stream_id(scope)
        if (steered := steer_id(scope)) is not None:
            try:
                chat_id = check_id(steered, "chat id")
            except BadRequest as exc:
                await send_json(send, exc.status, {"error": str(exc)})
                return
            await self.running.answer(self.authorize, scope, receive, send, chat_id)
            return
        if stream_id is not None:
            await self._stream_call(scope, receive, send, stream_id)
            return
        if method != "POST":
            await send_json(send, 405, {"error": self.post_hint})
            return
        await self._post(scope, receive, send)

    async def _stream_call(self, scope: Scope, receive: Receive, send: Send, chat_id: str) -> None:
        # Without resumable runs nothing is kept: a client resuming on mount gets the
        # 204 "nothing to resume" (the `ai` client throws on a 405).
        method, streams = scope["method"], self.streams
        if method not in ("GET", "DELETE"):
            await send_json(send, 405, {"error": "GET (reconnect) or DELETE (stop) here"})
            return
        try:
            check_id(chat_id, "chat id")
            key = chat_key(await owner_of(self.authorize, scope, chat_id), chat_id)
        except Refused:
            await send_json(send, 403, {"error": REFUSED})
            return
        except BadRequest as exc:
            await send_json(send, exc.status, {"error": str(exc)})
            return
        if method == "GET":
            log = streams.get(key) if streams is not None else None
            await self._replay(log, _last_event_id(scope), receive, send)
        else:
            stopped = streams is not None and streams.cancel(key)
            await send_json(send, 200 if stopped else 404, {"stopped": stopped})

    async def _post(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            raw = await read_json(
                receive,
                self.max_body_bytes,
                seconds=self.body_timeout,
                max_items=ITEMS_PER_PART * self.max_parts,
                items_cap=f"{ITEMS_PER_PART} a part of max_parts",
            )
            body = as_dict(raw)
            check_counts(body, self.max_messages, self.max_parts)
            chat_id = check_id(self._chat_id(body), "chat id")
            key = chat_key(await owner_of(self.authorize, scope, chat_id), chat_id)
            if self.streams is not None and (log := self._rejoin(body, key)) is not None:
                await self._replay(log, _last_event_id(scope), receive, send)
                return
            if self.streams is not None and _last_event_id(scope) is not None:
                raise BadRequest(404, "no kept run has this Last-Event-ID: start a new run")
            begun = await self._begin(body, key)
        except Refused:
            await send_json(send, 403, {"error": REFUSED})
            return
        except BadRequest as exc:
            await send_json(send, exc.status, {"error": str(exc)}, close=exc.closes)
            return
        except (InvalidMessagesError, TypeError, ValueError) as exc:
            await send_json(send, 400, {"error": str(exc)})
            return
        # A closed connection cancels the run; so does it for a request naming no chat, which
        # has no key to reconnect by (and must not stop another anonymous request's run).
        if self.streams is None or not begun.key:
            await stream_sse(receive, send, begun.events, self.headers)
            return
        old = self.streams.get(begun.key)
        carried = self._carried(old) if old is not None and old.run_id == begun.run_id else []
        log = self.streams.open(begun.key, begun.run_id, carried)
        async with anyio.create_task_group() as group:
            group.start_soon(self.streams.produce, log, begun.events, begun.stopped)
            # This browser has the carried events already: it reads the run's own.
            start = len(carried)  # the number of the run's first event
            await stream_sse(receive, send, log.read(start, self.behind), self.headers)

    async def _replay(
        self, log: RunLog | None, last: str | None, receive: Receive, send: Send
    ) -> None:
        if log is None:
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        try:
            position = log.position(last)
        except StreamGone as exc:
            await send_json(send, exc.status, {"error": str(exc)})
            return
        await stream_sse(receive, send, log.read(position, self.behind), self.headers)

    def _carried(self, old: RunLog) -> list[str]:
        """The events of `old`, a kept run of the same id, a replay of this one starts with."""
        del old
        return []

    def _chat_id(self, body: dict[str, Any]) -> str:
        """The chat (thread) id a request body names ("" for none)."""
        raise NotImplementedError

    def _rejoin(self, body: dict[str, Any], key: str) -> RunLog | None:
        """The kept run of `key` a POST reconnects to, if the protocol reconnects by POST."""
        del body, key
        return None

    async def _begin(self, body: dict[str, Any], key: str) -> Begun:
        """The run a POST of the chat `key` (owner and chat id) starts or resumes."""
        raise NotImplementedError

    async def _reconciled(
        self, worker: Worker, key: str, history: list[Message], proven: Proven
    ) -> list[Message]:
        """The browser's `history` with the server's record of tool results winning.

        Results of tools that ask for approval must be proven (recorded, or signed by this
        server) always; with `trust_client_history=False`, those of every server tool.
        """
        recorded: Mapping[str, object] = await self.record.results(key) if key else {}
        tools = worker.tools

        def guarded(name: str | None) -> bool:
            if name is not None and isinstance(tools.get(name), FrontendTool):
                return False  # the browser's own tool: its result is the browser's to give
            if not self.trust_client_history:
                return True
            meta = tools.meta(name) if name else None
            return meta is not None and meta.requires_approval

        return reconcile(history, recorded, proven, guarded)

    async def _worker(self, body: dict[str, Any], tools: Sequence[FrontendTool]) -> Worker:
        """The factory's Worker for `body`, offering also the front end's `tools`.

        Raises:
            ConfigurationError: A front-end tool's name is taken (the Worker is closed).
        """
        worker = await make_worker(self.worker_factory, body)
        try:
            add_frontend_tools(worker, list(tools))
        except ConfigurationError:
            await worker.aclose()
            raise
        return worker

    def _started(
        self,
        worker: Worker,
        start: Callable[[], RunStream],
        key: str,
        run_id: str,
        encode: Callable[[AsyncIterator[object]], AsyncIterator[str]],
        *,
        session: Session | None = None,
        paused: PauseState | None = None,
    ) -> Begun:
        """The run `start` opens, encoded by `encode`, its pause kept under `key`.

        With `session`, the run's pause is the session's (none goes into the store), and the
        session is closed after the run, like the Worker. `paused`: the pause a resumed run
        answers (its calls' results go into the record).
        """
        store: PauseStore = NO_PAUSE_STORE if session is not None else self.store
        # In a session the server holds the conversation, results included: no request
        # reads the record there, so nothing goes into it.
        record = self.record if session is None else None
        calls = paused.history[-1].tool_uses if paused is not None and paused.history else []
        run = run_events(start, store, key, record, calls)
        events = encoded(worker, run, encode, session)
        return Begun(self.running.streaming(key, worker, events), key, run_id, self.stopped)

    async def _session(self, key: str) -> tuple[Session, SessionRecord]:
        """The chat's session (`session_from`) and what it holds (see `open_session`)."""
        if self.session_from is None or not key:
            raise ConfigurationError("a session is only for a chat, with session_from")
        return await open_session(self.session_from, key)


async def encoded(
    worker: Worker,
    events: AsyncGenerator[object, None],
    encode: Callable[[AsyncIterator[object]], AsyncIterator[str]],
    session: Session | None = None,
) -> AsyncGenerator[str, None]:
    """`encode(events)`, closing both (the encoding first, then the run), then the rest.

    The rest is the Worker, then the session of a chat the server keeps, if any.

    Closing them explicitly is what cancels the run when the reader stops early: an
    `async for` left half way closes nothing.
    """
    try:
        async with aclosing(events) as run:
            stream = cast("AsyncGenerator[str, None]", encode(run))  # the encoders are generators
            async with aclosing(stream):
                async for text in stream:
                    yield text
    finally:
        # A stop (or disconnect) landing while the ended run closes must not cut the closing
        # short (its client's pool would leak) nor end a finished stream a second time.
        with anyio.CancelScope(shield=True):
            try:
                await worker.aclose()
            finally:
                if session is not None:
                    await close_session(session)


def _stream_id(scope: Scope) -> str | None:
    """The chat id of `…/{id}/stream`, or `None` for another path."""
    params = as_dict(scope.get("path_params"))
    if isinstance(found := params.get("chat_id"), str):
        return found
    head, _, tail = str(scope.get("path", "")).rstrip("/").rpartition("/")
    if tail != "stream" or not head:
        return None
    return head.rpartition("/")[2] or None  # ASGI's path is already percent-decoded


def _last_event_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name.lower() == b"last-event-id":
            return bytes(value).decode("latin-1").strip() or None
    return None
