"""The provider-neutral message and request model.

A conversation is a list of [`Message`][]s; each message is a role and a list of parts:
[`TextPart`][], [`ImagePart`][], [`DocumentPart`][], [`ThinkingPart`][], [`ToolUsePart`][],
[`ToolResultPart`][], and [`ProviderPart`][] for provider content the neutral model has no
kind for. Every provider
client builds its own request body from a [`Request`][] made of these, so one history runs on
every provider.

Provider-opaque continuation data (thinking signatures, redacted thinking, Gemini thought
signatures, Responses reasoning items) lives on the parts together with the [`Origin`][] that
produced it; a client sends it back only to the same provider and model and drops it elsewhere.

Messages serialize to JSON and back losslessly (`Message.to_json` / `messages_to_json`; the
bytes of an image or document as standard base64), which paused runs and saved sessions rely
on.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, cast

import orjson

from llm_worker._fieldwise import fieldwise
from llm_worker._json import as_dict, as_list
from llm_worker._media import DocumentPart, ImagePart, MediaPart
from llm_worker._sniff import decoding
from llm_worker.errors import InvalidMessagesError

if TYPE_CHECKING:
    from pydantic import TypeAdapter, ValidationError

__all__ = (
    "Citation",
    "DocumentPart",
    "ImagePart",
    "JsonValue",
    "MediaPart",
    "Message",
    "Origin",
    "OutputSchema",
    "Part",
    "ProviderPart",
    "Request",
    "Role",
    "SpecificTool",
    "TextPart",
    "ThinkingConfig",
    "ThinkingPart",
    "ToolChoice",
    "ToolResultPart",
    "ToolSpec",
    "ToolUsePart",
    "messages_from_json",
    "messages_to_json",
)

JsonValue: TypeAlias = dict[str, "JsonValue"] | list["JsonValue"] | str | int | float | bool | None
"""Any JSON value, as parsed."""

Role: TypeAlias = Literal["user", "assistant"]
"""Who said a message. Tool results travel in user messages, as Anthropic and Gemini require."""


@dataclass(slots=True, frozen=True)
class Origin:
    """Which provider and model produced a part's opaque continuation data.

    Attributes:
        provider: The wire protocol: `"anthropic"`, `"gemini"`, `"openai_responses"`,
            `"openai_chat"`.
        model: The model name as sent in the request.
    """

    provider: str
    model: str


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class Citation:
    """A source that the answer text cites (a web page, a document passage, a file).

    The neutral fields are filled where the provider gives them; `data` keeps the provider's
    own object whole, so a request builder can send it back to the provider that made it.

    Attributes:
        data: The provider's citation as JSON, verbatim (an Anthropic `citations[]` entry, a
            Responses annotation, a Gemini `citationSources[]` entry).
        url: The cited web address, if any.
        title: The cited source's title, if any.
        cited_text: The passage of the source that is cited, if the provider quotes it.
        start_index: Where the citing span starts in the part's text (characters), if known.
        end_index: Where the citing span ends in the part's text (characters), if known.
        origin: The provider and model that produced `data`.
    """

    data: dict[str, Any]
    _: KW_ONLY
    url: str | None = None
    title: str | None = None
    cited_text: str | None = None
    start_index: int | None = None
    end_index: int | None = None
    origin: Origin | None = None


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class TextPart:
    """Plain text.

    Attributes:
        text: The text.
        signature: Gemini `thoughtSignature` attached to this text part, if any.
        item_id: OpenAI Responses message item id (`msg_…`), sent back with its reasoning item.
        origin: Who produced `signature` / `item_id`.
        citations: The sources this text cites, in the order the provider gave them.
        phase: OpenAI Responses message phase (`commentary` / `final_answer`), sent back to the
            same provider.
    """

    text: str
    _: KW_ONLY
    signature: str | None = None
    item_id: str | None = None
    origin: Origin | None = None
    citations: list[Citation] = field(default_factory=lambda: [])
    phase: str | None = None
    type: Literal["text"] = "text"


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class ThinkingPart:
    """The model's reasoning, as shown (or a summary of it).

    Attributes:
        text: The thinking text (empty for redacted thinking or an encrypted-only item).
        signature: Anthropic thinking `signature`, Gemini `thoughtSignature`, or OpenAI
            Responses `encrypted_content`.
        redacted: Anthropic `redacted_thinking` data, sent back untouched.
        item_id: OpenAI Responses reasoning item id; on Chat Completions, `"thinking"` for
            thinking read from Mistral's thinking content parts (the form it goes back in).
        origin: Who produced the opaque fields.
    """

    text: str
    _: KW_ONLY
    signature: str | None = None
    redacted: str | None = None
    item_id: str | None = None
    origin: Origin | None = None
    type: Literal["thinking"] = "thinking"


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class ToolUsePart:
    """A call of a tool by the model.

    Attributes:
        id: Call id; the matching `ToolResultPart.tool_use_id`.
        name: Tool name.
        input: Parsed arguments (a JSON object).
        signature: Gemini `thoughtSignature` attached to the function call part, if any.
        item_id: The provider's own id of the call, sent back to it: OpenAI Responses
            function-call item id (`fc_…`), Gemini `functionCall.id` (echoed in the
            `functionResponse`).
        origin: Who produced the opaque fields.
        caller: Anthropic: who made the call, as the API said (`{"type": "direct"}`, or the
            code-execution tool that called it from its code); sent back with the call to the
            same model, which requires it for a call made from code. OpenAI Responses: the
            item's `caller` fields (`direct`, or the `program` item that made the call) and
            its function's `namespace` under that key, sent back on the call.
    """

    id: str
    name: str
    input: dict[str, Any]
    _: KW_ONLY
    signature: str | None = None
    item_id: str | None = None
    origin: Origin | None = None
    caller: dict[str, Any] | None = None
    type: Literal["tool_use"] = "tool_use"


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class ToolResultPart:
    """The result of a tool call, sent back to the model.

    A tool that returns an image (a screenshot) or a document has it in `media`: Anthropic,
    OpenAI Responses and Gemini get it inside the tool result; OpenAI Chat Completions, whose
    tool messages hold text only, gets it in a user message right after the tool messages.

    Attributes:
        tool_use_id: The id of the call it answers.
        content: The result as text (what the model reads).
        is_error: True when the call failed, was refused or skipped.
        name: The tool's name (Gemini's `functionResponse` needs it).
        media: Images and documents the tool returned, after the text.
    """

    tool_use_id: str
    content: str
    _: KW_ONLY
    is_error: bool = False
    name: str | None = None
    media: list[MediaPart] = field(default_factory=lambda: [])
    type: Literal["tool_result"] = "tool_result"


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class ProviderPart:
    """Provider-native content the neutral model has no kind for, kept to be sent back.

    Anthropic server-tool blocks (`server_tool_use`, `web_search_tool_result`, …), MCP blocks
    and compaction blocks (a `pause_turn` answer must go back as it came for the server tool to
    go on); Gemini parts such as `executableCode` / `codeExecutionResult`; OpenAI Responses
    hosted-tool items (`web_search_call`, `code_interpreter_call`, …). The producing client
    sends `data` back verbatim, in place, only when `origin` names its provider and model (and,
    for Responses, only item kinds the API accepts as input); every other client drops it.

    Attributes:
        data: The provider's block, as JSON (deltas already merged in).
        origin: Who produced it; a part without an origin is sent nowhere.
    """

    data: dict[str, Any]
    _: KW_ONLY
    origin: Origin | None = None
    type: Literal["provider"] = "provider"


Part: TypeAlias = (
    TextPart | ImagePart | DocumentPart | ThinkingPart | ToolUsePart | ToolResultPart | ProviderPart
)
"""Any message part."""

_PART_TYPES = (
    TextPart,
    ImagePart,
    DocumentPart,
    ThinkingPart,
    ToolUsePart,
    ToolResultPart,
    ProviderPart,
)


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class Message:
    """One message of a conversation.

    Attributes:
        role: `"user"` or `"assistant"`.
        content: Its parts, in order.
    """

    role: Role
    content: list[Part] = field(default_factory=lambda: [])

    @classmethod
    def user(cls, *content: str | Part) -> Message:
        """A user message of text (each `str` a text part) and parts, in order.

        `Message.user("What is in this picture?", ImagePart.from_path("cat.png"))`.
        """
        parts = [TextPart(c) if isinstance(c, str) else c for c in content]
        for part in cast("list[object]", parts):
            if not isinstance(part, _PART_TYPES):
                raise InvalidMessagesError(
                    f"Message.user takes strings and parts (TextPart, ImagePart, DocumentPart, "
                    f"...), not {type(part).__name__}"
                )
        return cls("user", parts)

    @classmethod
    def assistant(cls, text: str) -> Message:
        """An assistant message with one text part."""
        return cls("assistant", [TextPart(text)])

    @property
    def text(self) -> str:
        """The concatenated text parts (thinking excluded)."""
        return "".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def tool_uses(self) -> list[ToolUsePart]:
        """The tool calls of this message, in order."""
        return [p for p in self.content if isinstance(p, ToolUsePart)]

    @property
    def tool_results(self) -> list[ToolResultPart]:
        """The tool results of this message, in order."""
        return [p for p in self.content if isinstance(p, ToolResultPart)]

    def to_dict(self) -> dict[str, Any]:
        """This message as plain JSON-ready data.

        Raises:
            InvalidMessagesError: A value in the message (a tool input) is not JSON data.
        """
        try:
            return _message_adapter().dump_python(self, mode="json")
        except ValueError as exc:  # PydanticSerializationError, or a cycle / too deep a value
            raise InvalidMessagesError(f"a message holds a value that is not JSON: {exc}") from exc

    def to_json(self) -> str:
        """This message as a JSON string.

        Raises:
            InvalidMessagesError: A value in the message is not JSON data.
        """
        return _dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: object) -> Message:
        """Rebuild a message from `to_dict` output.

        Raises:
            InvalidMessagesError: The data is not a valid message.
        """
        from pydantic import ValidationError

        try:
            with decoding():
                return _message_adapter().validate_python(data)
        except ValidationError as exc:
            raise InvalidMessagesError(
                f"not a valid message: {_describe(exc, data, 'message')}"
            ) from exc

    @classmethod
    def from_json(cls, text: str | bytes) -> Message:
        """Rebuild a message from `to_json` output.

        Raises:
            InvalidMessagesError: The text is not a valid message.
        """
        return cls.from_dict(_loads(text))


def messages_to_json(messages: list[Message]) -> str:
    """Serialize a conversation to a JSON array.

    Raises:
        InvalidMessagesError: A value in a message (a tool input) is not JSON data.
    """
    return _dumps([m.to_dict() for m in messages])


def messages_from_json(text: str | bytes) -> list[Message]:
    """Rebuild a conversation from `messages_to_json` output.

    Raises:
        InvalidMessagesError: The text is not a valid list of messages.
    """
    from pydantic import ValidationError

    data = _loads(text)
    try:
        with decoding():
            return _messages_adapter().validate_python(data)
    except ValidationError as exc:
        raise InvalidMessagesError(
            f"not a valid list of messages: {_describe(exc, data, 'messages')}"
        ) from exc


def _loads(text: str | bytes) -> object:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidMessagesError(f"not valid JSON: {exc}") from exc


def _dumps(data: object) -> str:
    try:
        return orjson.dumps(data).decode()
    except orjson.JSONEncodeError as exc:  # an int beyond 64 bits, a lone surrogate
        raise InvalidMessagesError(f"a message holds a value that is not JSON: {exc}") from exc


# pydantic reports a part that fits no kind once per kind: `type` says which kind was meant.
_PART_CLASSES: dict[str, str] = {
    "text": "TextPart",
    "image": "ImagePart",
    "document": "DocumentPart",
    "thinking": "ThinkingPart",
    "tool_use": "ToolUsePart",
    "tool_result": "ToolResultPart",
    "provider": "ProviderPart",
}
_MAX_PROBLEMS = 5


def _describe(exc: ValidationError, data: object, root: str) -> str:
    """Pydantic's errors as short lines (`messages[0].content[1].text: Field required`)."""
    problems: list[str] = []
    for error in exc.errors(include_url=False):
        problem = _problem(list(error["loc"]), error["msg"], data, root)
        if problem is not None and problem not in problems:
            problems.append(problem)
    shown = "; ".join(problems[:_MAX_PROBLEMS])
    hidden = len(problems) - _MAX_PROBLEMS
    return shown + (f"; and {hidden} more" if hidden > 0 else "")


def _problem(loc: list[int | str], msg: str, data: object, root: str) -> str | None:
    for i, key in enumerate(loc):
        if key not in _PART_CLASSES.values():
            continue
        kind = as_dict(_walk(data, loc[:i])).get("type", "text")
        if not isinstance(kind, str) or kind not in _PART_CLASSES:
            known = ", ".join(_PART_CLASSES)
            return f"{_path(root, loc[:i])}: unknown part type {kind!r} (known: {known})"
        if key != _PART_CLASSES[kind]:
            return None  # the error of a kind the part does not claim to be
        del loc[i]
        break
    return f"{_path(root, loc)}: {msg}"


def _walk(data: object, loc: list[int | str]) -> object:
    for key in loc:
        if isinstance(key, int):
            items = as_list(data)
            data = items[key] if 0 <= key < len(items) else None
        else:
            data = as_dict(data).get(key)
    return data


def _path(root: str, loc: list[int | str]) -> str:
    return root + "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in loc)


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class ToolSpec:
    """A tool as offered to the model.

    Attributes:
        name: The tool's name.
        description: What it does, for the model.
        input_schema: JSON Schema of its arguments (an object schema).
        strict: Ask the provider to enforce the schema exactly where supported (OpenAI).
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    _: KW_ONLY
    strict: bool = False


@dataclass(slots=True, frozen=True)
class SpecificTool:
    """Force the model to call this one tool.

    Attributes:
        name: The tool's name.
    """

    name: str


ToolChoice: TypeAlias = Literal["auto", "none", "required"] | SpecificTool
"""How the model may use tools: freely, not at all, at least one, or one given tool."""


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class ThinkingConfig:
    """Reasoning settings, mapped to each provider's own.

    Attributes:
        budget_tokens: Token budget for thinking (Anthropic `budget_tokens`, Gemini
            `thinkingBudget`).
        effort: Reasoning effort, from `"none"` (no reasoning where the model allows it) to
            `"max"`; each client sends the nearest level the model accepts (OpenAI
            `reasoning.effort`; Anthropic `output_config.effort` with adaptive thinking, or a
            thinking budget on models without effort; Gemini `thinkingLevel`, or a
            `thinkingBudget` on Gemini 2.x).
        include_thoughts: Ask for the thinking text or a summary of it to be streamed: `True`
            asks, `False` asks for none, `None` (the default) leaves each provider's usual
            choice. Gemini (`includeThoughts`) and Anthropic (`display`) show their thoughts
            unless it is `False`; OpenAI Responses asks for `reasoning.summary` only when it is
            `True`, because reasoning summaries need a verified OpenAI organization and the
            API refuses the whole request otherwise.
    """

    budget_tokens: int | None = None
    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None
    include_thoughts: bool | None = None


@dataclass(slots=True, frozen=True)
class OutputSchema:
    """The shape the model's final answer must have: structured output.

    Every client asks the provider to answer with JSON text of this schema (Chat
    `response_format`, Responses `text.format`, Anthropic `output_config.format`, Gemini
    `responseJsonSchema`).

    Attributes:
        schema: The JSON Schema of the answer. OpenAI and Anthropic take an object at the
            root; `Worker(output_type=...)` wraps other types in one for you.
        name: Its name, shown to the model (letters, digits, `_` and `-`).
        description: What the answer is, for the model (OpenAI sends it).
        strict: Ask for the schema to be enforced exactly. The clients then send its strict
            form (every object closed, every property required, an optional one nullable);
            a schema that form cannot express (free-form keys) is sent as it is, not strict.
    """

    schema: dict[str, Any]
    _: KW_ONLY
    name: str = "output"
    description: str | None = None
    strict: bool = True


@fieldwise
@dataclass(slots=True, eq=False, repr=False)
class Request:
    """A provider-neutral request.

    Attributes:
        messages: The conversation.
        system: The system prompt.
        tools: Tools the model may call.
        tool_choice: How it may use them (provider default when `None`).
        parallel_tool_calls: Whether the model may call several tools in one answer (`None`
            leaves the provider's default, which allows it).
        max_tokens: Output token limit (a provider default applies when `None`; Anthropic
            requires one, its client supplies a sensible default).
        temperature: Sampling temperature.
        stop_sequences: Strings that stop generation.
        thinking: Reasoning settings; `None` leaves the provider's default.
        options: Provider-specific fields merged into the request body last (deep-merged for
            objects), e.g. `{"top_k": 5}` or `{"metadata": {...}}`.
        output_schema: The schema the answer must follow (structured output), or `None` for
            free text.
        prompt_cache: The conversation's prompt-cache key, set by the Worker (unless
            `Worker(prompt_cache=False)`): the clients then ask for caching their own way —
            Anthropic `cache_control` breakpoints (one after the system prompt and tools, one
            at the conversation's end, never more than 4 with the request's own), OpenAI
            `prompt_cache_key` (Chat: to OpenAI's own host only); Gemini caches implicitly.
            `None`: no caching is asked for beyond the client's own settings.
    """

    messages: list[Message]
    _: KW_ONLY
    system: str | None = None
    tools: list[ToolSpec] = field(default_factory=lambda: [])
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    stop_sequences: list[str] = field(default_factory=lambda: [])
    thinking: ThinkingConfig | None = None
    options: dict[str, Any] = field(default_factory=lambda: {})
    output_schema: OutputSchema | None = None
    prompt_cache: str | None = None


# pydantic is imported on first use only: it would double the cost of `import llm_worker`.
@cache
def _message_adapter() -> TypeAdapter[Message]:
    from pydantic import TypeAdapter

    return TypeAdapter(Message)


@cache
def _messages_adapter() -> TypeAdapter[list[Message]]:
    from pydantic import TypeAdapter

    return TypeAdapter(list[Message])
