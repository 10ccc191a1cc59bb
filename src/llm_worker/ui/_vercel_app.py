"""`VercelAIAdapter`: the ASGI endpoint `useChat` / `DefaultChatTransport` posts to."""

from __future__ import annotations

import secrets
from collections.abc import AsyncGenerator, Callable, Collection, Sequence
from functools import partial
from typing import Any

import orjson

from llm_worker._json import as_dict, as_list, as_str
from llm_worker.messages import Message, ToolSpec
from llm_worker.sessions import Session
from llm_worker.state import Decision, PauseState
from llm_worker.ui._app import (
    BODY_TIMEOUT,
    MAX_BODY,
    MAX_MESSAGES,
    MAX_PARTS,
    Begun,
    Endpoint,
    WorkerFactory,
    check_id,
    off_loop,
    origin_of,
    resuming,
    start_run,
)
from llm_worker.ui._asgi import BadRequest
from llm_worker.ui._auth import Authorize
from llm_worker.ui._errors import ErrorText
from llm_worker.ui._frontend import (
    FrontendTool,
    answers_pause,
    approval_tools,
    with_frontend_results,
)
from llm_worker.ui._record import ToolRecord
from llm_worker.ui._resumable import ResumableStreams, RunLog
from llm_worker.ui._session import (
    AnsweredSession,
    NoPauseStore,
    SessionFrom,
    answered,
    close_session,
    new_message,
    sent_results,
)
from llm_worker.ui._store import PauseStore
from llm_worker.ui._vercel import HEADERS, sse, to_vercel_stream
from llm_worker.ui._vercel_messages import decisions_from_ui, read_ui
from llm_worker.worker import RunStream, Worker

__all__ = ("VercelAIAdapter",)

DONE = "data: [DONE]\n\n"
BEHIND = "The connection fell too far behind the answer: the events it missed were dropped."


class VercelAIAdapter(Endpoint):
    """An ASGI app answering the Vercel AI SDK chat POST with a UI message stream (`v1`).

    Mount it where `useChat` posts (`/api/chat` by default). Each POST
    (`{id, messages, trigger, messageId}`) gets a fresh Worker from `worker_factory`, whose
    history becomes the browser's messages (`messages_from_ui`); the run is streamed back as
    the `ai` 6.x client reads it. A run paused for approval ends with `tool-approval-request`
    parts and waits in `store` under the chat id; the browser's next POST, with the
    `approval-responded` parts, resumes it (`Worker.resume` with the decisions) and
    continues the same assistant message.

    By default a closed connection cancels the run (the Worker cleans up; the browser's
    history stays valid). With `resumable`, the run goes on and its events are kept: the
    `ai` client's `resumeStream()` (`GET {api}/{chatId}/stream`) reads them again from the
    start (204 when the chat has no run kept), or from after a `Last-Event-ID` header;
    `DELETE {api}/{chatId}/stream` stops the run. The Worker is closed after its run
    (`Worker.aclose`, which closes only a client it made from a model string).

    Args:
        worker_factory: Returns the `Worker` for one request (may be async).
        store: Where paused runs wait (`MemoryPauseStore()` by default).
        frontend_tools: Tools the browser runs (the `ai` client's `onToolCall` +
            `addToolOutput`): offered to the model; a call ends the answer with the call's
            input available and no approval asked, and its output comes back with the
            browser's next POST.
        max_body_bytes: Larger request bodies are refused with 413.
        on_error: The text the browser sees of an exception that ends a run (default
            `safe_error_text`: what a user can act on, else a generic text; the whole
            exception is logged on `llm_worker.ui`).
        resumable: `True` or a `ResumableStreams` (to set its bounds) to keep runs going
            when their connection closes.
        authorize: `authorize(request, chat_id) -> owner | None`, asked for every request
            (see `Authorize`): pauses and runs are kept by owner and chat id, `None` is a 403.
            Without it every client is one owner (the scope's authenticated user, if any):
            serve it on a loopback address only.
        editable_tools: The tools whose arguments an approval may edit (`approval.input`);
            an edit of another tool's call is refused (400).
        max_messages: A request of more messages is refused with 413.
        max_parts: A request of more message parts (and front-end tools) is refused
            with 413 (converting 900,000 took 8.9 s of CPU; a long history is converted in
            a worker thread so other streams go on).
        body_timeout: Seconds a client has to send its whole body, else 408 (`None`: no
            deadline; a client trickling bytes would hold its connection).
        signing_key: The key (16 bytes or more) that signs the opaque data and the tool
            results the browser carries back; by default `LLM_WORKER_SIGNING_KEY`, else a
            random key of this process. Servers of one fleet must share it.
        trust_client_history: `False`: every result of a server tool in the browser's
            history must be the server's (recorded, or signed); others become an error
            result saying no run is on record. `True` (the default) asks that only of the
            tools that ask for approval. Either way a result the record holds wins.
        record: The server's record of the tools it ran (`MemoryToolRecord()` by default;
            a session store implements `ToolRecord` to keep it across restarts).
        session_from: `session_from(owner, chat_id) -> Session` (see `SessionFrom`): the
            server keeps the chat. A run loads the session's history and takes only the
            browser's new user message, or its answers to the session's pause (approvals,
            and the outputs of `frontend_tools` calls the pause waits on), from the request;
            the browser's copy of the older messages is ignored. The pause is the session's.
            An output for any other call (unknown, a server tool's, answered already, twice
            in one request) is refused (400 or 409) and the session left as it was; of two
            requests answering the same call at once, one goes on and the other fails
            (`SessionBusyError`). A chat's new message while its run waits is refused (409).

    Raises:
        MissingExtraError: `llm-worker[web]` is not installed.
    """

    headers = HEADERS
    post_hint = "POST the chat request here"
    stopped = (sse({"type": "abort", "reason": "stopped"}), DONE)
    behind = (sse({"type": "error", "errorText": BEHIND}), DONE)

    def __init__(
        self,
        worker_factory: WorkerFactory,
        *,
        store: PauseStore | None = None,
        frontend_tools: Sequence[ToolSpec] = (),
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
        super().__init__(
            worker_factory,
            store=store,
            max_body_bytes=max_body_bytes,
            on_error=on_error,
            resumable=resumable,
            authorize=authorize,
            editable_tools=editable_tools,
            max_messages=max_messages,
            max_parts=max_parts,
            body_timeout=body_timeout,
            signing_key=signing_key,
            trust_client_history=trust_client_history,
            record=record,
            session_from=session_from,
        )
        self.frontend_tools = [
            FrontendTool(t.name, t.description, t.input_schema) for t in frontend_tools
        ]

    def _carried(self, old: RunLog) -> list[str]:
        # A run continuing an assistant message (an approval's answer) streams only what it
        # adds, but the `ai` client's resumeStream() rebuilds the message from the replay:
        # it starts with the message's earlier events, less their finish and [DONE].
        if not old.done or old.first > 0:
            return []  # still going (a regenerate), or its start was dropped: none to add
        texts = old.texts()
        while texts and (texts[-1] == DONE or _type(texts[-1]) == "finish"):
            texts.pop()
        return texts

    def _chat_id(self, body: dict[str, Any]) -> str:
        return as_str(body.get("id")) or ""

    async def _begin(self, body: dict[str, Any], key: str) -> Begun:
        ui = as_list(body.get("messages"))
        decisions = decisions_from_ui(ui)
        message_id = check_id(_message_id(body, ui), "messageId")
        history, proven = await off_loop(read_ui, ui)
        if self.session_from is not None and key:
            return await self._in_session(body, key, history, decisions, message_id)
        names = [t.name for t in self.frontend_tools]
        if not decisions:
            if not history:
                raise BadRequest(400, "the chat request holds no message to answer")
            # A new message leaves an unanswered pause behind; the browser's outputs for the
            # calls it waits on take it (its server calls, undecided, run then).
            state = await self.store.take(key) if key else None
            if state is not None and answers_pause(state, history, names):
                return await self._resumed(body, key, state, history, {}, message_id=message_id)
            worker = await self._worker(body, self.frontend_tools)
            history = await self._reconciled(worker, key, history, proven)
            start = lambda: start_run(worker, history)  # noqa: E731
            return self._run(worker, start, key, message_id, ())
        # A request naming no chat has no pause: none of another's may answer its calls.
        state = await self.store.take(key) if key else None
        if state is None:
            text = "no paused run waits for this chat: it was answered already, or the server "
            # Not kept (no key): a repeated answer must not stop the run the first one resumed.
            return Begun(_refused(message_id, text + "restarted"), "", message_id, ())
        return await self._resumed(body, key, state, history, decisions, message_id=message_id)

    async def _resumed(
        self,
        body: dict[str, Any],
        key: str,
        state: PauseState,
        history: list[Message],
        decisions: dict[str, Decision],
        *,
        message_id: str,
    ) -> Begun:
        """The run going on from the pause `state` with the browser's answers to it."""
        make = lambda: self._worker(body, self.frontend_tools)  # noqa: E731
        worker = await resuming(
            self.store, key, state, make, decisions, editable=self.editable_tools
        )
        names = [t.name for t in self.frontend_tools]
        state = with_frontend_results(state, history, names)
        denied = [i for i, d in decisions.items() if not d.allow]
        start = lambda: worker.resume_stream(state, decisions=decisions)  # noqa: E731
        return self._run(worker, start, key, message_id, denied, paused=state)

    async def _in_session(
        self,
        body: dict[str, Any],
        key: str,
        history: list[Message],
        decisions: dict[str, Decision],
        message_id: str,
    ) -> Begun:
        """The run of a chat the server keeps: the session's history, the browser's new turn.

        The turn is a new user message, or answers to the session's pause: approvals, and
        the outputs of the browser's own tools' calls (see `answered`).
        """
        session, record = await self._session(key)
        try:
            results = sent_results(history)
            if not decisions and not results:
                given = new_message(history)  # a turn of no kind (400) before a pause (409)
                if record.pause is not None:
                    text = "this chat's run waits for an approval or a tool's output"
                    raise BadRequest(409, text + ": give it first")
                worker = await self._worker(body, self.frontend_tools)
                start = lambda: worker.stream(given, session=session)  # noqa: E731
                return self._run(worker, start, key, message_id, (), session=session)
            names = [t.name for t in self.frontend_tools]
            fresh = answered(record, results, names, deciding=bool(decisions)) if results else []
            if record.pause is None:  # (with results, `answered` refused it)
                text = "no paused run waits for this chat: it was answered already"
                await close_session(session)
                return Begun(_refused(message_id, text), "", message_id, ())
            outputs = AnsweredSession(session, fresh, names)
            state = outputs.answering(record.pause)
            make = lambda: self._worker(body, self.frontend_tools)  # noqa: E731
            worker = await resuming(
                NoPauseStore(), key, state, make, decisions, editable=self.editable_tools
            )
            kept = outputs if fresh else session
            denied = [i for i, d in decisions.items() if not d.allow]
            start = lambda: worker.resume_stream(decisions=decisions, session=kept)  # noqa: E731
            return self._run(worker, start, key, message_id, denied, session=session, paused=state)
        except BaseException:
            await close_session(session)
            raise

    def _run(
        self,
        worker: Worker,
        start: Callable[[], RunStream],
        key: str,
        message_id: str,
        denied: Collection[str],
        *,
        session: Session | None = None,
        paused: PauseState | None = None,
    ) -> Begun:
        encode = partial(
            to_vercel_stream,
            message_id=message_id,
            origin=origin_of(worker),
            denied=denied,
            frontend=[t.name for t in self.frontend_tools],
            on_error=self.on_error,
            approval=approval_tools(worker),
            paused=paused,
        )
        return self._started(worker, start, key, message_id, encode, session=session, paused=paused)


def _message_id(body: dict[str, Any], ui: list[Any]) -> str:
    given = as_str(body.get("messageId"))
    if given and any(as_dict(m).get("id") == given for m in ui):
        return given  # an answer continuing (approval) or regenerating that message
    last = as_dict(ui[-1]) if ui else {}
    if last.get("role") == "assistant" and as_str(last.get("id")):
        return str(last["id"])
    return f"msg_{secrets.token_hex(16)}"


async def _refused(message_id: str, text: str) -> AsyncGenerator[str, None]:
    yield sse({"type": "start", "messageId": message_id})
    yield sse({"type": "error", "errorText": text})
    yield sse({"type": "finish", "finishReason": "error"})
    yield "data: [DONE]\n\n"


def _type(text: str) -> object:
    """The `type` of an SSE event's chunk."""
    return as_dict(orjson.loads(text.removeprefix("data: "))).get("type")
