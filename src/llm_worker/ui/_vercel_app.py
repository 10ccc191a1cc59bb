"""`VercelAIAdapter`: the ASGI endpoint `useChat` / `DefaultChatTransport` posts to."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Mapping,
    Sequence,
)
from typing import Any

import anyio

from llm_worker._json import as_dict, as_list, as_str
from llm_worker.errors import ConfigurationError, InvalidMessagesError, PauseStateError
from llm_worker.events import BlockDelta
from llm_worker.messages import Message, Origin, ToolSpec
from llm_worker.state import Decision, PauseState, RunCompleted
from llm_worker.ui._asgi import BadRequest, Receive, Scope, Send, read_json, send_json, stream_sse
from llm_worker.ui._frontend import FrontendTool, add_frontend_tools, with_frontend_results
from llm_worker.ui._store import MemoryPauseStore, PauseStore
from llm_worker.ui._vercel import HEADERS, VercelEncoder, sse
from llm_worker.ui._vercel_messages import decisions_from_ui, messages_from_ui
from llm_worker.worker import RunStream, Worker
from llm_worker.worker._decisions import apply_decisions
from llm_worker.worker._toolset import check_resumable

__all__ = (
    "VercelAIAdapter",
    "WorkerFactory",
    "make_worker",
    "origin_of",
    "resuming",
    "store_pauses",
)

WorkerFactory = Callable[..., "Worker | Awaitable[Worker]"]
"""What the adapters call once per request for a fresh `Worker` (tools, system prompt, model):
with no argument, or with the request's JSON body when it takes one (to read a thread id,
AG-UI `state` / `context`, or your own `body` fields)."""

_MAX_BODY = 32 << 20


async def make_worker(factory: WorkerFactory, body: dict[str, Any]) -> Worker:
    """The factory's Worker (given the body if it takes an argument; awaited if async)."""
    worker = factory(body) if _takes_argument(factory) else factory()
    if inspect.isawaitable(worker):
        worker = await worker
    if not isinstance(worker, Worker):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"the worker factory returned {worker!r}, not a Worker")
    return worker


def _takes_argument(factory: WorkerFactory) -> bool:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: called without arguments
        return False
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return any(p.kind in kinds or p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)


def origin_of(worker: Worker) -> Origin:
    """The provider and model the Worker stamps on its opaque data."""
    return Origin(worker.client.provider, worker.client.model)


async def store_pauses(
    run: AsyncIterator[object], store: PauseStore, chat_id: str
) -> AsyncIterator[object]:
    """The run's events; a pause is stored before the browser can see it (and answer it)."""
    async for event in run:
        if isinstance(event, RunCompleted) and event.result.state is not None:
            await store.put(chat_id, event.result.state)
        yield event


async def resuming(
    store: PauseStore,
    chat_id: str,
    state: PauseState,
    make: Callable[[], Awaitable[Worker]],
    decisions: Mapping[str, Decision],
) -> Worker:
    """The Worker that resumes `state`, once the decisions are known to fit it.

    A request that cannot resume (decisions naming calls that are not pending, edited
    arguments the tool refuses, a factory that fails) puts the pause back, so the browser can
    answer again: taking it is what makes a decision apply once, not what refuses one.

    Raises:
        BadRequest: The decisions do not fit the paused calls (400).
    """
    try:
        worker = await make()
        try:
            pending = apply_decisions(state, decisions, worker.tools)
            check_resumable(worker.tools, pending, state.tools)
        except PauseStateError as exc:
            await worker.aclose()
            raise BadRequest(400, f"the decisions do not fit the paused run: {exc}") from exc
    except BaseException:
        with anyio.CancelScope(shield=True):
            await store.put(chat_id, state)
        raise
    return worker


class VercelAIAdapter:
    """An ASGI app answering the Vercel AI SDK chat POST with a UI message stream (`v1`).

    Mount it where `useChat` posts (`/api/chat` by default). Each POST
    (`{id, messages, trigger, messageId}`) gets a fresh Worker from `worker_factory`, whose
    history becomes the browser's messages (`messages_from_ui`); the run is streamed back as
    the `ai` 6.x client reads it. A run paused for approval ends with `tool-approval-request`
    parts and waits in `store` under the chat id; the browser's next POST, with the
    `approval-responded` parts, resumes it (`Worker.resume` with the decisions) and
    continues the same assistant message.

    A closed connection cancels the run (the Worker cleans up; the browser's history stays
    valid). The Worker is closed after its request (`Worker.aclose`, which closes only a
    client it made from a model string).

    Args:
        worker_factory: Returns the `Worker` for one request (may be async).
        store: Where paused runs wait (`MemoryPauseStore()` by default).
        frontend_tools: Tools the browser runs (the `ai` client's `onToolCall` +
            `addToolOutput`): offered to the model; a call ends the answer with the call's
            input available and no approval asked, and its output comes back with the
            browser's next POST.
        max_body_bytes: Larger request bodies are refused with 413.

    Raises:
        MissingExtraError: `llm-worker[web]` is not installed.
    """

    def __init__(
        self,
        worker_factory: WorkerFactory,
        *,
        store: PauseStore | None = None,
        frontend_tools: Sequence[ToolSpec] = (),
        max_body_bytes: int = _MAX_BODY,
    ) -> None:
        self.worker_factory = worker_factory
        self.frontend_tools = [
            FrontendTool(t.name, t.description, t.input_schema) for t in frontend_tools
        ]
        self.store: PauseStore = store if store is not None else MemoryPauseStore()
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one ASGI request."""
        if scope["type"] != "http":
            return
        if scope["method"] != "POST":
            await send_json(send, 405, {"error": "POST the chat request here"})
            return
        try:
            body = as_dict(await read_json(receive, self.max_body_bytes))
            events = await self._events(body)
        except BadRequest as exc:
            await send_json(send, exc.status, {"error": str(exc)})
            return
        except (InvalidMessagesError, TypeError, ValueError) as exc:
            await send_json(send, 400, {"error": str(exc)})
            return
        await stream_sse(receive, send, events, HEADERS)

    async def _events(self, body: dict[str, Any]) -> AsyncGenerator[str, None]:
        chat_id = as_str(body.get("id")) or ""
        ui = as_list(body.get("messages"))
        decisions = decisions_from_ui(ui)
        message_id = _message_id(body, ui)
        history = messages_from_ui(ui)
        if not decisions:
            if not history:
                raise BadRequest(400, "the chat request holds no message to answer")
            await self.store.take(chat_id)  # a new message leaves an unanswered pause behind
            worker = await self._worker(body)
            return self._run(worker, lambda: _start(worker, history), chat_id, message_id, ())
        state = await self.store.take(chat_id)
        if state is None:
            return _refused(
                message_id,
                "no paused run waits for this chat: it was answered "
                "already, or the server restarted",
            )
        worker = await resuming(self.store, chat_id, state, lambda: self._worker(body), decisions)
        names = [t.name for t in self.frontend_tools]
        state = with_frontend_results(state, history, names)
        denied = [i for i, d in decisions.items() if not d.allow]
        start = lambda: worker.resume_stream(state, decisions=decisions)  # noqa: E731
        return self._run(worker, start, chat_id, message_id, denied)

    async def _worker(self, body: dict[str, Any]) -> Worker:
        worker = await make_worker(self.worker_factory, body)
        try:
            add_frontend_tools(worker, self.frontend_tools)
        except ConfigurationError:
            await worker.aclose()
            raise
        return worker

    async def _run(
        self,
        worker: Worker,
        start: Callable[[], RunStream],
        chat_id: str,
        message_id: str,
        denied: Collection[str],
    ) -> AsyncGenerator[str, None]:
        names = [t.name for t in self.frontend_tools]
        encoder = VercelEncoder(message_id, origin_of(worker), denied=denied, frontend=names)
        try:
            for chunk in encoder.start():
                yield sse(chunk)
            async with start() as run:
                async for event in store_pauses(run, self.store, chat_id):
                    if type(event) is BlockDelta and (fast := encoder.fast_delta(event)):
                        yield fast
                        continue
                    for chunk in encoder.encode(event):
                        yield sse(chunk)
        except Exception as exc:  # the client shows the run's failure
            for chunk in encoder.error(exc):
                yield sse(chunk)
        finally:
            await worker.aclose()
        yield "data: [DONE]\n\n"


def _start(worker: Worker, history: list[Message]) -> RunStream:
    # The browser's messages are the conversation: all but the last are the history, the
    # last (the user's new message, or the results of front-end tools) is the run's input.
    worker.history[:] = history[:-1]
    return worker.stream(history[-1:])


def _message_id(body: dict[str, Any], ui: list[Any]) -> str:
    given = as_str(body.get("messageId"))
    if given and any(as_dict(m).get("id") == given for m in ui):
        return given  # an answer continuing (approval) or regenerating that message
    last = as_dict(ui[-1]) if ui else {}
    if last.get("role") == "assistant" and as_str(last.get("id")):
        return str(last["id"])
    return f"msg_{uuid.uuid4().hex}"


async def _refused(message_id: str, text: str) -> AsyncGenerator[str, None]:
    yield sse({"type": "start", "messageId": message_id})
    yield sse({"type": "error", "errorText": text})
    yield sse({"type": "finish", "finishReason": "error"})
    yield "data: [DONE]\n\n"
