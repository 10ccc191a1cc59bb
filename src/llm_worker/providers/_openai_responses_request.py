"""The OpenAI Responses request body, built from a neutral `Request`.

Mapping:

- `system` → `instructions`; user text → `input_text` parts of a user message; tool results →
  `function_call_output` items (Responses has no error flag: the text says what failed);
- assistant text with its message's item id (`msg_…`, this model's) → `output_text` parts of
  an output `message` item (`id`, `status`), with the message's `phase` (`commentary` /
  `final_answer`, which OpenAI asks to have sent back) and the text's annotations (its
  citations made by this provider, indexes as the part counts them; only the four kinds the
  API takes back, with their fields, since it refuses any other). Assistant text without an
  id (another provider's, or one whose reasoning item is dropped) → an input message
  `{"type": "message", "role": "assistant", "content": "<text>"}` (the SDK's
  `EasyInputMessageParam`, with the phase where it has one): the output message's request
  type requires an `id` and a `status`, and an input message's content parts take no
  annotations, so those are not sent;
- tool calls → `function_call` items (`call_id` is `ToolUsePart.id`, `arguments` its JSON
  text), with their `namespace` (any Responses model's) and `caller` (this model's: a call
  made by a `program` item names it), read from `ToolUsePart.caller`;
- tools → function tools, `tool_choice` and `parallel_tool_calls` only with tools; `strict` is
  always sent, because Responses makes a function tool strict when the field is absent and
  would then reject any schema not written for strict mode;
- `thinking` → `reasoning`: `effort` (`max` as `xhigh`, the most OpenAI takes), and
  `summary: "auto"` only when `include_thoughts` is `True` — OpenAI answers HTTP 400 to a
  summary request from an organization it has not verified (the client raises that as a
  `ConfigurationError` saying what to do); `budget_tokens` has no Responses equivalent and is
  not sent (use `effort`);
- `max_tokens` → `max_output_tokens`; `temperature` as is; `stream: true`;
- `stop_sequences`: Responses has no stop sequences, so a request with some raises
  `ConfigurationError` rather than being answered without them;
- `options` are deep-merged last (`deep_merge`: lists are joined, so an `include` adds to the
  one this builder adds): `store`, `include`, `text`, `service_tier`, `truncation`,
  `metadata`, `top_logprobs`, ….

A stored conversation: with `previous_response_id` (or `conversation`) in the options, OpenAI
already holds every item up to that response and answers "Duplicate item found" to any of them
sent again, so `input` holds only the messages after the last assistant message (the tool
results and new user text that answer it). The id is the `StatusEvent.response_id` of the
answer that is the last assistant message of `messages`; pass the whole history as usual.

Replaying reasoning (what the recordings and the API's pairing rules decide):

- A reasoning item goes back only when its parts come from this provider *and* model
  (`Origin("openai_responses", model)`), carry the item id, and can be resolved: with the
  default `store: true` the id alone is enough (OpenAI keeps the item; the recorded
  `reasoning_summary_run_step2` sends `id` + `summary` only); with `store: false` in the options
  nothing is kept server-side, so the item also needs its `encrypted_content` (the part's
  `signature`), which the stream carries only when `include: ["reasoning.encrypted_content"]`
  was asked for (`reasoning_encrypted_then_function_call`). This builder adds that `include`
  when `store` is false and `thinking` is set; it does not add it otherwise, because models
  without reasoning answer it with HTTP 400 ("Encrypted content is not supported with this
  model"). Summary parts of one item (one `ThinkingPart` each) are merged back into one item.
- OpenAI pairs a reasoning item with the item that followed it, by id: a reasoning item must be
  followed by its message (`msg_…`, `TextPart.item_id`) or function call (`fc_…`), and a
  message or call that names an id requires its reasoning item. So a reasoning item that cannot
  be sent (another model, no id, `store: false` without encrypted content, or not followed by an
  item with an id — e.g. a hosted web search sat between them) is dropped together with the ids
  of the items after it in that message, which then go as plain items; the history stays valid.
- Thinking from another provider or model is dropped, not turned into text: it is the model's
  private reasoning (or a summary of it), and replaying it as assistant text would make the
  model read it as something it said. Tool calls and text of any origin are sent, without ids.

Replaying hosted-tool items (`ProviderPart`s, kept whole from `response.output_item.done`):

- An item goes back verbatim, in place in its assistant message, only when its origin is this
  provider and model and its kind is one the API takes back as an input item and that needs
  nothing more: `web_search_call`, `file_search_call`, `code_interpreter_call`,
  `image_generation_call`, `mcp_list_tools`, `mcp_call`, `compaction` (the encrypted summary
  of a context compacted server-side, which stands for the items it replaced),
  `tool_search_call` / `tool_search_output` run by the server (`execution: "server"`), and
  programmatic tool calling's `program` (the code, with the `fingerprint` the API requires
  back) and `program_output`; the function calls a program made are ordinary calls, which
  the Worker answers, sent back with their `caller`.
- Kept out of the request: items a client must answer (`tool_search_call` with
  `execution: "client"`, `computer_call`, `local_shell_call`, `shell_call`, `apply_patch_call`,
  `custom_tool_call`, `mcp_approval_request`): the neutral model has no part for their output
  or approval, and a call sent back unanswered is rejected; and kinds unknown here, which may be
  of that sort. A reasoning item followed by an item kept out is dropped too (see the pairing
  rule above), and an item after a dropped reasoning item is kept out, since its id, which the
  API requires, names the missing reasoning item.
- A `ProviderPart` of another origin (an Anthropic server-tool block, a Gemini code-execution
  part, another model's item) or in a user message is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from llm_worker._wide_json import json_bytes
from llm_worker.errors import ConfigurationError, InvalidMessagesError
from llm_worker.messages import (
    Citation,
    DocumentPart,
    ImagePart,
    Message,
    Origin,
    OutputSchema,
    Part,
    ProviderPart,
    Request,
    SpecificTool,
    TextPart,
    ThinkingConfig,
    ThinkingPart,
    ToolChoice,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
)
from llm_worker.providers._base import checked_tool_choice, deep_merge, unsupported_part
from llm_worker.providers._media import OPENAI_RESPONSES, MediaTotal
from llm_worker.providers._openai_media import misplaced, responses_output, responses_part
from llm_worker.providers._output import sent_schema

__all__ = ("PROVIDER", "build_body")

PROVIDER: Final = "openai_responses"
"""The wire protocol's name, also the `Origin.provider` of the opaque data it produces."""

_ENCRYPTED: Final = "reasoning.encrypted_content"
# Hosted-tool items sent back as they came (see the module docstring).
_HOSTED: Final = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_list_tools",
        "mcp_call",
        "compaction",
        "program",  # programmatic tool calling: its fingerprint must be round-tripped
        "program_output",
    }
)
# Neutral efforts no OpenAI model takes, as the nearest one that exists.
_EFFORTS: Final[dict[str, str]] = {"max": "xhigh"}
_SERVER_RUN: Final = frozenset({"tool_search_call", "tool_search_output"})
# The annotation kinds an input `output_text` part takes, with their fields (all required).
_ANNOTATIONS: Final[dict[object, tuple[str, ...]]] = {
    "url_citation": ("url", "title", "start_index", "end_index"),
    "file_citation": ("file_id", "filename", "index"),
    "container_file_citation": (
        "container_id",
        "file_id",
        "filename",
        "start_index",
        "end_index",
    ),
    "file_path": ("file_id", "index"),
}


def build_body(request: Request, *, model: str) -> dict[str, Any]:
    """The Responses API body (`POST /responses`) for a neutral request.

    Raises:
        ConfigurationError: The request asks for something Responses cannot do (stop
            sequences).
        InvalidMessagesError: A part sits in a message of the wrong role.
    """
    if request.stop_sequences:
        raise ConfigurationError(
            "the OpenAI Responses API has no stop sequences; remove stop_sequences or use "
            "OpenAIChatClient (Chat Completions supports `stop`)"
        )
    store_false = request.options.get("store") is False
    origin = Origin(PROVIDER, model)
    messages = request.messages
    if request.options.get("previous_response_id") or request.options.get("conversation"):
        messages = _after_last_answer(messages)  # see the module docstring
    with MediaTotal(OPENAI_RESPONSES):  # the parts' total, after each part's own check
        items = input_items(messages, origin=origin, store_false=store_false)
    body: dict[str, Any] = {"model": model, "input": items, "stream": True}
    if request.system:
        body["instructions"] = request.system
    if request.tools:
        body["tools"] = [_tool(spec) for spec in request.tools]
    # Tool settings mean nothing without tools (hosted ones come by options).
    if request.tools or "tools" in request.options:
        if request.tool_choice is not None:
            body["tool_choice"] = _tool_choice(request.tool_choice)
        if request.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = request.parallel_tool_calls
    if request.max_tokens is not None:
        body["max_output_tokens"] = request.max_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    reasoning = _reasoning(request.thinking)
    if reasoning:
        body["reasoning"] = reasoning
    if store_false and request.thinking is not None:
        body["include"] = [_ENCRYPTED]
    _add_text_format(body, request.output_schema)
    _add_cache_key(body, request.prompt_cache)
    return deep_merge(body, request.options)


def _add_cache_key(body: dict[str, Any], key: str | None) -> None:
    if key is not None:  # routes a conversation's requests to the machine holding its cache
        body["prompt_cache_key"] = key


def _add_text_format(body: dict[str, Any], output: OutputSchema | None) -> None:
    if output is not None:
        body["text"] = {"format": text_format(output)}


def text_format(output: OutputSchema) -> dict[str, Any]:
    """Structured output as the Responses `text.format` (`json_schema`)."""
    sent = sent_schema(output)
    spec: dict[str, Any] = {"type": "json_schema", "name": sent.name, "schema": sent.schema}
    spec["strict"] = sent.strict
    if sent.description:
        spec["description"] = sent.description
    return spec


def _after_last_answer(messages: Sequence[Message]) -> Sequence[Message]:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "assistant":
            return messages[i + 1 :]
    return messages


def input_items(
    messages: Sequence[Message], *, origin: Origin, store_false: bool = False
) -> list[dict[str, Any]]:
    """The `input` items of a conversation.

    Args:
        messages: The conversation.
        origin: This client's provider and model: opaque data of any other origin is dropped.
        store_false: The request sets `store: false` (reasoning needs its encrypted content).
    """
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "user":
            items.extend(_user_items(message.content))
        else:
            items.extend(_AssistantItems(origin, store_false).build(message.content))
    return items


def _user_items(parts: Sequence[Part]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            texts.append({"type": "input_text", "text": part.text})
            continue
        if isinstance(part, ImagePart | DocumentPart):
            texts.append(responses_part(part))
            continue
        if isinstance(part, ProviderPart):
            continue  # output items belong to assistant messages: see the module docstring
        # Parts are typed, but a history built at run time may hold anything (an image).
        if not isinstance(part, ThinkingPart | ToolUsePart | ToolResultPart):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise unsupported_part(part)
        if not isinstance(part, ToolResultPart):
            raise InvalidMessagesError(
                f"a user message cannot hold a {part.type} part; it belongs to the assistant"
            )
        if texts:
            items.append(_message("user", texts))
            texts = []
        items.append(
            {
                "type": "function_call_output",
                "call_id": part.tool_use_id,
                "output": responses_output(part),
            }
        )
    if texts:
        items.append(_message("user", texts))
    return items


def _message(role: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": content}


class _AssistantItems:
    """The items of one assistant message, keeping OpenAI's reasoning pairing rules."""

    __slots__ = ("_items", "_keep_ids", "_message", "_origin", "_store_false")

    def __init__(self, origin: Origin, store_false: bool) -> None:
        self._origin = origin
        self._store_false = store_false
        self._items: list[dict[str, Any]] = []
        self._message: dict[str, Any] | None = None
        # Ids may go out until a reasoning item is dropped: the items after a dropped one
        # "require" it, so they go without ids.
        self._keep_ids = True

    def build(self, parts: Sequence[Part]) -> list[dict[str, Any]]:
        i = 0
        while i < len(parts):
            part = parts[i]
            if isinstance(part, ThinkingPart):
                group = _thinking_group(part, parts[i + 1 :])
                i += len(group)
                self._reasoning(group, parts[i] if i < len(parts) else None)
                continue
            if isinstance(part, TextPart):
                self._text(part)
            elif isinstance(part, ToolUsePart):
                self._call(part)
            elif isinstance(part, ProviderPart):
                self._provider(part)
            elif isinstance(part, ImagePart | DocumentPart):
                raise misplaced(part)
            elif not isinstance(part, ToolResultPart):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise unsupported_part(part)
            else:
                raise InvalidMessagesError(
                    "an assistant message cannot hold a tool result; results go in the next "
                    "user message"
                )
            i += 1
        return self._items

    def _own_id(self, part: TextPart | ToolUsePart) -> str | None:
        if self._keep_ids and part.origin == self._origin:
            return part.item_id
        return None

    def _reasoning(self, group: list[ThinkingPart], follower: Part | None) -> None:
        self._message = None
        if not self._replayable(group, follower):
            self._keep_ids = False
            return
        self._keep_ids = True
        item: dict[str, Any] = {
            "type": "reasoning",
            "id": group[0].item_id,
            "summary": [{"type": "summary_text", "text": p.text} for p in group if p.text],
        }
        signature = "".join(p.signature for p in group if p.signature)
        if signature:
            item["encrypted_content"] = signature
        self._items.append(item)

    def _replayable(self, group: list[ThinkingPart], follower: Part | None) -> bool:
        first = group[0]
        if first.origin != self._origin or not first.item_id:
            return False
        if self._store_false and not any(p.signature for p in group):
            return False
        # The item that followed it must go out with its id, or OpenAI rejects the pair.
        if isinstance(follower, ProviderPart):
            return self._sendable(follower) and "id" in follower.data
        return (
            isinstance(follower, TextPart | ToolUsePart)
            and follower.origin == self._origin
            and follower.item_id is not None
        )

    def _sendable(self, part: ProviderPart) -> bool:
        if part.origin != self._origin:
            return False
        kind = part.data.get("type")
        if kind in _SERVER_RUN:
            return part.data.get("execution") == "server"
        return kind in _HOSTED

    def _provider(self, part: ProviderPart) -> None:
        self._message = None
        # After a dropped reasoning item, the item's id would name it: kept out too.
        if self._keep_ids and self._sendable(part):
            self._items.append(dict(part.data))  # a copy: the body shares nothing with history

    def _text(self, part: TextPart) -> None:
        item_id = self._own_id(part)
        if not part.text and item_id is None:
            return
        phase = part.phase if _ours(part.origin) else None
        if item_id is None:
            self._easy_text(part.text, phase)
            return
        cited = (_annotation(c) for c in part.citations if _ours(c.origin))
        annotations = [a for a in cited if a is not None]
        content = {"type": "output_text", "text": part.text, "annotations": annotations}
        current = self._message
        if current is not None and current.get("id") == item_id and current.get("phase") == phase:
            current["content"].append(content)
            return
        # An output message sent back by id also needs its status.
        message = _message("assistant", [content])
        message["id"] = item_id
        message["status"] = "completed"
        if phase is not None:
            message["phase"] = phase
        self._items.append(message)
        self._message = message

    def _easy_text(self, text: str, phase: str | None) -> None:
        # Text without an item id: an input message whose content is the text (see the
        # module docstring); consecutive texts of one phase join into one.
        current = self._message
        if current is not None and "id" not in current and current.get("phase") == phase:
            current["content"] += text
            return
        message: dict[str, Any] = {"type": "message", "role": "assistant", "content": text}
        if phase is not None:
            message["phase"] = phase
        self._items.append(message)
        self._message = message

    def _call(self, part: ToolUsePart) -> None:
        self._message = None
        item: dict[str, Any] = {
            "type": "function_call",
            "call_id": part.id,
            "name": part.name,
            "arguments": json_bytes(part.input).decode(),
        }
        item_id = self._own_id(part)
        if item_id is not None:
            item["id"] = item_id
        self._call_context(part, item)
        self._items.append(item)

    def _call_context(self, part: ToolUsePart, item: dict[str, Any]) -> None:
        # `ToolUsePart.caller` holds the item's `caller` fields and its `namespace`.
        if part.caller is None or not _ours(part.origin):
            return
        context = dict(part.caller)
        namespace = context.pop("namespace", None)
        if isinstance(namespace, str) and namespace:
            item["namespace"] = namespace  # the function's place among the tools: any model's
        if context.get("type") and part.origin == self._origin:
            item["caller"] = context  # a program item's call: this model's


def _ours(origin: Origin | None) -> bool:
    """Whether data was made by this API (any model: annotations and phases are not opaque)."""
    return origin is not None and origin.provider == PROVIDER


def _annotation(citation: Citation) -> dict[str, Any] | None:
    """The annotation at the citation's place in the part's text, as the API takes it back.

    Only the kinds an input `output_text` takes, with only their fields: the API refuses the
    whole request for an annotation of another kind, or with a field missing, mistyped or
    unknown (one streamed by a newer API version, say). `None`: not sendable.
    """
    fields = _ANNOTATIONS.get(citation.data.get("type"))
    if fields is None:
        return None
    # A new dict: the body shares nothing with the history.
    annotation: dict[str, Any] = {"type": citation.data["type"]}
    start, end = citation.start_index, citation.end_index
    place = {"index": start, "start_index": start, "end_index": end}
    for name in fields:
        value = place[name] if name in place else citation.data.get(name)
        if value is None or value.__class__ is not (int if name in place else str):
            return None
        annotation[name] = value
    return annotation


def _thinking_group(first: ThinkingPart, rest: Sequence[Part]) -> list[ThinkingPart]:
    """`first` and the parts after it of the same reasoning item (one part per summary)."""
    group = [first]
    for part in rest:
        if not isinstance(part, ThinkingPart) or part.item_id is None:
            break
        if part.item_id != first.item_id or part.origin != first.origin:
            break
        group.append(part)
    return group


def _tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "name": spec.name,
        "description": spec.description,
        "parameters": spec.input_schema,
        "strict": spec.strict,
    }


def _tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    choice = checked_tool_choice(choice)
    if isinstance(choice, SpecificTool):
        return {"type": "function", "name": choice.name}
    return choice


def _reasoning(thinking: ThinkingConfig | None) -> dict[str, Any]:
    if thinking is None:
        return {}
    reasoning: dict[str, Any] = {}
    if thinking.effort is not None:
        effort: str = thinking.effort
        reasoning["effort"] = _EFFORTS.get(effort, effort)
    if thinking.include_thoughts is True:  # asked for: see the module docstring
        reasoning["summary"] = "auto"
    return reasoning
