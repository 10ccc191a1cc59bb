"""One run of the Worker's loop: request → stream → tool batch → … → turn end.

`Run` holds the state of one `Worker.run` / `Worker.resume` call. Its phases:

- `_request`: on_message_send hooks, history repair, streaming through the Timeline (with the
  optional early start of tools whose block has stopped), retry of a stream that fails
  mid-way where that is safe;
- `_tool_batch` (in `_execution.py`): before_tool_call hooks in call order, concurrent
  execution, after_tool_call hooks in call order, results appended in call order;
- `_turn_end`: on_turn_end hooks (finish, continue with messages, pause).
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from llm_worker._retries import retrying
from llm_worker.errors import (
    ProviderError,
)
from llm_worker.events import Event, StopReason, UsageEvent
from llm_worker.hooks import (
    Cancel,
    ContinueWithMessages,
    MessageSendContext,
    Pause,
    TurnEndContext,
)
from llm_worker.limits._bounds import check_continuations, check_max_requests
from llm_worker.messages import Message, Origin, Request
from llm_worker.state import (
    CacheMiss,
    PauseState,
    PendingCall,
    RequestUsage,
    RunResult,
    RunStatus,
    TextComplete,
    ToolCallComplete,
)
from llm_worker.tools import ToolContext
from llm_worker.tools._messages import malformed_call
from llm_worker.worker._assembler import Assembler, Completed, Withdrawn
from llm_worker.worker._context import answered
from llm_worker.worker._conversation import Conversation
from llm_worker.worker._enabled import offered
from llm_worker.worker._execution import Batch
from llm_worker.worker._groups import early_group
from llm_worker.worker._guard import Holder, InputGate, check_output, guarded_run, input_gate_open
from llm_worker.worker._handoff import take_over
from llm_worker.worker._history import repair
from llm_worker.worker._intercept import RequestStep, intercepted
from llm_worker.worker._output import (
    PartialFeed,
    Rejected,
    answer_output,
    called_output,
    give_up,
    rejected_call,
    rejection,
)
from llm_worker.worker._send import prepared, rechecked, sending
from llm_worker.worker._steering import SteerQueue, take_in
from llm_worker.worker._stream import BUFFERED_MAX, Channel, Reached, channel_of, closing
from llm_worker.worker._stream_retry import StreamRetry
from llm_worker.worker._tree import Below, forwarder_of

if TYPE_CHECKING:
    from llm_worker.collectors import ToolCall
    from llm_worker.limits._budget import Budget
    from llm_worker.worker._config import WorkerConfig

__all__ = ("Run", "StreamRetry")


@dataclass(slots=True)
class Run:
    """The state of one run."""

    cfg: WorkerConfig
    history: list[Message]
    requests: int = 0
    continuations: int = 0
    usage: UsageEvent = field(default_factory=UsageEvent)
    start: int = 0
    batch: Batch | None = None
    stop_reason: StopReason | None = None
    settle_only: bool = False
    """Stop once the resumed batch's results are in the history (`Worker.discard_pause`)."""
    decided: frozenset[str] = frozenset()  # the calls given a `Decision` on resume (ids)
    response_ids: list[str] = field(default_factory=lambda: [])
    """The provider's ids of this run's answers; a pause state carries the last one."""
    chain_from: str | None = None
    """The answer a stored conversation goes on from (the Worker's last, or the pause's)."""
    malformed_calls: int = 0  # answers in a row that were a tool call the provider refused
    output_attempts: int = 0  # answers that did not fit the output type
    tool_calls: int = 0  # calls run (before a pause too): a pause carries them to Limits
    output_call: ToolCall | None = None  # the output tool's accepted call, at the turn end
    stop_detail: str | None = None  # the provider's words about the last stop (a refusal's)
    request_usage: list[RequestUsage] = field(default_factory=lambda: [])
    """Each answer's usage (a broken attempt's too), with the provider and model to price it."""
    offered: frozenset[str] | None = None  # tools offered for this answer (None: every one)
    tree: Below = field(default_factory=Below)  # sub-agents' records, pauses, resumes, handoff
    queue: SteerQueue | None = None  # the Worker's steers and follow-ups (set at the start)
    gate: InputGate | None = None
    """The input guardrails of a fresh run, while they are checked beside its first request."""
    conversation: Conversation = field(default_factory=Conversation)
    """What the Worker keeps between requests, across its runs (the checks made so far)."""
    sent: list[Message] | None = None  # the last request's messages (a batch's media limit)
    cache_misses: list[CacheMiss] = field(default_factory=lambda: [])
    """The requests that did not start as the conversation's previous one (prompt cache)."""
    budget: Budget | None = None  # the `Limits` the run is charged to (the Worker's, its own)

    async def loop(self, *, resume: PauseState | None = None) -> RunResult[Any]:
        """Run until the turn finishes or pauses (a fresh run beside its input guardrails)."""
        inputs = [g for g in self.cfg.guardrails if g.kind == "input"]
        if inputs and resume is None:
            return await guarded_run(self, inputs, self._loop)
        return await self._loop(resume)

    async def _loop(self, resume: PauseState | None = None) -> RunResult[Any]:
        if resume is not None:
            outcome = await self._resume(resume)
            if outcome is not None:
                return outcome
            if self.settle_only:
                return self.result(RunStatus.CANCELLED, reason="the paused run was discarded")
        while True:
            outcome = await self._step()
            if outcome is not None:
                return outcome

    async def _step(self) -> RunResult[Any] | None:
        """One request and what follows it; a result ends the run, None goes on."""
        async with early_group(self.cfg.early_tool_start) as group:
            self.batch = Batch(self, [], group)
            response = await self._request()
            if isinstance(response, RunResult):
                return response
            if response.calls:
                self.malformed_calls = 0  # a call the provider took: the refusals are not in a row
                return await self._run_batch(self.batch, resumed=False)
        self.batch = None
        self.stop_reason = response.stop_reason
        self.stop_detail = response.stop.stop_message if response.stop is not None else None
        if response.stop_reason in _GOES_ON:
            # A server tool paused the answer, or the context was compacted mid-answer:
            # sending the answer back lets it go on.
            return None
        if response.stop_reason is StopReason.MALFORMED_TOOL_CALL:
            if self.malformed_calls < MALFORMED_CALL_RETRIES:
                self.malformed_calls += 1
                self.history.append(_malformed_feedback(response))
                return None
        else:
            self.malformed_calls = 0
        return await self._turn_end(response.message, resumed=False)

    async def _resume(self, state: PauseState) -> RunResult[Any] | None:
        # The tools the paused answer was offered, as they were: from the history before it.
        await self.offer(self.history[: _last_assistant_index(self.history)])
        if state.at == "on_turn_end":
            self.stop_reason, self.stop_detail = state.stop_reason, state.stop_message
            last = _last_assistant(self.history)
            return await self._turn_end(last, resumed=True, accepted=state.output_call)
        return await self._run_batch(Batch(self, state.pending, None, self.decided), resumed=True)

    async def _run_batch(self, batch: Batch, *, resumed: bool) -> RunResult[Any] | None:
        self.batch = batch
        paused = await batch.run(resumed=resumed)
        self.batch = None
        if paused is not None:
            return self.paused("before_tool_call", paused.reason, batch.pending)
        if self.tree.handover is not None:
            return await take_over(self)
        output = self.cfg.output
        called = called_output(output, batch.pending) if output is not None else None
        if called is None or output is None:
            return None
        if called.result is not None and not called.result.is_error:
            last = _last_assistant(self.history)
            return await self._turn_end(last, resumed=False, accepted=called.call)
        self._rejected(rejected_call(output, called), feedback=False)  # its error result says why
        return None

    async def offer(self, history: list[Message]) -> None:
        """Ask the tools' `enabled=` callables which tools the next answer is offered."""
        cfg = self.cfg
        self.offered = await offered(
            cfg.registry, history, requests=self.requests, usage=self.usage, path=cfg.path
        )

    def tool_context(self) -> ToolContext:
        """What a tool call of this run is told (`execute_call` adds the call's own id)."""
        cfg = self.cfg
        return ToolContext(
            call_id="",
            tool_name="",
            usage=self.usage,
            blob_store=cfg.blob_store,
            path=cfg.path,
            requests=self.requests,
        )

    # -- the request ---------------------------------------------------------------------

    async def _request(self) -> Assembler | RunResult[Any]:
        cfg = self.cfg
        check_max_requests(cfg.max_requests, self.requests)
        if self.requests:  # the first request goes beside the input guardrails, no other
            await input_gate_open(self, read_only=False)
        await take_in(self, "steer")
        request = await prepared(self)  # its messages note what the hooks read of them
        original = request.messages
        ctx = MessageSendContext(original, request, self.requests + 1)
        decided = await cfg.hooks.chain("on_message_send", cfg.hooks.on_message_send, ctx)
        if isinstance(decided, Cancel):
            return await self.cancelled(decided.reason)
        self.requests += 1  # counted once sent: a cancelled (or refused) request was never made
        # A hook may assign a new request, or new messages to either ctx.messages or
        # ctx.request.messages; in-place edits of the one list count too.
        request = ctx.request
        messages = ctx.messages if ctx.messages is not original else request.messages
        sending(self, request, messages, original)
        try:
            return await self._sent(request)
        except ProviderError as exc:
            if not rechecked(self, request, exc):
                raise
        return await self._sent(request)

    async def _sent(self, request: Request) -> Assembler | RunResult[Any]:
        if self.budget is not None:
            return await self.budget.charged(self, request)
        return await self.send(request)

    async def send(self, request: Request) -> Assembler:
        """The request through the interceptors, streamed (or answered by one of them)."""
        cfg = self.cfg
        streamed = False

        async def proceed() -> Assembler:
            nonlocal streamed
            streamed = True
            return await self._attempts(request)

        step = RequestStep(cfg.client, request, self.requests)
        assembler = await intercepted(cfg.interceptors, "request", step, proceed)
        if not streamed and self.batch is not None:
            for call in assembler.calls:  # a recorded answer: its calls never streamed
                await self.batch.arrived(call)
        self.usage = self.usage + assembler.usage
        answered(cfg, self.history, request, assembler.usage)
        self._priced(assembler)
        if assembler.response_id is not None:
            self.response_ids.append(assembler.response_id)
        if assembler.parts:
            self.history.append(assembler.message)
        return assembler

    def _priced(self, answer: Assembler | Withdrawn) -> None:
        # Priced by the client that answered: a fallback client's answer names it.
        origin = answer.origin
        model = answer.model or origin.model
        self.request_usage.append(RequestUsage(origin.provider, model, answer.usage))

    async def _attempts(self, request: Request) -> Assembler:
        """Stream the request, again after a mid-stream failure where that is safe."""
        cfg = self.cfg
        attempt = 0
        while True:
            attempt += 1
            assembler = Assembler(
                Origin(cfg.client.provider, cfg.client.model),
                max_arguments=cfg.max_tool_arguments,
                output_tool=cfg.output.tool.name if cfg.output and cfg.output.tool else None,
            )
            try:
                await self._stream(request, assembler)
            except ProviderError as exc:
                self._billed(assembler)
                batch = self.batch
                if not (exc.streamed and cfg.stream_retry.allows(exc, attempt)):
                    raise
                if batch is not None:
                    if not batch.may_restart():
                        raise
                    self.batch = Batch(self, [], batch.group)
                wait = cfg.stream_retry.delay * 2 ** (attempt - 1)
                retrying("stream", exc, attempt, wait)
                await anyio.sleep(wait)
                continue
            except BaseException:
                # A handler's error or a cancel mid-answer: the server saw (and billed) the
                # request all the same — a sub-agent's roll-up lost such a run's usage.
                self._billed(assembler)
                raise
            return assembler

    def _billed(self, assembler: Assembler) -> None:
        """Count an attempt that did not complete: its usage, priced if it reported any."""
        self.usage = self.usage + assembler.usage
        if assembler.usage.input_tokens is not None:
            self._priced(assembler)

    async def _stream(self, request: Request, assembler: Assembler) -> None:
        # Partial outputs go to `Worker.stream` readers; a plain run() never pays for them.
        # One feed for the whole answer, whichever task processes its events.
        cfg = self.cfg
        sinks = cfg.sinks
        partials = (
            PartialFeed(cfg.output, lambda e: _send(sinks, e)) if cfg.output and sinks else None
        )
        holder = Holder.of(self)
        if holder is not None:  # the readers get what the output guardrails passed
            sinks = [holder.sink]
            partials = PartialFeed(cfg.output, holder.sink) if cfg.output else None
        process = self._processor(assembler, partials, sinks=sinks)
        async with closing(self.cfg.client.stream(request)) as events:
            channel = channel_of(self.cfg.sinks) if holder is None else None
            paced = forwarder_of(self.cfg.sinks)
            gate = paced.gate if paced is not None else None
            it = events.__aiter__()
            async for event in it:
                completed = process(event)
                if gate is not None and len(gate) >= BUFFERED_MAX:  # a slow reader up the tree
                    await paced.paced()  # pyright: ignore[reportOptionalMemberAccess]
                if holder is not None and holder.due:
                    await holder.check()
                if completed is not None:
                    await self._completed(completed)
                # Once the request is made (in the run's task and context), a `Worker.stream`
                # reader reads the rest in its own task (one wake-up per event, not two).
                if (
                    channel is not None
                    and not channel.orphaned
                    and not await self._lend(
                        it, self._processor(assembler, partials, channel.sink), channel
                    )
                ):
                    return

    async def _lend(
        self, it: AsyncIterator[Event], lent: Callable[[Event], Completed | None], channel: Channel
    ) -> bool:
        """Lend the answer to the reader, to `lent` each event; the run goes on with each block.

        Returns:
            Whether the reader dropped its stream unread: the run then reads on itself.
        """
        while not channel.orphaned:
            ctx = contextvars.copy_context()
            try:
                completed = await channel.lend(it, lent, ctx)
            finally:
                _adopt(ctx)  # what the handlers set is the run's, as if they ran in its task
            if completed is None:
                return channel.orphaned
            await self._completed(completed)
        return True

    def _processor(
        self,
        assembler: Assembler,
        partials: PartialFeed | None,
        reader: object = None,
        sinks: list[Callable[[Any], None]] | None = None,
    ) -> Callable[[Event], Completed | None]:
        """What the run does with each streamed event (synchronous: the hot path).

        With `reader` (a `RunStream`'s sink), that sink is skipped: its reader processes the
        event in its own task and hands it on itself (`Reached` if it got that far).
        """
        dispatch = self.cfg.timeline.dispatch
        sinks = self.cfg.sinks if sinks is None else sinks
        feed = assembler.feed
        if not sinks:

            def plain(event: Event) -> Completed | None:
                dispatch(event)
                return feed(event)

            return plain

        def sent(event: Event) -> Completed | None:
            dispatch(event)  # a handler that raises: no sink sees the event
            try:
                for sink in sinks:
                    if sink is not reader:
                        sink(event)
                if partials is not None:
                    partials.feed(event)
                return feed(event)
            except Exception as exc:
                if reader is None:
                    raise
                raise Reached(exc) from None

        return sent

    async def _completed(self, completed: Completed) -> None:
        cfg = self.cfg
        if completed.withdrawn is not None:
            self._withdrawn(completed.withdrawn)
            return
        if completed.text:  # an empty block (an answer with no content) completes no text
            for handler in cfg.text_complete:
                handler(completed.text)
            if cfg.sinks:
                _send(cfg.sinks, TextComplete(completed.text))
        if completed.call is not None:
            for handler in cfg.call_complete:
                handler(completed.call)
            if cfg.sinks:
                _send(cfg.sinks, ToolCallComplete(completed.call))
            if self.batch is not None:
                await self.batch.arrived(completed.call)

    def _withdrawn(self, gone: Withdrawn) -> None:
        """A fallback client started the answer over: bill the withdrawn one, carry its tools.

        Tools it started early are not started again: the new answer's identical call takes
        the running call's result (`Batch.restarted`).
        """
        self.usage = self.usage + gone.usage
        if gone.usage.input_tokens is not None:
            self._priced(gone)
        if self.batch is not None:
            self.batch = self.batch.restarted()

    # -- the turn end ----------------------------------------------------------------------

    async def _turn_end(
        self, response: Message, *, resumed: bool, accepted: ToolCall | None = None
    ) -> RunResult[Any] | None:
        # The answer is passed in, not looked up: an empty answer (a filtered or truncated
        # one) adds no message, and the last assistant message would be an older answer.
        cfg = self.cfg
        if await take_in(self, "steer"):  # the user spoke while the answer came: not final
            return None
        self.output_call = accepted  # a pause here carries it: the history has the model's own
        refusal = self._refusal(response)
        output: Any = response.text if refusal is None else None
        if cfg.output is not None and refusal is None:
            try:
                output = answer_output(cfg.output, response, accepted)
            except Rejected as rejected:
                self._rejected(rejected, feedback=True)
                return None
        ctx = TurnEndContext(self.history, response, self.continuations, resumed, output=output)
        decided = await cfg.hooks.chain("on_turn_end", cfg.hooks.on_turn_end, ctx)
        if isinstance(decided, ContinueWithMessages):
            check_continuations(cfg.max_continuations, self.continuations)
            self.continuations += 1
            self.history.extend(decided.messages)
            return None
        if isinstance(decided, Pause):
            return self.paused("on_turn_end", decided.reason, [])
        output = ctx.output
        if await take_in(self, "steer") or await take_in(self, "follow_up"):
            return None  # the run goes on with what the user queued
        if cfg.guardrails:
            await check_output(self, response.text, output)
        return self.result(RunStatus.FINISHED, text=response.text, output=output, refusal=refusal)

    def _refusal(self, response: Message) -> str | None:
        if self.stop_reason is not StopReason.REFUSAL:
            return None
        return response.text or self.stop_detail or "the model declined to answer"

    def _rejected(self, rejected: Rejected, *, feedback: bool) -> None:
        """Count an answer that did not fit; send its problems back, or give up past the retries.

        Raises:
            OutputValidationError: The answers did not fit `output_retries + 1` times.
        """
        plan = self.cfg.output
        assert plan is not None
        self.output_attempts += 1
        note = plan.feedback(rejected) if feedback else None
        if self.cfg.sinks:  # `Worker.stream` readers learn the partials they saw were rejected
            _send(self.cfg.sinks, rejection(plan, rejected, self.output_attempts, note))
        if self.output_attempts > plan.retries:
            raise give_up(plan, rejected, self.output_attempts)
        if note is not None:
            self.history.append(note)

    # -- outcomes ------------------------------------------------------------------------

    def result(self, status: RunStatus, **kwargs: Any) -> RunResult[Any]:
        """A RunResult with this run's counters."""
        return RunResult(
            status,
            messages=self.history[self.start :],
            requests=self.requests,
            stop_reason=self.stop_reason,
            response_ids=list(self.response_ids),
            **self.tree.totals(self.usage, self.request_usage),  # the sub-agents' added in
            cache_misses=list(self.cache_misses),
            **kwargs,
        )

    def paused(self, at: Any, reason: str | None, pending: list[PendingCall]) -> RunResult[Any]:
        """The PAUSED result with its state."""
        state = PauseState(
            list(self.history),
            pending,
            at=at,
            reason=reason,
            requests=self.requests,
            continuations=self.continuations,
            usage=self.usage,
            tools=list(self.cfg.registry.names),
            response_id=self.response_ids[-1] if self.response_ids else self.chain_from,
            request_usage=list(self.request_usage),
            stop_reason=self.stop_reason if at == "on_turn_end" else None,
            stop_message=self.stop_detail if at == "on_turn_end" else None,
            output_attempts=self.output_attempts,
            tool_calls=self.tool_calls,
            output_call=self.output_call if at == "on_turn_end" else None,
            context=None if self.cfg.context is None else self.cfg.context.saved(self.history),
            **self.tree.saved(),
        )
        if self.queue is not None:  # delivered after the resume, in whichever process
            state.steers, state.follow_ups = self.queue.take("steer"), self.queue.take("follow_up")
        return self.result(RunStatus.PAUSED, state=state, reason=reason)

    async def cancelled(self, reason: str) -> RunResult[Any]:
        """Clean up after a cancellation and give the CANCELLED result."""
        await self.cleanup(reason, "cancelled", None)
        return self.result(RunStatus.CANCELLED, reason=reason)

    async def cleanup(
        self, reason: str, kind: Any, error: BaseException | None
    ) -> list[BaseException]:
        """Abort the open block, close the batch, repair the history, run on_abort hooks."""
        from llm_worker.hooks import AbortContext

        abort = self.cfg.timeline.abort_current_block(reason)
        if abort is not None and self.cfg.sinks:
            _send(self.cfg.sinks, abort)  # `Worker.stream` readers see the abort too
        why = "cancelled" if kind == "cancelled" else "interrupted"
        batch, self.batch = self.batch, None
        last = self.history[-1] if self.history else None
        if batch is not None and last is not None and last.tool_uses:
            # Keep the results of calls that finished; the others are marked `why`.
            answer = batch.partial_results(why)
            if answer is not None:
                self.history.append(answer)
        self.history[:] = repair(self.history, why=why)[0]
        return await self.cfg.hooks.abort(AbortContext(reason, kind, error))


MALFORMED_CALL_RETRIES = 2
"""Times in a row the model is told its tool call was refused and asked again; the next such
answer ends the turn (`RunResult.stop_reason` is then `MALFORMED_TOOL_CALL`)."""

_GOES_ON = frozenset({StopReason.PAUSE_TURN, StopReason.COMPACTION})


def _malformed_feedback(response: Assembler) -> Message:
    # Like a call with bad arguments: the model reads what went wrong and tries again.
    stop = response.stop
    raw = stop.raw_stop_reason if stop is not None else None
    detail = stop.stop_message if stop is not None else None
    return Message.user(malformed_call(raw, detail))


def _last_assistant_index(history: list[Message]) -> int:
    for index in range(len(history) - 1, -1, -1):
        if history[index].role == "assistant":
            return index
    return len(history)


def _last_assistant(history: list[Message]) -> Message:
    for message in reversed(history):
        if message.role == "assistant":
            return message
    return Message("assistant", [])


def _adopt(ctx: contextvars.Context) -> None:
    """Set in the current context the variables `ctx` (a copy of it) changed."""
    for var, value in ctx.items():
        if var.get(_UNSET) is not value:
            var.set(value)


_UNSET = object()


def _send(sinks: list[Callable[[Any], None]], event: Any) -> None:
    for sink in sinks:
        sink(event)
