"""Anthropic Messages: the neutral `Request` as a `POST /v1/messages` body.

What the API demands, and how each demand is met here:

- roles alternate: parts are routed to the role the API wants them in (tool results in user
  messages, tool calls and thinking in assistant messages) and adjacent messages of one role
  are merged, so consecutive tool results always travel in one user message;
- in a user message the `tool_result` blocks come first, any text after them;
- thinking blocks go back with their `signature` (and `redacted_thinking` with its `data`)
  only when they were produced by this provider *and* this model: a signature from another
  model or provider is rejected with HTTP 400, so such thinking is dropped (not turned into
  text, which the model would read as something it said);
- a `ProviderPart` (a server-tool, MCP or compaction block kept from an answer) goes back
  verbatim, in place, only to this provider and model — a `pause_turn` answer must be sent
  back as it came for the server tool to go on; one from elsewhere is dropped;
- tool-use ids must match `^[a-zA-Z0-9_-]+$`: an id made elsewhere that does not is
  rewritten, the same way on the call and on its result;
- a text part's citations go back on its text block to the model that made them (a
  web-search citation points into that model's search results), with only the fields the
  request types take; a call made from code goes back with its `caller`, to the same model;
- the newest code-execution container of the history (a `ProviderPart` of type `container`,
  from any Anthropic model) is the request's `container`, unless it expired: a call made from
  code cannot be answered without it, and its files live there;
- `ToolSpec.strict` is the tool's `strict`; `Request.parallel_tool_calls=False` is
  `tool_choice.disable_parallel_tool_use` (on `auto` when no choice is set); a `tool_choice`
  from `options` without `type` gets `auto`;
- effort and thinking follow the model family (`_anthropic_thinking`);
- empty text blocks are rejected: they are dropped, and a message left empty is dropped;
- with thinking on, the assistant turn that a pending tool loop continues must start with a
  thinking block; when the history has none there (it was dropped, or the turn ran without
  thinking), thinking is left off for this request, as the API's own error message advises;
- `max_tokens` is required: `DEFAULT_MAX_TOKENS`, raised above the thinking budget;
- `temperature` (and `top_p` / `top_k` from `options`) follows what the API accepts now.
  This client sends `anthropic-version: 2023-06-01`, under which the older models take the
  sampling parameters and the models from Opus 4.7 and Claude 5 on (the adaptive-only
  families of `_anthropic_thinking`) refuse them with HTTP 400 ("`temperature` is deprecated
  for this model"); API version 2026-10-21, which the official SDKs send from their 2.x
  majors on, refuses them for every model, and those SDKs' request types (anthropic 2.12
  here) no longer declare them. So `temperature` is sent to the older models and to a name
  this module cannot read (a proxy's alias), and never to the newer ones: there `1` (the
  default) is left out, and any other value — or a `top_p` / `top_k` — raises
  `ConfigurationError` before the round trip.

Requests the API is known to reject with thinking on (`enabled` or `adaptive`, as finally sent,
`options` included) raise `ConfigurationError` before any round trip, naming the field and the
fix (extended thinking docs, "Feature compatibility" and budget rules):

- `temperature` other than 1, any `top_k`, `top_p` below 0.95;
- a `tool_choice` that forces tool use (`any`, or a named `tool`): only `auto` and `none` go;
- `budget_tokens` below 1024, or not below `max_tokens` — unless interleaved thinking is on
  (`interleaved-thinking-*` beta), where the budget covers the whole turn and may exceed it.

When thinking is left off (see above), none of these apply.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal, TypeAlias

from llm_worker._json import as_dict, as_int, as_str
from llm_worker.errors import ConfigurationError
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
    ThinkingPart,
    ToolChoice,
    ToolResultPart,
    ToolSpec,
    ToolUsePart,
)
from llm_worker.providers._anthropic_cache import mark_conversation
from llm_worker.providers._anthropic_media import media_block, result_content
from llm_worker.providers._anthropic_thinking import (
    DEFAULT_THINKING_BUDGET,
    ThinkingPlan,
    check_no_sampling,
    takes_sampling,
    thinking_plan,
)
from llm_worker.providers._base import checked_tool_choice, deep_merge, unsupported_part
from llm_worker.providers._media import ANTHROPIC, MediaTotal
from llm_worker.providers._output import sent_schema

__all__ = (
    "CONTAINER",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_THINKING_BUDGET",
    "CacheBreakpoint",
    "PromptCache",
    "beta_headers",
    "build_body",
    "build_messages",
    "cache_settings",
    "interleaved_thinking",
)

PROVIDER: Final = "anthropic"

DEFAULT_MAX_TOKENS: Final = 8192
"""`max_tokens` when the request sets none (the API requires one)."""

CONTAINER: Final = "container"
"""The `type` of the `ProviderPart` that keeps an answer's code-execution container (the
`message_delta` container object): not a content block; its id is the next request's
`container`."""

CacheBreakpoint: TypeAlias = Literal["system", "tools", "messages"]
"""Where a prompt-cache breakpoint goes: the system prompt, the last tool, the last block of
the last message."""

_UNCACHEABLE: Final = frozenset({"thinking", "redacted_thinking"})

MIN_THINKING_BUDGET: Final = 1024
"""The smallest `budget_tokens` the API accepts."""

_MIN_TOP_P_THINKING: Final = 0.95
_FORCED_TOOL_CHOICE: Final = frozenset({"any", "tool"})
_INTERLEAVED_BETA: Final = "interleaved-thinking-"

_VALID_ID: Final = re.compile(r"[a-zA-Z0-9_-]+")
_INVALID_ID_CHARS: Final = re.compile(r"[^a-zA-Z0-9_-]")

Block: TypeAlias = dict[str, Any]
_EPHEMERAL: Final[Block] = {"type": "ephemeral"}


@dataclass(slots=True, frozen=True)
class PromptCache:
    """Explicit prompt-cache breakpoints (`cache_control` markers) to put in every request.

    Attributes:
        breakpoints: Where to put them.
        ttl: The cache lifetime (`"5m"` or `"1h"`); the API's default (5 minutes) when `None`.
    """

    breakpoints: frozenset[CacheBreakpoint] = frozenset()
    ttl: Literal["5m", "1h"] | None = None

    def marker(self) -> Block:
        """The `cache_control` object."""
        return {"type": "ephemeral", "ttl": self.ttl} if self.ttl else {"type": "ephemeral"}


def build_body(
    request: Request,
    *,
    model: str,
    cache: PromptCache | None = None,
    interleaved: bool = False,
) -> Block:
    """The `/v1/messages` body for a neutral request.

    `request.options` is deep-merged last, so any field of the API can be set or overridden
    there (`{"top_k": 5}`, `{"metadata": {"user_id": ...}}`, `{"cache_control": {...}}` for
    automatic prompt caching, `{"thinking": {"type": "adaptive"}}`).

    Args:
        request: The neutral request.
        model: The model name.
        cache: Prompt-cache breakpoints to mark.
        interleaved: Interleaved thinking is on (the thinking budget may exceed `max_tokens`).

    Raises:
        ConfigurationError: The body breaks a rule the API enforces with thinking on
            (see the module docstring).
    """
    with MediaTotal(ANTHROPIC):  # the parts' total, after each part's own check
        messages = build_messages(request.messages, model=model)
    plan = thinking_plan(request.thinking, model) if request.thinking is not None else None
    body: Block = {
        "model": model,
        "max_tokens": _max_tokens(request, plan),
        "messages": messages,
        "stream": True,
    }
    if request.system:
        body["system"] = request.system
    if request.tools:
        body["tools"] = [_tool(spec) for spec in request.tools]
    _add_tool_choice(body, request)
    sampling = takes_sampling(model)
    if request.temperature is not None and (sampling or request.temperature != 1):
        body["temperature"] = request.temperature  # refused below for a newer model
    if request.stop_sequences:
        body["stop_sequences"] = list(request.stop_sequences)
    container = _container(request.messages)
    if container is not None:
        body["container"] = container
    if plan is not None:
        _add_thinking(body, plan, pending_loop_ok=_turn_starts_thinking(messages))
    if request.output_schema is not None:
        add_output_format(body, request.output_schema)
    if cache is not None and cache.breakpoints:
        _mark_cache(body, cache)
    body = deep_merge(body, request.options)
    if request.prompt_cache is not None:  # after the options: their breakpoints count
        mark_conversation(body, cache.marker() if cache is not None else _EPHEMERAL)
    _complete_tool_choice(body)
    if not sampling:
        check_no_sampling(body, model)
    _check_thinking(body, interleaved=interleaved)
    return body


def _add_tool_choice(body: Block, request: Request) -> None:
    # The API refuses a tool_choice without tools (server tools may come through options).
    if not (request.tools or "tools" in request.options):
        return
    serial = request.parallel_tool_calls is False
    if request.tool_choice is None and not serial:
        return
    choice = _tool_choice(request.tool_choice or "auto")
    if serial and choice["type"] != "none":  # `none` takes no other field
        choice["disable_parallel_tool_use"] = True
    body["tool_choice"] = choice


def _complete_tool_choice(body: Block) -> None:
    # `options={"tool_choice": {"disable_parallel_tool_use": True}}` alone would send a
    # tool_choice without the `type` the API requires: it is the default choice, `auto`.
    choice = as_dict(body.get("tool_choice"))
    if "tool_choice" in body and "type" not in choice:
        body["tool_choice"] = {"type": "auto", **choice}


def _check_thinking(body: Block, *, interleaved: bool = False) -> None:
    """Refuse a body the API rejects because thinking is on (see the module docstring).

    Raises:
        ConfigurationError: Naming the field and what to do instead.
    """
    thinking = as_dict(body.get("thinking"))
    kind = as_str(thinking.get("type"))
    if kind not in ("enabled", "adaptive"):
        return
    _check_sampling(body)
    _check_forced_tool(as_dict(body.get("tool_choice")))
    if kind == "enabled":
        _check_budget(thinking, as_int(body.get("max_tokens")), interleaved=interleaved)


_THINKING_OFF: Final = "or turn thinking off (thinking=None)"


def _check_sampling(body: Block) -> None:
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        raise ConfigurationError(
            f"temperature={temperature} is not allowed by Anthropic with thinking on: "
            f"leave temperature unset (or 1), {_THINKING_OFF}"
        )
    if body.get("top_k") is not None:
        raise ConfigurationError(
            f"top_k is not allowed by Anthropic with thinking on: remove it from options, "
            f"{_THINKING_OFF}"
        )
    top_p = body.get("top_p")
    if top_p is not None and top_p < _MIN_TOP_P_THINKING:
        raise ConfigurationError(
            f"top_p={top_p} is not allowed by Anthropic with thinking on (only 0.95 to 1): "
            f"raise or remove it, {_THINKING_OFF}"
        )


def _check_forced_tool(tool_choice: Block) -> None:
    kind = as_str(tool_choice.get("type"))
    if kind not in _FORCED_TOOL_CHOICE:
        return
    forced = f"tool {tool_choice.get('name')!r}" if kind == "tool" else "'required' (any)"
    raise ConfigurationError(
        f"tool_choice {forced} forces tool use, which Anthropic does not allow with thinking "
        f"on: use tool_choice 'auto' or 'none', {_THINKING_OFF}"
    )


def _check_budget(thinking: Block, max_tokens: int | None, *, interleaved: bool) -> None:
    budget = as_int(thinking.get("budget_tokens"))
    if budget is None:
        return  # the API's own message about a missing budget is clear enough
    if budget < MIN_THINKING_BUDGET:
        raise ConfigurationError(
            f"thinking budget_tokens={budget} is below the minimum of {MIN_THINKING_BUDGET}: "
            f"set ThinkingConfig.budget_tokens to {MIN_THINKING_BUDGET} or more"
        )
    if not interleaved and max_tokens is not None and budget >= max_tokens:
        raise ConfigurationError(
            f"thinking budget_tokens={budget} must be below max_tokens={max_tokens}: raise "
            "max_tokens (or leave it unset: it is then set above the budget) or lower the budget"
        )


def interleaved_thinking(headers: Mapping[str, str]) -> bool:
    """Whether the `anthropic-beta` header in `headers` switches interleaved thinking on."""
    betas = next((v for k, v in headers.items() if k.lower() == "anthropic-beta"), "")
    return any(beta.strip().startswith(_INTERLEAVED_BETA) for beta in betas.split(","))


def build_messages(messages: list[Message], *, model: str) -> list[Block]:
    """The `messages` array: parts routed to their role, same-role neighbours merged."""
    out: list[Block] = []
    for message in messages:
        for part in message.content:
            if isinstance(part, ImagePart | DocumentPart):
                block = media_block(part, message.role)
            else:
                block = _block(part, model)
            if block is None:
                continue
            role = _role(part, message.role)
            if out and out[-1]["role"] == role:
                out[-1]["content"].append(block)
            else:
                out.append({"role": role, "content": [block]})
    for wire in out:
        if wire["role"] == "user":
            wire["content"] = _results_first(wire["content"])
    return out


def _role(part: Part, role: str) -> str:
    if isinstance(part, ToolResultPart):
        return "user"
    if isinstance(part, ToolUsePart | ThinkingPart):
        return "assistant"
    return role


def _block(part: Part, model: str) -> Block | None:
    if isinstance(part, TextPart):
        return _text_block(part, model)
    if isinstance(part, ThinkingPart):
        return _thinking_block(part, model)
    if isinstance(part, ToolUsePart):
        return _tool_use_block(part, model)
    if isinstance(part, ProviderPart):
        return _provider_block(part, model)
    if not isinstance(part, ToolResultPart):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise unsupported_part(part)
    block: Block = {"type": "tool_result", "tool_use_id": _call_id(part.tool_use_id)}
    if part.content or part.media:
        block["content"] = result_content(part)
    if part.is_error:
        block["is_error"] = True
    return block


def _call_id(call_id: str) -> str:
    """`call_id` if Anthropic accepts it, else a valid id derived from it.

    The API wants `^[a-zA-Z0-9_-]+$` (HTTP 400 otherwise); ids made elsewhere may hold other
    characters (Kimi K2: `functions.get:0`). The same id always gives the same result, so a
    call and its result still match; a hash of the original keeps two such ids apart.
    """
    if _VALID_ID.fullmatch(call_id):
        return call_id
    import hashlib  # here, for the rare foreign id: it loads OpenSSL, not needed at a build

    digest = hashlib.sha256(call_id.encode()).hexdigest()[:12]
    return f"{_INVALID_ID_CHARS.sub('_', call_id)}_{digest}"


def _thinking_block(part: ThinkingPart, model: str) -> Block | None:
    origin = part.origin
    if origin is None or origin.provider != PROVIDER or origin.model != model:
        return None
    if part.redacted is not None:
        return {"type": "redacted_thinking", "data": part.redacted}
    if part.signature is None:
        return None  # unsigned thinking (an interrupted block) is rejected by the API
    return {"type": "thinking", "thinking": part.text, "signature": part.signature}


def _provider_block(part: ProviderPart, model: str) -> Block | None:
    origin = part.origin
    if origin is None or origin.provider != PROVIDER or origin.model != model:
        return None
    if part.data.get("type") == CONTAINER:
        return None  # not content: it becomes the request's `container` (`_container`)
    # A copy: a prompt-cache marker added to the body must not reach the history.
    return dict(part.data)


def _text_block(part: TextPart, model: str) -> Block | None:
    # Gemini's text `signature` means nothing here; citations go back only to the model
    # that made them (a web-search citation points into that model's search results).
    if not part.text:
        return None
    block: Block = {"type": "text", "text": part.text}
    own = Origin(PROVIDER, model)
    citations = [_citation(c) for c in part.citations if c.origin == own]
    if citations:
        block["citations"] = citations
    return block


# The fields of each citation kind the API takes back (its request types); a response's
# citation may hold more (`file_id`), which the API would refuse. Titles may be null.
_CITATION_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "char_location": ("document_index", "start_char_index", "end_char_index"),
    "page_location": ("document_index", "start_page_number", "end_page_number"),
    "content_block_location": ("document_index", "start_block_index", "end_block_index"),
    "web_search_result_location": ("url", "encrypted_index"),
    "search_result_location": (
        "source",
        "search_result_index",
        "start_block_index",
        "end_block_index",
    ),
}


def _citation(citation: Citation) -> Block:
    data = citation.data
    kind = as_str(data.get("type"))
    fields = _CITATION_FIELDS.get(kind or "")
    if fields is None:
        return dict(data)  # a kind this library does not know: as it came
    title = "title" if "document_index" not in fields else "document_title"
    block: Block = {"type": kind, "cited_text": data.get("cited_text"), title: data.get(title)}
    block.update((key, data.get(key)) for key in fields)
    return block


def _tool_use_block(part: ToolUsePart, model: str) -> Block:
    block: Block = {"type": "tool_use", "id": _call_id(part.id), "name": part.name}
    block["input"] = part.input
    # A call made from code names the code-execution call that made it; only the model
    # that made both has that call in its history.
    if part.caller is not None and part.origin == Origin(PROVIDER, model):
        block["caller"] = dict(part.caller)
    return block


def _container(messages: list[Message], now: datetime | None = None) -> str | None:
    """The id of the newest code-execution container in the history, unless it expired.

    The container keeps the files code execution made; a follow-up of a call made from code
    is refused without it (`container_id is required`). The container belongs to the
    account, not the model: any Anthropic answer's container goes.
    """
    for message in reversed(messages):
        for part in reversed(message.content):
            if (
                isinstance(part, ProviderPart)
                and part.data.get("type") == CONTAINER
                and part.origin is not None
                and part.origin.provider == PROVIDER
            ):
                return _live(part.data, now or datetime.now(UTC))
    return None


def _live(container: dict[str, Any], now: datetime) -> str | None:
    # An expired container is refused; without one the API starts a new container.
    container_id = as_str(container.get("id"))
    try:
        expires = datetime.fromisoformat(as_str(container.get("expires_at")) or "")
    except ValueError:
        return container_id  # no readable expiry: the API judges
    if expires.tzinfo is None:
        expires = expires.replace(tzinfo=UTC)
    return container_id if expires > now else None


def _results_first(content: list[Block]) -> list[Block]:
    # The API wants the tool results of a user message before any other block.
    results = [b for b in content if b["type"] == "tool_result"]
    if not results or len(results) == len(content):
        return content
    return results + [b for b in content if b["type"] != "tool_result"]


def _max_tokens(request: Request, plan: ThinkingPlan | None) -> int:
    if request.max_tokens is not None:
        return request.max_tokens
    budget = plan.budget if plan is not None else None
    if budget is not None and budget >= DEFAULT_MAX_TOKENS:
        return budget + DEFAULT_MAX_TOKENS
    return DEFAULT_MAX_TOKENS


def _tool(spec: ToolSpec) -> Block:
    tool: Block = {
        "name": spec.name,
        "description": spec.description,
        "input_schema": spec.input_schema,
    }
    if spec.strict:
        tool["strict"] = True  # inputs are then sampled to fit the schema
    return tool


def _tool_choice(choice: ToolChoice) -> Block:
    choice = checked_tool_choice(choice)
    if isinstance(choice, SpecificTool):
        return {"type": "tool", "name": choice.name}
    if choice == "required":
        return {"type": "any"}
    return {"type": choice}


def _add_thinking(body: Block, plan: ThinkingPlan, *, pending_loop_ok: bool) -> None:
    """`thinking` and `output_config.effort` as planned for the model.

    See `_anthropic_thinking`; thinking is left off when the pending tool loop forbids it
    (`_turn_starts_thinking`).
    """
    if plan.effort is not None:
        body["output_config"] = {"effort": plan.effort}
    if pending_loop_ok and plan.thinking is not None:
        body["thinking"] = dict(plan.thinking)


def add_output_format(body: Block, output: OutputSchema) -> None:
    """Structured output as `output_config.format`, beside the `effort` that may be there."""
    schema = sent_schema(output).schema
    body.setdefault("output_config", {})["format"] = {"type": "json_schema", "schema": schema}


def _turn_starts_thinking(messages: list[Block]) -> bool:
    """Whether thinking may be switched on for this history.

    When the last message carries tool results, a tool loop is pending: the API then wants
    the first assistant message after the last user prompt (a user message without tool
    results) to start with thinking.
    """
    if not messages or messages[-1]["role"] != "user" or not _has_results(messages[-1]):
        return True
    first_assistant: Block | None = None
    for wire in reversed(messages):
        if wire["role"] == "assistant":
            first_assistant = wire
        elif not _has_results(wire):
            break
    if first_assistant is None:
        return True
    return first_assistant["content"][0]["type"] in _UNCACHEABLE


def _has_results(message: Block) -> bool:
    return any(b["type"] == "tool_result" for b in message["content"])


def _mark_cache(body: Block, cache: PromptCache) -> None:
    if "system" in cache.breakpoints and "system" in body:
        body["system"] = [{"type": "text", "text": body["system"], "cache_control": cache.marker()}]
    if "tools" in cache.breakpoints and body.get("tools"):
        body["tools"][-1]["cache_control"] = cache.marker()
    if "messages" in cache.breakpoints and body["messages"]:
        for block in reversed(body["messages"][-1]["content"]):
            # Thinking blocks cannot carry a breakpoint; the one before them can.
            if block["type"] not in _UNCACHEABLE:
                block["cache_control"] = cache.marker()
                break


def cache_settings(
    breakpoints: Collection[CacheBreakpoint], ttl: Literal["5m", "1h"] | None
) -> PromptCache | None:
    """A `PromptCache`, or `None` when no breakpoint is asked for."""
    if not breakpoints:
        return None
    unknown = set(breakpoints) - {"system", "tools", "messages"}
    if unknown:
        raise ConfigurationError(
            f"unknown prompt-cache breakpoint(s) {sorted(unknown)}: "
            "use 'system', 'tools' or 'messages'"
        )
    return PromptCache(frozenset(breakpoints), ttl)


def beta_headers(betas: Collection[str], headers: Mapping[str, str] | None) -> dict[str, str]:
    """The version header, the `anthropic-beta` header for `betas`, then the caller's headers."""
    out = {"anthropic-version": "2023-06-01"}
    if betas:
        out["anthropic-beta"] = ",".join(betas)
    out.update(headers or {})
    return out
