"""`AGUIAdapter`: the ASGI endpoint an AG-UI client (`HttpAgent`, CopilotKit) posts to."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Any

from llm_worker._json import as_dict, as_list, as_str
from llm_worker.errors import ConfigurationError, InvalidMessagesError
from llm_worker.events import BlockDelta
from llm_worker.state import Decision, PauseState
from llm_worker.ui._agui import _APPROVAL, HEADERS, AGUIEncoder, sse  # pyright: ignore[reportPrivateUsage]
from llm_worker.ui._agui_messages import messages_from_agui, messages_to_agui
from llm_worker.ui._asgi import BadRequest, Receive, Scope, Send, read_json, send_json, stream_sse
from llm_worker.ui._frontend import FrontendTool, add_frontend_tools, with_frontend_results
from llm_worker.ui._store import MemoryPauseStore, PauseStore
from llm_worker.ui._vercel_app import (
    WorkerFactory,
    make_worker,
    origin_of,
    resuming,
    store_pauses,
)
from llm_worker.worker import RunStream, Worker

__all__ = ("AGUIAdapter",)

_MAX_BODY = 32 << 20


class AGUIAdapter:
    """An ASGI app answering an AG-UI `RunAgentInput` POST with AG-UI 1.0 events over SSE.

    Each POST gets a fresh Worker from `worker_factory`; its history becomes the input's
    messages (`messages_from_agui`), and the tools the front end declares are offered to the
    model beside the Worker's. A run paused for approval ends with `RUN_FINISHED` whose
    outcome is `interrupt` (one interrupt per call, id `approval_<call id>`, `toolCallId`
    set) and waits in `store` under the thread id; the next POST's `resume` entries answer
    them (`status: "resolved"` with `payload: {approved, reason?, input?}`, or
    `"cancelled"`, a denial) and the paused run goes on. A call of a front-end tool ends the
    run with `outcome: {type: "success", pendingToolCallIds}`; its result comes back as a
    tool message in the next POST.

    `RunAgentInput.state`, `context` and `forwardedProps` are not read by llm-worker: a
    factory taking one argument gets the whole input, to use them (e.g. in the system
    prompt).

    Args:
        worker_factory: Returns the `Worker` for one request (may be async).
        store: Where paused runs wait (`MemoryPauseStore()` by default).
        max_body_bytes: Larger request bodies are refused with 413.
    """

    def __init__(
        self,
        worker_factory: WorkerFactory,
        *,
        store: PauseStore | None = None,
        max_body_bytes: int = _MAX_BODY,
    ) -> None:
        self.worker_factory = worker_factory
        self.store: PauseStore = store if store is not None else MemoryPauseStore()
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one ASGI request."""
        if scope["type"] != "http":
            return
        if scope["method"] != "POST":
            await send_json(send, 405, {"error": "POST a RunAgentInput here"})
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
        thread_id, run_id = as_str(body.get("threadId")), as_str(body.get("runId"))
        if not thread_id or not run_id:
            raise BadRequest(400, "a RunAgentInput needs threadId and runId")
        raw = as_list(body.get("messages"))
        history = messages_from_agui(raw)
        frontend = _frontend_tools(body)
        resume = [as_dict(r) for r in as_list(body.get("resume"))]
        # A new message leaves an unanswered pause behind; a resume takes it.
        state = await self.store.take(thread_id)
        names = [t.name for t in frontend]
        if not resume:
            worker = await self._worker(body, frontend)
            # The snapshot starts with the request's messages; the run's input is the last.
            encoder = AGUIEncoder(
                thread_id, run_id, origin_of(worker), frontend_tools=names, history=raw, skip=1
            )
            return self._run(worker, encoder, lambda: _start(worker, history), thread_id)
        if state is None:
            text = "no paused run waits for this thread: it was resumed already, or the server "
            return _refused(thread_id, run_id, text + "restarted")
        try:
            decisions = _decisions(resume, state)
        except (BadRequest, TypeError, ValueError):
            await self.store.put(thread_id, state)  # a wrong answer leaves the pause waiting
            raise
        make = lambda: self._worker(body, frontend)  # noqa: E731
        worker = await resuming(self.store, thread_id, state, make, decisions)
        state = with_frontend_results(state, history, names)
        same = history == state.history  # else the server's record of the thread wins
        before = raw if same else messages_to_agui(state.history, prefix=f"{run_id}-h")
        encoder = AGUIEncoder(
            thread_id, run_id, origin_of(worker), frontend_tools=names, history=before
        )
        start = lambda: worker.resume_stream(state, decisions=decisions)  # noqa: E731
        return self._run(worker, encoder, start, thread_id)

    async def _worker(self, body: dict[str, Any], frontend: list[FrontendTool]) -> Worker:
        worker = await make_worker(self.worker_factory, body)
        try:
            _add_tools(worker, frontend)
        except BadRequest:
            await worker.aclose()
            raise
        return worker

    async def _run(
        self, worker: Worker, encoder: AGUIEncoder, start: Callable[[], RunStream], thread_id: str
    ) -> AsyncGenerator[str, None]:
        try:
            for event in encoder.start():
                yield sse(event)
            async with start() as run:
                async for item in store_pauses(run, self.store, thread_id):
                    if type(item) is BlockDelta and (fast := encoder.fast_delta(item)):
                        yield fast
                        continue
                    for event in encoder.encode(item):
                        yield sse(event)
        except Exception as exc:  # the client shows the run's failure
            for event in encoder.error(exc):
                yield sse(event)
        finally:
            await worker.aclose()


def _start(worker: Worker, history: list[Any]) -> RunStream:
    worker.history[:] = history[:-1]
    return worker.stream(history[-1:])


def _frontend_tools(body: dict[str, Any]) -> list[FrontendTool]:
    tools: list[FrontendTool] = []
    for raw in as_list(body.get("tools")):
        spec = as_dict(raw)
        name = as_str(spec.get("name"))
        if not name:
            raise BadRequest(400, f"a tool in RunAgentInput.tools has no name: {raw!r}")
        tools.append(
            FrontendTool(
                name, as_str(spec.get("description")) or "", as_dict(spec.get("parameters"))
            )
        )
    return tools


def _add_tools(worker: Worker, tools: list[FrontendTool]) -> None:
    try:
        add_frontend_tools(worker, tools)
    except ConfigurationError as exc:  # the request's tools: the client's mistake
        raise BadRequest(400, str(exc)) from exc


def _decisions(resume: list[dict[str, Any]], state: PauseState) -> dict[str, Decision]:
    pending = {p.call.id for p in state.pending if p.status == "pending"}
    decisions: dict[str, Decision] = {}
    for entry in resume:
        interrupt = as_str(entry.get("interruptId")) or ""
        call_id = interrupt.removeprefix(_APPROVAL)
        if call_id not in pending:
            raise BadRequest(400, f"no pending call answers interrupt {interrupt!r}")
        payload = as_dict(entry.get("payload"))
        # Only an explicit `approved: true` runs the call: a missing, null or "false" value
        # (a client's typo) must never approve a tool that asks a person first.
        if entry.get("status") == "resolved" and payload.get("approved") is True:
            edited = payload.get("input")
            decisions[call_id] = Decision.approve(input=as_dict(edited) if edited else None)
        else:
            decisions[call_id] = Decision.deny(
                as_str(payload.get("reason")) or "denied by the user"
            )
    return decisions


async def _refused(thread_id: str, run_id: str, text: str) -> AsyncGenerator[str, None]:
    yield sse({"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id})
    yield sse({"type": "RUN_ERROR", "message": text, "code": "NoPausedRun"})
