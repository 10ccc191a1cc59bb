"""`AGUIAdapter`: the ASGI endpoint an AG-UI client (`HttpAgent`, CopilotKit) posts to."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from functools import partial
from typing import Any

from llm_worker._json import as_dict, as_list, as_str, json_type
from llm_worker.errors import ConfigurationError
from llm_worker.messages import Message
from llm_worker.sessions import Session
from llm_worker.state import Decision, PauseState
from llm_worker.ui._agui import (
    _APPROVAL,  # pyright: ignore[reportPrivateUsage]
    HEADERS,
    sse,
    to_agui_events,
)
from llm_worker.ui._agui_messages import messages_to_agui, read_agui
from llm_worker.ui._app import (
    Begun,
    Endpoint,
    check_id,
    off_loop,
    origin_of,
    resuming,
    start_run,
)
from llm_worker.ui._asgi import BadRequest
from llm_worker.ui._frontend import (
    FrontendTool,
    answers_pause,
    approval_tools,
    with_frontend_results,
)
from llm_worker.ui._resumable import RunLog
from llm_worker.ui._session import (
    AnsweredSession,
    NoPauseStore,
    answered,
    close_session,
    new_message,
    sent_results,
)
from llm_worker.worker import RunStream, Worker

__all__ = ("AGUIAdapter",)

BEHIND = "The connection fell too far behind the run: the events it missed were dropped."


class AGUIAdapter(Endpoint):
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

    By default a closed connection cancels the run. With `resumable`, the run goes on and
    its events (each with an SSE `id`) are kept: a POST naming the same `threadId` and
    `runId` reconnects to it instead of starting another, from after its `Last-Event-ID`
    header (or from the start); `GET {path}/{threadId}/stream` reads it too (204 when
    none is kept) and `DELETE {path}/{threadId}/stream` stops it.

    `RunAgentInput.state`, `context` and `forwardedProps` are not read by llm-worker: a
    factory taking one argument gets the whole input, to use them (e.g. in the system
    prompt).

    Args:
        worker_factory: Returns the `Worker` for one request (may be async).
        store: Where paused runs wait (`MemoryPauseStore()` by default).
        max_body_bytes: Larger request bodies are refused with 413.
        on_error: The `RUN_ERROR` message of an exception that ends a run (default
            `safe_error_text`: what a user can act on, else a generic text; the whole
            exception is logged on `llm_worker.ui`).
        resumable: `True` or a `ResumableStreams` (to set its bounds) to keep runs going
            when their connection closes.
        authorize: `authorize(request, thread_id) -> owner | None`, asked for every request
            (see `Authorize`): pauses, runs and snapshots are kept by owner and thread id,
            `None` is a 403. Without it every client is one owner (the scope's
            authenticated user, if any): serve it on a loopback address only.
        editable_tools: The tools whose arguments an approval may edit (`payload.input`);
            an edit of another tool's call is refused (400).
        max_messages: A request of more messages is refused with 413.
        max_parts: A request of more content items and tool calls (and tools, resume
            entries) is refused with 413; a long history is converted in a worker thread.
        body_timeout: Seconds a client has to send its whole body, else 408 (`None`: none).
        signing_key: The key (16 bytes or more) that signs the opaque data and the tool
            results the browser carries back; by default `LLM_WORKER_SIGNING_KEY`, else a
            random key of this process. Servers of one fleet must share it.
        trust_client_history: `False`: every result of a server tool in the input's
            messages must be the server's (recorded, or signed); others become an error
            result saying no run is on record. `True` (the default) asks that only of the
            tools that ask for approval. Either way a result the record holds wins.
        record: The server's record of the tools it ran (`MemoryToolRecord()` by default;
            a session store implements `ToolRecord` to keep it across restarts).
        session_from: `session_from(owner, thread_id) -> Session` (see `SessionFrom`): the
            server keeps the thread. A run loads the session's history and takes only the
            input's new user message, or its answers to the session's pause (`resume`
            entries, and tool messages answering the calls of its own `tools` the pause
            waits on); the client's copy of the older messages is ignored, and the snapshot
            is the session's. The pause is the session's. A result for any other call
            (unknown, a server tool's, answered already, twice in one input) is refused
            (400 or 409) and the session left as it was; of two inputs answering the same
            call at once, one goes on and the other fails (`SessionBusyError`). A new
            message while the thread's run waits is refused (409).
    """

    headers = HEADERS
    post_hint = "POST a RunAgentInput here"
    stopped = (sse({"type": "RUN_ERROR", "message": "the run was stopped", "code": "Stopped"}),)
    behind = (sse({"type": "RUN_ERROR", "message": BEHIND, "code": "StreamBehind"}),)

    def _chat_id(self, body: dict[str, Any]) -> str:
        return as_str(body.get("threadId")) or ""

    def _rejoin(self, body: dict[str, Any], key: str) -> RunLog | None:
        if as_list(body.get("resume")):  # answers to a pause are never a reconnect
            return None
        run_id = check_id(as_str(body.get("runId")) or "", "runId")
        log = self.streams.get(key) if self.streams and key else None
        return log if log is not None and log.run_id == run_id else None

    async def _begin(self, body: dict[str, Any], key: str) -> Begun:
        thread_id, run_id = as_str(body.get("threadId")), as_str(body.get("runId"))
        if not thread_id or not run_id:
            raise BadRequest(400, "a RunAgentInput needs threadId and runId")
        check_id(run_id, "runId")
        raw = _listed(body, "messages")
        history, proven = await off_loop(read_agui, raw)
        frontend = _frontend_tools(body)
        resume = [as_dict(r) for r in _listed(body, "resume")]
        if self.session_from is not None and key:
            return await self._in_session(body, key, history, frontend, resume)
        # A new message leaves an unanswered pause behind; a resume takes it.
        state = await self.store.take(key)
        names = [t.name for t in frontend]
        # The client's tool messages for the calls it waits on go on with the paused batch
        # (its server calls, undecided, run then); a new run would give those no result.
        answering = state is not None and answers_pause(state, history, names)
        if not resume and not answering:
            worker = await self._tooled(body, frontend)
            kept = await self._reconciled(worker, key, history, proven)
            # The snapshot starts with the request's messages (the server's record of them,
            # where it differs); the run's input is the last.
            before = raw if kept == history else messages_to_agui(kept, prefix=f"{run_id}-h")
            start = lambda: start_run(worker, kept)  # noqa: E731
            return self._run(worker, start, body, key, names, before=before, skip=1)
        if state is None:
            text = "no paused run waits for this thread: it was resumed already, or the server "
            # Not kept (no key): a repeated answer must not stop the run the first one resumed.
            return Begun(_refused(thread_id, run_id, text + "restarted"), "", run_id, ())
        try:
            decisions = _decisions(resume, state)
        except (BadRequest, TypeError, ValueError):
            await self.store.put(key, state)  # a wrong answer leaves the pause waiting
            raise
        make = lambda: self._tooled(body, frontend)  # noqa: E731
        worker = await resuming(
            self.store, key, state, make, decisions, editable=self.editable_tools
        )
        state = with_frontend_results(state, history, names)
        same = history == state.history  # else the server's record of the thread wins
        before = raw if same else messages_to_agui(state.history, prefix=f"{run_id}-h")
        start = lambda: worker.resume_stream(state, decisions=decisions)  # noqa: E731
        return self._run(worker, start, body, key, names, before=before, skip=0, paused=state)

    async def _in_session(
        self,
        body: dict[str, Any],
        key: str,
        history: list[Message],
        frontend: list[FrontendTool],
        resume: list[dict[str, Any]],
    ) -> Begun:
        """The run of a thread the server keeps: the session's history, the client's new turn.

        The turn is a new user message, or answers to the session's pause: `resume` entries,
        and tool messages answering the calls of the client's own tools (see `answered`).
        """
        session, record = await self._session(key)
        names = [t.name for t in frontend]
        run_id = str(body["runId"])
        try:
            results = sent_results(history)
            if not resume and not results:
                given = new_message(history)  # a turn of no kind (400) before a pause (409)
                if record.pause is not None:
                    text = "this thread's run waits for an approval or a tool's result"
                    raise BadRequest(409, text + ": give it first")
                worker = await self._tooled(body, frontend)
                before = messages_to_agui([*record.messages, *given], prefix=f"{run_id}-h")
                start = lambda: worker.stream(given, session=session)  # noqa: E731
                return self._run(
                    worker, start, body, key, names, before=before, skip=1, session=session
                )
            fresh = answered(record, results, names, deciding=bool(resume)) if results else []
            if record.pause is None:  # (with results, `answered` refused it)
                await close_session(session)
                text = "no paused run waits for this thread: it was resumed already"
                return Begun(_refused(str(body["threadId"]), run_id, text), "", run_id, ())
            outputs = AnsweredSession(session, fresh, names)
            state = outputs.answering(record.pause)
            decisions = _decisions(resume, state)
            make = lambda: self._tooled(body, frontend)  # noqa: E731
            worker = await resuming(
                NoPauseStore(), key, state, make, decisions, editable=self.editable_tools
            )
            kept = outputs if fresh else session
            before = messages_to_agui(state.history, prefix=f"{run_id}-h")
            start = lambda: worker.resume_stream(decisions=decisions, session=kept)  # noqa: E731
            return self._run(
                worker,
                start,
                body,
                key,
                names,
                before=before,
                skip=0,
                session=session,
                paused=state,
            )
        except BaseException:
            await close_session(session)
            raise

    async def _tooled(self, body: dict[str, Any], frontend: list[FrontendTool]) -> Worker:
        try:
            return await self._worker(body, frontend)
        except ConfigurationError as exc:  # the request's tools: the client's mistake
            raise BadRequest(400, str(exc)) from exc

    def _run(
        self,
        worker: Worker,
        start: Callable[[], RunStream],
        body: dict[str, Any],
        key: str,
        names: list[str],
        *,
        before: list[Any],
        skip: int,
        session: Session | None = None,
        paused: PauseState | None = None,
    ) -> Begun:
        thread_id, run_id = str(body["threadId"]), str(body["runId"])
        encode = partial(
            to_agui_events,
            thread_id=thread_id,
            run_id=run_id,
            origin=origin_of(worker),
            frontend_tools=names,
            history=before,
            skip=skip,
            on_error=self.on_error,
            approval=approval_tools(worker),
            paused=paused,
        )
        return self._started(worker, start, key, run_id, encode, session=session, paused=paused)


def _listed(body: dict[str, Any], field: str) -> list[Any]:
    # A list, or nothing (absent, null). Anything else was read as an empty list: a run of
    # no messages (the model asked to answer nothing), the front end's tools or its answers
    # to a pause dropped without a word.
    value: object = body.get(field)
    if value is None or isinstance(value, list):
        return as_list(body.get(field))
    raise BadRequest(400, f"RunAgentInput.{field} must be a list, not {json_type(value)}")


def _frontend_tools(body: dict[str, Any]) -> list[FrontendTool]:
    tools: list[FrontendTool] = []
    for n, raw in enumerate(_listed(body, "tools")):
        spec = as_dict(raw)
        name = as_str(spec.get("name"))
        if not name:  # (the spec not shown: the client's, of any size)
            raise BadRequest(400, f"tool {n} in RunAgentInput.tools has no name")
        try:
            description = as_str(spec.get("description")) or ""
            tools.append(FrontendTool(name, description, as_dict(spec.get("parameters"))))
        except ConfigurationError as exc:  # a name no provider accepts: the client's mistake
            raise BadRequest(400, str(exc)) from exc
    return tools


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
