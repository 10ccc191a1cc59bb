"""The Worker: runs the agent loop over any provider client.

```python
async with Worker("anthropic:claude-sonnet-4-5", tools=[get_weather], system="Be brief.") as worker:
    result = await worker.run("What is the weather in Kyoto?")
```

A run sends the history, streams the answer through the Timeline (your `on_*` handlers see it
live), runs the tool calls the answer makes (concurrently, hooks first), sends the results back,
and repeats until the model answers without a tool call and the on_turn_end hooks accept it.
See `llm_worker.hooks` for the hook points and their chain rules.

Cancellation: `worker.cancel()` (or a `Cancel` from on_message_send) ends the run with
`RunStatus.CANCELLED`. Cancelling the *task* that runs `run()` re-raises `CancelledError` after
the same clean-up, as asyncio requires (swallowing it would break timeouts and task groups).
Either way the open block is aborted (handlers see it), running tools are cancelled, on_abort
hooks run, and the history can be sent again: no tool call without a result, no half message.
"""

from __future__ import annotations

import copy
from collections.abc import (
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar, overload

import anyio

from llm_worker.errors import Aborted, ConfigurationError
from llm_worker.limits._budget import budget_for, resumed_budget
from llm_worker.messages import Message, ThinkingConfig, ToolChoice
from llm_worker.state import (
    OutputT,
    PauseState,
    RunResult,
    RunStatus,
    TurnEnded,
    TurnStarted,
)
from llm_worker.tools import Tool, ToolRegistry, Toolset
from llm_worker.worker._agent_tool import SubAgents
from llm_worker.worker._assembler import DEFAULT_MAX_ARGUMENTS
from llm_worker.worker._config import WorkerConfig
from llm_worker.worker._conversation import Conversation
from llm_worker.worker._decisions import (
    apply_decisions,
    check_not_paused,
    check_not_resumed,
    loaded_outputs,
    not_run,
    seen_on_resume,
)
from llm_worker.worker._handoff import handover_in
from llm_worker.worker._history import as_messages
from llm_worker.worker._intercept import RunStep, intercepted
from llm_worker.worker._output import PARTIAL_INTERVAL, check_output_call, output_plan
from llm_worker.worker._owned import owned_client
from llm_worker.worker._plugs import ContextPolicy, plug
from llm_worker.worker._registration import Registrations
from llm_worker.worker._session_run import SessionRuns
from llm_worker.worker._steering import Steering, SteerQueue
from llm_worker.worker._subscriber import announce
from llm_worker.worker._toolset import (
    add_tool,
    build_registry,
    check_resumable,
    progress_sink,
    reporting_progress,
)
from llm_worker.worker._tree import check_not_stale, entered, route_decisions
from llm_worker.worker._turn import Run, StreamRetry

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from llm_worker.blobs import BlobStore, OutputPolicy
    from llm_worker.guardrails import Guardrail
    from llm_worker.limits import Limits
    from llm_worker.otel import Instrumentation
    from llm_worker.providers._base import LLMClient
    from llm_worker.sessions import Session
    from llm_worker.state import Decision
    from llm_worker.tools import ErrorFormatter
    from llm_worker.worker._options import WorkerOptions
    from llm_worker.worker._output import OutputMode

__all__ = ("Worker",)

S = TypeVar("S")
T = TypeVar("T")
Sink = Callable[[Any], None]


class Worker(Registrations, SubAgents, Steering, SessionRuns[OutputT], Generic[OutputT]):
    """Runs the agent loop: request, stream, tools, hooks, repeat.

    With `output_type`, the final answer is structured: `Worker(client, output_type=Invoice)`
    is a `Worker[Invoice]`, and its `RunResult[Invoice].output` is the validated value.

    Args:
        client: A provider client, or a model string such as `"anthropic:claude-sonnet-4-5"`
            (the Worker then makes the client, and `aclose()` / `async with` closes it), or
            a list of model strings: a `FallbackClient` over them, tried in order.
        tools: Tools the model may call (`@tool` functions or methods, or `Tool` objects),
            and toolsets whose tools may change, asked before each request (an
            `llm_worker.mcp.MCPServer`).
        system: The system prompt.
        blob_store: Where large tool outputs are kept (the history then carries a summary and
            the model gets the built-in `inspect` tool to read them back); `None` keeps
            everything inline.
        output_policy: Thresholds and caps for large outputs (`OutputPolicy()` by default).
        max_requests: Requests one run may make before it fails with `LimitExceededError`
            (a shorthand for `run(..., limits=Limits(requests=n))`).
        limits: A budget (`llm_worker.Limits`) every run of this Worker is charged to,
            together (share one object between Workers to bound them together).
        session: Where the conversation is kept (`llm_worker.sessions`): each run loads the
            history from it first and appends its messages (and pause) after; `run(...,
            session=)` overrides it for one run.
        max_continuations: Times on_turn_end hooks may ask to continue in one run.
        max_tokens: Output token limit per request.
        temperature: Sampling temperature.
        thinking: Reasoning settings.
        tool_choice: How the model may use tools.
        parallel_tool_calls: Whether the model may call several tools in one answer (`None`
            leaves the provider's default, which allows it; Gemini has no such switch).
        stop_sequences: Strings that stop generation.
        options: Provider-specific request fields (merged into every request body).
        early_tool_start: Decide and start each tool call as soon as its block stops, while
            the answer still streams (only read-only or idempotent tools start early).
        stream_retry: When to send a request again after its stream broke mid-way.
        history: A history to start from.
        max_tool_arguments: Characters of one tool call's argument JSON past which the call
            is not run: it gets an error result asking for smaller arguments, and the history
            keeps it with empty arguments, so the next request stays small (default 1 MiB).
            The output tool (`output_mode="tool"`) is exempt: its arguments are the answer,
            bounded as a native answer is, by the client's `max_answer_chars`.
        format_tool_error: `(exception, call) -> str`: what the model reads when a tool raises
            (not `ToolError`); default `<Type>: <message>`, never a traceback. The exception
            stays on `ToolResult.exception`, logged with its traceback (`llm_worker` logger).
        inspect_tool_name: The name of the built-in `inspect` tool that comes with
            `blob_store`; rename it when one of your tools is called `inspect`.
        output_type: The type of the final answer: a pydantic model, a dataclass, a
            TypedDict, a `list[...]` or union of them, or a JSON Schema dict (the output is
            then the parsed JSON). `None`: free text (`RunResult.output` is the text).
        output_mode: `"native"`: the provider's structured output (every client supports
            it); `"tool"`: a final tool whose arguments are the output, for servers without
            native support (the run ends when a valid call of it arrives).
        output_retries: Invalid answers sent back to the model with their validation errors
            before the run fails with `OutputValidationError`.
        output_tool_name: The final tool's name in `"tool"` mode.
        output_partial_interval: Seconds between two `OutputPartial`s of a streamed answer
            (`Worker.stream`), after the first, which comes as soon as the JSON so far fits
            (default 0.05; 0: each time it has grown by a sixty-fourth).
        name: The agent's name (`gen_ai.agent.name` on its traces; any integration may read
            `worker.name`).
        instrument: OpenTelemetry tracing and metrics (`llm-worker[otel]`): True, or an
            `llm_worker.otel.Instrumentation` (content capture, providers); False never;
            None (the default) follows `llm_worker.otel.instrument()`. Off, nothing of it is
            loaded or registered.
        context: A `ContextPolicy`: each request kept inside the context window.
        guardrails: Input and output checks that stop a run (`llm_worker.guardrails`).
        prompt_cache: Prompt caching and `CacheMiss` reports (see `Request.prompt_cache`).
    """

    @overload
    def __init__(
        self: Worker[str],
        client: LLMClient | str | Sequence[str],
        *,
        output_type: None = None,
        **options: Unpack[WorkerOptions],
    ) -> None: ...
    @overload
    def __init__(
        self: Worker[T],
        client: LLMClient | str | Sequence[str],
        *,
        output_type: type[T],
        **options: Unpack[WorkerOptions],
    ) -> None: ...
    @overload
    def __init__(
        self: Worker[Any],
        client: LLMClient | str | Sequence[str],
        *,
        output_type: dict[str, Any],
        **options: Unpack[WorkerOptions],
    ) -> None: ...

    def __init__(
        self,
        client: LLMClient | str | Sequence[str],
        *,
        tools: Iterable[Tool | Toolset] = (),
        system: str | None = None,
        blob_store: BlobStore | None = None,
        output_policy: OutputPolicy | None = None,
        max_requests: int = 50,
        max_continuations: int = 3,
        max_tokens: int | None = None,
        temperature: float | None = None,
        thinking: ThinkingConfig | None = None,
        tool_choice: ToolChoice | None = None,
        parallel_tool_calls: bool | None = None,
        stop_sequences: Sequence[str] = (),
        options: Mapping[str, Any] | None = None,
        early_tool_start: bool = False,
        stream_retry: StreamRetry | None = None,
        history: Iterable[Message] = (),
        max_tool_arguments: int = DEFAULT_MAX_ARGUMENTS,
        format_tool_error: ErrorFormatter | None = None,
        inspect_tool_name: str = "inspect",
        output_type: Any = None,
        output_mode: OutputMode = "native",
        output_retries: int = 1,
        output_tool_name: str = "final_result",
        output_partial_interval: float = PARTIAL_INTERVAL,
        name: str | None = None,
        instrument: bool | Instrumentation | None = None,
        context: ContextPolicy | None = None,
        guardrails: Iterable[Guardrail] = (),
        prompt_cache: bool = True,
        limits: Limits | None = None,
        session: Session | None = None,
    ) -> None:
        plan = output_plan(
            output_type, output_mode, output_retries, output_tool_name, output_partial_interval
        )
        self._cfg = WorkerConfig(
            self._own(client),
            *build_registry(tools, blob_store, output_policy, inspect_tool_name, plan),
            stream_retry=stream_retry or StreamRetry(),
            system=system,
            max_requests=max_requests,
            max_continuations=max_continuations,
            max_tokens=max_tokens,
            temperature=temperature,
            thinking=thinking,
            tool_choice=tool_choice,
            parallel_tool_calls=parallel_tool_calls,
            stop_sequences=list(stop_sequences),
            options=dict(options or {}),
            early_tool_start=early_tool_start,
            max_tool_arguments=max_tool_arguments,
            format_tool_error=format_tool_error,
            blob_store=blob_store,
            output=plan,
        )
        self._setup(name, history, instrument, context, guardrails, prompt_cache, limits, session)

    def _own(self, client: LLMClient | str | Sequence[str]) -> LLMClient:
        """The client; one made from model strings is this Worker's to close (`aclose`)."""
        made, self._owned = owned_client(client)
        return made

    def _setup(  # noqa: PLR0917  (private: the constructor's arguments, passed on in order)
        self,
        name: str | None,
        history: Iterable[Message],
        instrument: bool | Instrumentation | None,
        context: ContextPolicy | None,
        guardrails: Iterable[Guardrail],
        prompt_cache: bool,
        limits: Limits | None,
        session: Session | None,
    ) -> None:
        self._cfg.limits, self._cfg.session = limits, session
        plug(self._cfg, instrument, name, context, guardrails)
        self._cfg.prompt_cache = prompt_cache
        self.name = name  # the agent's name (gen_ai.agent.name), for any integration
        self.history: list[Message] = list(history)
        """Every message of the conversation, in the provider-neutral model."""
        self._turns = 0
        self._scope: anyio.CancelScope | None = None
        self._done: anyio.Event | None = None  # set when the running run ends; None: idle
        self._paused: PauseState | None = None
        self._last_response: str | None = None  # a stored conversation goes on from it
        self._subscribers: list[Any] = []
        # Forks running runs on this Worker's behalf (a DurableWorker's): cancel() reaches them.
        self._followers: set[Worker[Any]] = set()
        self._cancel_next = False  # a cancel that came before the run's scope opened
        self._queue = SteerQueue()  # steer() / follow_up() messages not taken in yet
        self._conversation = Conversation()  # kept between requests, across runs

    def __repr__(self) -> str:
        return f"Worker(client={self._cfg.client!r}, tools={self._cfg.registry.names!r})"

    async def aclose(self) -> None:
        """Close what this Worker opened: the client it made from a model string.

        A client you passed in stays open; it is yours to close (`async with client:`). A run
        still going is cancelled first, as by `cancel()` (it returns `RunStatus.CANCELLED`),
        and its clean-up awaited: closing the pool under it would leak its connection.
        """
        done = self._done
        if done is not None:
            self.cancel()
            await done.wait()
        if self._owned is not None:
            await self._owned.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- configuration ---------------------------------------------------------------------

    @property
    def client(self) -> LLMClient:
        """The provider client."""
        return self._cfg.client

    @property
    def tools(self) -> ToolRegistry:
        """The registered tools (the `inspect` tool included when there is a blob store)."""
        return self._cfg.registry

    @property
    def blob_store(self) -> BlobStore | None:
        """The blob store of large outputs, if any."""
        return self._cfg.blob_store

    def add_tool(self, tool: Tool) -> None:
        """Register one more tool.

        Raises:
            ConfigurationError: A tool with that name is registered already (the built-in
                `inspect` tool included).
        """
        add_tool(self._cfg.registry, tool)

    def fork(self, history: Iterable[Message] = ()) -> Self:
        """A Worker sharing this one's client, tools, hooks, handlers and settings.

        The fork has a history of its own (`history`, empty by default), so it runs a
        conversation beside this Worker's: what a durable run or a server does to run many
        conversations with one configuration. Registrations made on either later apply to
        both. The client stays this Worker's: closing the fork never closes it.
        """
        twin = copy.copy(self)
        twin._owned = None
        twin.history = list(history)
        twin._turns, twin._scope, twin._done = 0, None, None
        twin._paused, twin._last_response = None, None
        twin._followers, twin._cancel_next, twin._queue = set(), False, SteerQueue()
        twin._conversation = Conversation()
        return twin

    # -- running -----------------------------------------------------------------------------

    async def run(
        self,
        input: str | Message | Iterable[Message],
        *,
        limits: Limits | None = None,
        session: Session | None = None,
    ) -> RunResult[OutputT]:
        """Run one turn: append `input` to the history and loop until the answer is final.

        `limits` is a budget for this run, on top of the Worker's (`llm_worker.Limits`).
        `session` (else the Worker's) keeps the conversation: the history is loaded from it
        first and the run's messages (and pause) appended after (`llm_worker.sessions`).

        Raises:
            ConfigurationError: This Worker is running another run already (runs share one
                history; start the next when the last one has returned).
            PauseStateError: The last run paused: `resume` it, or `discard_pause` it first.
            Aborted: A hook returned `Abort`.
            HookError: A hook raised or timed out.
            LimitExceededError: `max_requests` or `max_continuations` was reached, or a
                limit of `limits` (the history stays valid).
            ProviderError: The provider failed (after retries).
            SessionBusyError: Another run holds the session.
        """
        return await self._run(input, None, limits, session)

    async def _run_now(
        self, input: str | Message | Iterable[Message], sink: Sink | None, limits: Limits | None
    ) -> RunResult[OutputT]:
        self._check_idle()
        check_not_paused(self._paused)
        run = Run(self._cfg, self.history, start=len(self.history), chain_from=self._last_response)
        run.budget = budget_for(self._cfg.limits, limits)
        self.history.extend(as_messages(input))
        return await self._go(run, None, sink)

    async def resume(
        self,
        state: PauseState | None = None,
        *,
        decisions: Mapping[str, Decision] | None = None,
        limits: Limits | None = None,
        session: Session | None = None,
    ) -> RunResult[OutputT]:
        """Go on with a paused run, in this Worker (which may be a new one, in a new process).

        Pending calls pass through the before_tool_call hooks again (`resumed=True` for the
        call that paused and decided ones; `False` for later calls no hook has seen yet),
        starting from the arguments the model sent — so a hook's rewrite applies exactly once —
        unless `decisions` decides them: by call id, `Decision.approve()` (optionally with edited
        arguments) or `Decision.deny(reason)`. An approved call skips the hooks and runs with
        the arguments the hooks before the pausing one left (`PendingCall.arguments`: a
        sanitizing hook's rewrite stands). Calls that already ran keep their results. A call
        of a tool marked `requires_approval` pauses again unless it was approved.

        A stored output's content, which a state's JSON does not carry, is read back from this
        Worker's blob store. This Worker's system prompt, tools and hooks apply (the state
        holds none). Another Worker resuming the same state runs its calls again (see
        `PauseState`). The result's `usage` and `requests` count the whole run (pause too),
        and so do `limits` (and the Worker's): what a `Limits` object did not count before
        the pause (one made in another process) is charged the spending before it. With a
        `session` (or the Worker's), `state` may be left out: the session's pause is resumed.

        Raises:
            PauseStateError: The state names tools this Worker does not have, decisions for
                calls it does not hold, edited arguments that do not fit the tool, or a
                stored output whose blob this Worker's store does not have; or this Worker
                already resumed or discarded it (its calls would run twice).
            BlobError: The blob store could not be read (nothing ran: retry).
        """
        return await self._resume(state, decisions or {}, None, limits, session)

    async def _resume_now(
        self,
        state: PauseState,
        decisions: Mapping[str, Decision],
        sink: Sink | None,
        limits: Limits | None,
    ) -> RunResult[OutputT]:
        # Check before touching the history: a refused resume leaves the Worker as it was.
        self._check_idle(state)
        check_not_stale(self._paused, state)
        await self._cfg.registry.refresh()  # a toolset's tools, for the calls to resume
        decisions, routed = route_decisions(state, decisions)
        pending = apply_decisions(state, decisions, self._cfg.registry)
        check_resumable(self._cfg.registry, pending, state.tools)
        check_output_call(self._cfg.output, state.output_call)
        pending = await loaded_outputs(pending, self._cfg.blob_store)
        self._check_idle(state)  # again: another resume may have begun while this one awaited
        self._paused = None
        self.history[:] = list(state.history)
        if self._cfg.context is not None:  # the request the pausing Worker would send
            self._cfg.context.restore(self.history, state.context)
        run = Run(self._cfg, self.history, state.requests, state.continuations, state.usage)
        run.start, run.chain_from = len(self.history), state.response_id or self._last_response
        run.decided = seen_on_resume(state, decisions)
        run.request_usage, run.tree.children = list(state.request_usage), list(state.child_runs)
        run.tree.resume = routed
        run.tree.handover = handover_in(pending, self._cfg.registry)
        run.output_attempts, run.tool_calls = state.output_attempts, state.tool_calls
        self._queue.restore(state.steers, state.follow_ups)
        run.budget = resumed_budget(state, self._cfg.limits, limits)
        paused = PauseState(
            state.history,
            pending,
            at=state.at,
            reason=state.reason,
            trace_context=state.trace_context,  # the resumed run's span links to the paused one
            stop_reason=state.stop_reason,
            stop_message=state.stop_message,
            output_call=state.output_call,
        )
        return await self._go(run, paused, sink)

    async def discard_pause(
        self, reason: str = "the application moved on", *, state: PauseState | None = None
    ) -> None:
        """Drop a paused run instead of resuming it, so that `run()` may start a new one.

        Each call that never started gets an error result saying exactly that (with
        `reason`); calls that ran or were skipped or denied keep their results. The
        after_tool_call hooks see every result (outcome `"not_run"` for the calls that never
        started), as in any batch; no request is sent. Without `state`, the pause of this
        Worker's last run is dropped (nothing happens when it has none); with a `state` (from
        another process), the Worker's history becomes the state's first, as with `resume`.

        Raises:
            ConfigurationError: This Worker is running a run.
            Aborted: An after_tool_call hook returned `Abort`.
            HookError: An after_tool_call hook raised or timed out.
            PauseStateError: This Worker resumed or discarded `state` already, or a result
                names a blob its blob store does not have (nothing is changed either way).
        """
        self._check_idle(state)
        state = state or self._paused
        # Outputs first: a state whose blobs are gone leaves the Worker as it was.
        pending = [not_run(p, reason) for p in state.pending] if state is not None else []
        pending = await loaded_outputs(pending, self._cfg.blob_store)
        self._check_idle(state)  # again: a run may have begun, or resumed it, meanwhile
        self._paused = None
        if state is None:
            return
        self.history[:] = list(state.history)
        self._queue.restore(state.steers, state.follow_ups)  # the next run takes them in
        if state.at != "before_tool_call" or not state.pending:
            return  # an answer waiting at on_turn_end: the history is already whole
        run = Run(self._cfg, self.history, start=len(self.history), settle_only=True)
        done = self._done = anyio.Event()
        try:
            await self._guarded(run, PauseState(state.history, pending, at=state.at))
        finally:
            self._done = None
            done.set()

    def cancel(self) -> None:
        """Cancel the running run: it returns `RunStatus.CANCELLED` after its clean-up.

        A run that is starting (a run interceptor still at work) is cancelled as it starts;
        an idle Worker has nothing to cancel, and its next run goes as usual.

        The runs a `DurableWorker` over this Worker is running in this process are cancelled
        too (each ends CANCELLED, its result recorded); one waiting for a decision is not
        running: end it with `DurableWorker.cancel(run_id)`.
        """
        if self._scope is not None:
            self._scope.cancel()
        elif self._done is not None:  # starting: its scope opens in a moment
            self._cancel_next = True
        for follower in list(self._followers):
            if follower._paused is None:  # one waiting for a decision is not running
                follower._cancel_run()

    def _cancel_run(self) -> None:
        """Cancel the run this fork runs, or the next one it starts (it is about to)."""
        self._cancel_next = True
        if self._scope is not None:
            self._scope.cancel()

    def _check_idle(self, state: PauseState | None = None) -> None:
        if self._done is not None:
            raise ConfigurationError(
                "this Worker is already running a run: runs share its one history, so await "
                "the running one first (or use one Worker per conversation)"
            )
        check_not_resumed(self.history, state)  # a state's calls run (or read "not run") once

    async def _go(
        self, run: Run, resume: PauseState | None, sink: Sink | None
    ) -> RunResult[OutputT]:
        turn = self._turns
        self._turns += 1
        run.conversation = self._conversation  # its checks and cache go on from the last run's
        done = self._done = anyio.Event()
        if sink is not None:  # a RunStream's: it sees this run's events and no other run's
            self._cfg.sinks.append(sink)
        try:
            announce(self._cfg.sinks, self._subscribers, TurnStarted(turn))
            try:
                run.queue = self._queue
                step = RunStep(self._cfg.client, resume)
                proceed = lambda: self._guarded(run, resume)  # noqa: E731
                with reporting_progress(progress_sink(self._cfg.sinks)), entered(self._cfg, run):
                    result = await intercepted(self._cfg.interceptors, "run", step, proceed)
            finally:
                announce(self._cfg.sinks, self._subscribers, TurnEnded(turn))
        finally:
            if sink is not None:
                self._cfg.sinks.remove(sink)
            self._done, self._cancel_next = None, False
            done.set()
        self._paused = result.state if result.status is RunStatus.PAUSED else None
        if run.budget is not None:
            run.budget.ended(result)
        self._last_response = (result.response_ids or [self._last_response])[-1]
        return result

    async def _guarded(self, run: Run, resume: PauseState | None) -> RunResult[OutputT]:
        result: RunResult[OutputT] | None = None
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                if self._cancel_next:
                    scope.cancel()
                result = await run.loop(resume=resume)
        except Aborted:
            raise  # its clean-up ran where the hook aborted
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await run.cleanup("the task running the worker was cancelled", "cancelled", None)
            raise
        except Exception as exc:
            errors: list[BaseException] = []
            with anyio.CancelScope() as self._scope:  # worker.cancel() stops on_abort hooks too
                errors = await run.cleanup(f"{type(exc).__name__}: {exc}", "failed", exc)
            for error in errors:
                exc.add_note(f"an on_abort hook failed too: {error}")
            raise
        finally:
            self._scope = None
        if result is None:  # worker.cancel() cancelled the scope
            with anyio.CancelScope() as self._scope:
                result = await run.cancelled("cancelled by worker.cancel()")
            self._scope = None
        return result or run.result(RunStatus.CANCELLED, reason="cancelled by worker.cancel()")
