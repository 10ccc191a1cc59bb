"""Scripted model answers.

A `ScriptedClient` that needs no network, the answer type that the wire encoders turn into
each provider's real stream format, and the script steps both play: fixed answers, or
callables that compute an answer from the neutral request.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, TypeAlias

import anyio
import orjson

from llm_worker._tokens import TokenCount, media_provider, request_chars
from llm_worker.errors import ConfigurationError, LLMWorkerError, ProviderError
from llm_worker.events import (
    BlockType,
    ErrorEvent,
    Event,
    ResponseStatus,
    StatusEvent,
    StopReason,
    ThinkingMetadata,
    UsageEvent,
)
from llm_worker.messages import (
    Part,
    ProviderPart,
    Request,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)
from llm_worker.providers._blocks import BlockEmitter
from llm_worker.testing._server import RecordedRequest

__all__ = (
    "ScriptExhaustedError",
    "ScriptStep",
    "ScriptStepError",
    "ScriptedClient",
    "ScriptedRequest",
    "ScriptedResponse",
    "prompt_tokens",
)


class ScriptExhaustedError(LLMWorkerError, AssertionError):
    """More requests were made than the script has answers (or fewer, on `assert_all_used`)."""


class ScriptStepError(LLMWorkerError, AssertionError):
    """A script step failed: its callable raised, or its answer could not be played.

    The step's own exception is the `__cause__`. The script does not go past a failed step.
    """


@dataclass(slots=True)
class ScriptedResponse:
    """One scripted model answer.

    Attributes:
        parts: The answer's content in order: `TextPart`, `ThinkingPart` (with an optional
            `signature` / `redacted`), `ToolUsePart` (an empty `id` gets `call_<n>`).
        stop_reason: Why the answer stops; by default `TOOL_USE` when it calls a tool, else
            `END_TURN`.
        usage: Token usage; by default a rough count (4 characters a token).
        chunk_size: Text and thinking are streamed in deltas of this many characters.
        delay: Seconds between two deltas (a slow model, for demos and timing tests).
        fail_with: Raise this error inside the last part (its block is aborted), as a
            provider whose stream breaks mid-way would.
    """

    parts: list[Part]
    _: KW_ONLY
    stop_reason: StopReason | None = None
    usage: UsageEvent | None = None
    chunk_size: int = 16
    delay: float = 0.0
    fail_with: ProviderError | None = None

    @classmethod
    def text(cls, text: str, **options: object) -> ScriptedResponse:
        """An answer of one text block."""
        return cls([TextPart(text)], **options)  # type: ignore[arg-type]

    @classmethod
    def output(
        cls, value: object, *, tool: str | None = None, **options: object
    ) -> ScriptedResponse:
        """A structured answer: `value` as JSON text, or as a call of the output tool `tool`.

        Args:
            value: A pydantic model, a dataclass, a TypedDict, a list, … (anything pydantic
                serializes), or JSON text as it is. A value that is not a JSON object is
                sent as `{"result": value}`, the form the Worker asks for such types in.
            tool: The output tool's name in `output_mode="tool"` (`"final_result"` by
                default there); `None` answers with the JSON as text (native mode).
            **options: More `ScriptedResponse` fields (`chunk_size`, `stop_reason`, …).
        """
        text = value if isinstance(value, str) else _json_text(value)
        if not isinstance(value, str) and not text.startswith("{"):
            text = f'{{"result":{text}}}'
        if tool is None:
            return cls.text(text, **options)
        arguments: dict[str, Any] = orjson.loads(text)
        return cls([ToolUsePart("", tool, arguments)], **options)  # type: ignore[arg-type]

    def resolved_stop_reason(self) -> StopReason:
        """The stop reason, defaulted from the parts."""
        if self.stop_reason is not None:
            return self.stop_reason
        if any(isinstance(p, ToolUsePart) for p in self.parts):
            return StopReason.TOOL_USE
        return StopReason.END_TURN

    def resolved_usage(
        self, request: Request | None = None, *, prompt_chars: int = 0, provider: str | None = None
    ) -> UsageEvent:
        """The usage, defaulted to a rough count: 4 characters a token.

        Input tokens count the request (see `prompt_tokens`), or else `prompt_chars`
        characters of it; output tokens count the answer's parts. Neither is 0 with a
        request: an offline cost or budget test sees usage that grows with the conversation.
        `provider` bills the request's images and PDFs (None: the largest figures).
        """
        if self.usage is not None:
            return self.usage
        if request is not None:
            prompt = prompt_tokens(request, provider)
        else:
            prompt = prompt_chars // 4 + 1 if prompt_chars else 0
        output = sum(len(_part_text(p)) for p in self.parts) // 4 + 1
        return UsageEvent(input_tokens=prompt, output_tokens=output, total_tokens=prompt + output)

    def with_ids(self, start: int) -> list[Part]:
        """The parts, tool calls without an id given `call_<n>` from `start` on."""
        n = start
        parts: list[Part] = []
        for part in self.parts:
            if isinstance(part, ToolUsePart) and not part.id:
                parts.append(dataclasses.replace(part, id=f"call_{n}"))
                n += 1
            else:
                parts.append(part)
        return parts


@dataclass(slots=True, frozen=True)
class ScriptedRequest:
    """What a callable script step is given: the request it answers.

    Attributes:
        request: The request as a provider-neutral `Request`. A `ScriptedModelServer`
            decodes it from the body the real client sent, so one step reads the same
            conversation behind every wire format.
        index: Which request of the script this is (0 for the first).
        http: The HTTP request as received (`ScriptedModelServer` only; `None` from a
            `ScriptedClient`).
    """

    request: Request
    index: int
    http: RecordedRequest | None = None

    @property
    def tool_results(self) -> list[ToolResultPart]:
        """The tool results of the request's last message: what the model answers now."""
        messages = self.request.messages
        return messages[-1].tool_results if messages else []


ScriptStep: TypeAlias = ScriptedResponse | Callable[[ScriptedRequest], ScriptedResponse]
"""One answer of a script: fixed, or computed from the request (to echo a tool result or a
blob id back, as a real model would)."""


def prompt_tokens(request: Request, provider: str | None = None) -> int:
    """A rough count of a request's input tokens: a token for every 4 characters.

    The characters are those of what the request says, not of how a wire or the neutral
    form's JSON spells it: the system prompt; each message's text, thinking, tool calls
    (name and arguments' JSON) and tool results (name and content); an image or PDF as the
    tokens `provider` bills for it (from its pixels or pages; None: the largest of the
    providers' figures), a plain-text document as its text; the tools' names, descriptions
    and their schemas' property names and descriptions; the output schema's likewise. So the
    same conversation counts the same whichever of the four wires it came over (ids, item
    ids, signatures and schema keywords, which each wire spells its own way, do not count).
    """
    return request_chars(request, provider) // 4 + 1


def split_script(
    responses: Iterable[ScriptStep] | ScriptStep,
) -> tuple[ScriptStep | None, list[ScriptStep]]:
    """A script as (the step that answers every request, or None; the steps in order)."""
    if isinstance(responses, ScriptedResponse) or callable(responses):
        return responses, []
    return None, list(responses)


def refuse_add(every: ScriptStep | None) -> None:
    """Refuse steps added after one that answers every request.

    Raises:
        ConfigurationError: `every` is set.
    """
    if every is not None:
        raise ConfigurationError(
            "this script is one step that answers every request: no step can come after it"
        )


def play(step: ScriptStep, call: ScriptedRequest, count: int) -> ScriptedResponse:
    """The answer of a step to a request (`count`: steps in the script, for the error).

    Raises:
        ScriptStepError: The step's callable raised (anything but `KeyboardInterrupt` and
            `SystemExit`, a `CancelledError` included), or returned something other than a
            `ScriptedResponse` (a coroutine: the step was `async def`); chained to what it
            raised.
    """
    if isinstance(step, ScriptedResponse):
        return step
    where = f"script step {call.index + 1} (of {count})"
    try:
        response = step(call)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        # A step runs synchronously, so nothing can cancel it: a CancelledError it raises is
        # its own bug, and passed on it would pass for the cancellation of whoever called.
        raise ScriptStepError(f"{where} raised {exc!r}") from exc
    if inspect.iscoroutine(response):
        response.close()  # never awaited: closed, it warns of nothing
        raise ScriptStepError(
            f"{where} returned a coroutine: a callable step must be synchronous (not async def)"
        )
    if not isinstance(response, ScriptedResponse):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ScriptStepError(f"{where} returned {type(response).__name__}, not a ScriptedResponse")
    return response


def _json_text(value: object) -> str:
    from pydantic import TypeAdapter

    return TypeAdapter(Any).dump_json(value).decode()


def _part_text(part: Part) -> str:
    if isinstance(part, TextPart | ThinkingPart):
        return part.text
    if isinstance(part, ToolUsePart):
        return str(part.input)
    if isinstance(part, ProviderPart):
        return str(part.data)
    if isinstance(part, ToolResultPart):
        return part.content
    # An image or document: what it is, never its bytes (which would flood a test's output).
    return f"[{part.type} {part.media_type or part.url}]"


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class ScriptedClient:
    """A client that answers from a script instead of a network: for testing hooks and tools.

    Each `stream()` call plays the next step — a `ScriptedResponse`, or a callable given the
    `ScriptedRequest` that returns one — records the request in `requests`, and yields the
    same normalized events a real client would. A single step in place of the script answers
    every request. A step that raises makes `stream()` raise
    `ScriptStepError` (chained to it), and the script stays at that step.

    Example:
        ```python
        client = ScriptedClient([
            ScriptedResponse([ToolUsePart("", "get_weather", {"city": "Kyoto"})]),
            ScriptedResponse.text("Sunny."),
        ])
        worker = Worker(client, tools=[get_weather])
        ```
    """

    def __init__(
        self,
        responses: Iterable[ScriptStep] | ScriptStep,
        *,
        model: str = "scripted",
        provider: str = "scripted",
    ) -> None:
        self._every, self._responses = split_script(responses)
        self._next = 0
        self._calls = 0
        self.requests: list[Request] = []
        self._model = model
        self._provider = provider

    @property
    def provider(self) -> str:
        """`"scripted"` unless set."""
        return self._provider

    @property
    def model(self) -> str:
        """`"scripted"` unless set."""
        return self._model

    @property
    def remaining(self) -> int:
        """Answers not used yet (a step that answers every request: 1 until its first)."""
        if self._every is not None:
            return 0 if self._next else 1
        return len(self._responses) - self._next

    def add(self, *responses: ScriptStep) -> None:
        """Append answers to the script.

        Raises:
            ConfigurationError: One step answers every request: nothing would come after it.
        """
        refuse_add(self._every)
        self._responses.extend(responses)

    def assert_all_used(self) -> None:
        """Raise `ScriptExhaustedError` if some scripted answers were never requested."""
        if self.remaining:
            raise ScriptExhaustedError(f"{self.remaining} scripted answer(s) were never requested")

    async def count_tokens(self, request: Request) -> TokenCount:
        """The input tokens the scripted model reports for `request` (`prompt_tokens`).

        The same count an answer without `usage` reports, so a context policy or budget sees
        what the scripted usage will say. Plays no script step and records nothing.
        """
        return TokenCount(prompt_tokens(request, media_provider(self)), "provider")

    def stream(self, request: Request) -> AsyncIterator[Event]:
        """Yield the next scripted answer as events.

        Raises:
            ScriptExhaustedError: The script has no answer left.
            ScriptStepError: The step's callable raised (chained to its exception).
        """
        step = self._every
        if step is None:
            if self._next >= len(self._responses):
                raise ScriptExhaustedError(
                    f"request {self._next + 1} made, but the script has only "
                    f"{len(self._responses)} answer(s)"
                )
            step = self._responses[self._next]
        count = len(self._responses) if self._every is None else self._next + 1
        response = play(step, ScriptedRequest(request, self._next), count)
        self._next += 1
        self.requests.append(request)
        return self._events(response, request)

    async def _events(self, response: ScriptedResponse, request: Request) -> AsyncIterator[Event]:
        yield StatusEvent(ResponseStatus.STARTED)
        emitter = BlockEmitter()
        parts = response.with_ids(self._calls)
        self._calls += sum(1 for p in response.parts if isinstance(p, ToolUsePart) and not p.id)
        close_last = response.fail_with is None  # a failure comes inside the last block
        for batch in _part_events(parts, response.chunk_size, emitter, close_last):
            for event in batch:
                yield event
            batch.clear()
            if response.delay:
                await anyio.sleep(response.delay)
        if response.fail_with is not None:
            emitter.abort(response.fail_with.message)
            for event in emitter.out:
                yield event
            yield ErrorEvent(response.fail_with.error_type, response.fail_with.message)
            yield StatusEvent(ResponseStatus.FAILED)
            raise response.fail_with
        yield response.resolved_usage(request, provider=media_provider(self))
        emitter.finish(response.resolved_stop_reason(), None)
        for event in emitter.out:
            yield event
        yield StatusEvent(ResponseStatus.COMPLETED)


def _part_events(
    parts: Sequence[Part], chunk_size: int, emitter: BlockEmitter, close_last: bool
) -> Iterable[list[Event]]:
    out = emitter.out
    for n, part in enumerate(parts):
        if isinstance(part, TextPart):
            for piece in _pieces(part.text, chunk_size):
                emitter.text(piece)
                yield out
            _sign(emitter, part.signature)
        elif isinstance(part, ThinkingPart):
            emitter.start(BlockType.THINKING, ThinkingMetadata(part.redacted, part.item_id))
            if part.redacted is None:
                for piece in _pieces(part.text, chunk_size):
                    emitter.thinking(piece)
                    yield out
            _sign(emitter, part.signature)
        elif isinstance(part, ToolUsePart):
            emitter.tool_use(part.id, part.name, item_id=part.item_id)
            _sign(emitter, part.signature)
            for piece in _pieces(orjson.dumps(part.input).decode(), chunk_size):
                emitter.input_json(piece)
                yield out
        elif isinstance(part, ProviderPart):
            emitter.provider_block(part.data)
        if close_last or n < len(parts) - 1:
            emitter.stop()
        yield out


def _sign(emitter: BlockEmitter, signature: str | None) -> None:
    if signature is not None:
        emitter.signature(signature)
