"""Token counts of a request: what a provider counted, or an estimate calibrated on usage.

`request_chars` measures what a request says (not how a wire spells it); a `TokenEstimator`
turns characters into tokens at a ratio it learns from the input tokens each earlier answer
reported. `TokenCount` is what every client's `count_tokens` returns and says where its
number came from. `ScriptedClient` and `ScriptedModelServer` count with `request_chars` too,
so an offline estimate and the scripted usage agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from llm_worker._media_tokens import media_tokens
from llm_worker._wide_json import json_bytes
from llm_worker.messages import (
    DocumentPart,
    ImagePart,
    Message,
    Part,
    ProviderPart,
    Request,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)

__all__ = (
    "CountSource",
    "TokenCount",
    "TokenEstimator",
    "leaf_clients",
    "leaf_providers",
    "media_chars",
    "media_provider",
    "message_chars",
    "request_chars",
)

CountSource: TypeAlias = Literal["provider", "calibrated", "estimate"]
"""Where a count came from: the provider's counting endpoint, an estimate at the ratio the
client's earlier answers' usage showed, or an estimate at the default ratio (nothing observed)."""

DEFAULT_CHARS_PER_TOKEN = 4.0
# A window of observations: old ones stop counting, so a ratio follows the conversation's
# current mix (code, prose, JSON) rather than its start.
_WINDOW = 16
# Requests observed but not yet counted (the newest win): counting is deferred to an estimate.
_PENDING = 4


@dataclass(slots=True, frozen=True)
class TokenCount:
    """The input tokens a request would use.

    Attributes:
        input_tokens: The count (the system prompt, tools and messages together).
        source: `"provider"` (the provider's counting endpoint answered), `"calibrated"`
            (an estimate at the characters-per-token ratio of the usage earlier answers
            reported) or `"estimate"` (4 characters a token: nothing observed yet).
    """

    input_tokens: int
    source: CountSource

    @property
    def exact(self) -> bool:
        """Whether the provider counted (not an estimate)."""
        return self.source == "provider"


@dataclass(slots=True)
class TokenEstimator:
    """Estimates a request's tokens from its characters, calibrated on reported usage.

    Each observation pairs the characters of a request with the input tokens its answer
    reported; `estimate` divides characters by the ratio of the last observations' sums
    (4 characters a token before any). Bounded: only the last 16 observations count.
    `observe_request` is O(1): a request's characters are counted when an estimate needs
    them, so calibrating after every answer costs nothing until something is estimated.

    Images and PDFs count as the tokens their provider bills (`media_chars`), at 4
    characters a token: the ratio learned on requests with media is a mean of the text's
    own ratio and 4, so text is never estimated further off than at the default ratio
    (a ratio learned from their base64 size would have been tens of characters a token).
    """

    provider: str | None = None
    """The client's provider, whose figures count images and PDFs (None: the largest)."""
    _chars: list[int] = field(default_factory=lambda: [])
    _tokens: list[int] = field(default_factory=lambda: [])
    _pending: list[tuple[Request, int]] = field(default_factory=lambda: [])

    def observe(self, chars: int, input_tokens: int | None) -> None:
        """Record a request of `chars` characters that used `input_tokens` input tokens.

        Counts that say nothing (none reported, no characters) are ignored.
        """
        if input_tokens is None or input_tokens <= 0 or chars <= 0:
            return
        self._chars.append(chars)
        self._tokens.append(input_tokens)
        if len(self._chars) > _WINDOW:
            del self._chars[0], self._tokens[0]

    def observe_request(self, request: Request, input_tokens: int | None) -> None:
        """`observe` a request by its characters (`request_chars`, counted when needed)."""
        if input_tokens is None or input_tokens <= 0:
            return
        self._pending.append((request, input_tokens))
        if len(self._pending) > _PENDING:
            del self._pending[0]

    def _settle(self) -> None:
        pending = self._pending
        if pending:
            self._pending = []
            for request, tokens in pending:
                self.observe(request_chars(request, self.provider), tokens)

    @property
    def calibrated(self) -> bool:
        """Whether any usage was observed."""
        return bool(self._chars or self._pending)

    @property
    def chars_per_token(self) -> float:
        """The ratio estimates use: observed characters over observed tokens, else 4."""
        self._settle()
        tokens = sum(self._tokens)
        return sum(self._chars) / tokens if tokens else DEFAULT_CHARS_PER_TOKEN

    def tokens(self, chars: int) -> int:
        """The estimated tokens of `chars` characters (at least 1 for any characters)."""
        if chars <= 0:
            return 0
        return max(1, round(chars / self.chars_per_token))

    def estimate(self, request: Request) -> TokenCount:
        """The estimated input tokens of a request, saying whether the ratio was learned."""
        source: CountSource = "calibrated" if self.calibrated else "estimate"
        return TokenCount(self.tokens(request_chars(request, self.provider)), source)


def request_chars(request: Request, provider: str | None = None) -> int:
    """The characters of what a request says, the same whichever wire it goes over.

    Counted: the system prompt; each message's text, thinking, tool calls (name and
    arguments' JSON) and tool results (name and content); an image or a PDF as the tokens
    `provider` bills for it (`_media_tokens`: from its pixels or pages, not its bytes) at
    4 characters a token, a plain-text document as its text; the tools' names, descriptions
    and their schemas' property names and descriptions; the output schema's likewise. Ids,
    item ids, signatures and schema keywords, which each wire spells its own way, do not
    count. `provider`: the client's (`"anthropic"`, `"openai_chat"`, ...); None or another
    name takes the largest of the providers' figures for media.
    """
    chars = len(request.system or "")
    for message in request.messages:
        chars += message_chars(message, provider)
    for spec in request.tools:
        chars += len(spec.name) + len(spec.description) + schema_chars(spec.input_schema)
    if request.output_schema is not None:
        chars += schema_chars(request.output_schema.schema)
    return chars


def message_chars(message: Message, provider: str | None = None) -> int:
    """The characters one message adds to `request_chars`."""
    return sum(part_chars(part, provider) for part in message.content)


def part_chars(part: Part, provider: str | None = None) -> int:
    """The characters one part adds to `request_chars` (media: see `media_chars`)."""
    if isinstance(part, TextPart | ThinkingPart):
        return len(part.text)
    if isinstance(part, ToolUsePart):
        return len(part.name) + len(json_bytes(part.input))
    if isinstance(part, ToolResultPart):
        media = sum(media_chars(m, provider) for m in part.media) if part.media else 0
        return len(part.name or "") + len(part.content) + media
    if isinstance(part, ProviderPart):
        return 0  # opaque data of one provider's wire, spelled its own way
    return media_chars(part, provider)


def media_chars(part: ImagePart | DocumentPart, provider: str | None = None) -> int:
    """An image's or document's characters: its billed tokens at 4 characters a token.

    The tokens come from its pixels or pages (`_media_tokens.media_tokens`), never from its
    bytes: a 200 KB screenshot is ~1,600 tokens, not the ~67,000 of its base64 text. They
    are turned into characters at the default ratio, so a calibrated ratio learned on
    requests with media stays between the text's own ratio and 4 (see `TokenEstimator`).
    A plain-text document is its text (UTF-8 bytes: at least its characters).
    """
    if part.type == "document" and part.media_type == "text/plain" and part.data is not None:
        return len(part.data)
    return round(media_tokens(part, provider) * DEFAULT_CHARS_PER_TOKEN)


def schema_chars(schema: object) -> int:
    """The characters of a schema's property names and descriptions (iteratively: no depth)."""
    chars = 0
    stack: list[object] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)  # pyright: ignore[reportUnknownArgumentType]
            continue
        if not isinstance(node, dict):
            continue
        for key, value in node.items():  # pyright: ignore[reportUnknownVariableType]
            if key == "description" and isinstance(value, str):
                chars += len(value)
            elif key == "properties" and isinstance(value, dict):
                chars += sum(len(str(name)) for name in value)  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
                stack.extend(value.values())  # pyright: ignore[reportUnknownArgumentType]
            elif isinstance(value, dict | list):
                stack.append(value)  # pyright: ignore[reportUnknownArgumentType]
    return chars


def media_provider(client: object) -> str | None:
    """The provider whose media figures count a client's requests (None: the largest).

    A `FallbackClient` may send a request to any of its clients: one provider if they all
    share it, else None.
    """
    providers = leaf_providers(client)
    return providers[0] if len(providers) == 1 else None


def leaf_providers(client: object) -> tuple[str, ...]:
    """The providers a request to `client` may reach (`leaf_clients`'), each once, in order."""
    names = (getattr(one, "provider", None) for one in leaf_clients(client))
    return tuple(dict.fromkeys(name for name in names if isinstance(name, str)))


def leaf_clients(client: object) -> list[object]:
    """The clients a request to `client` may reach: a `FallbackClient`'s, nested ones too.

    (A nested fallback's own `provider` is its first client's: Gemini behind it was missed.)
    """
    out: list[object] = []
    stack: list[object] = [client]
    for _ in range(256):  # bounded: a client listing itself cannot loop forever
        if not stack:
            break
        one = stack.pop()
        inner: tuple[object, ...] | None = getattr(one, "clients", None)
        if inner:
            stack.extend(reversed(inner))
        else:
            out.append(one)
    return out
