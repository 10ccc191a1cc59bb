"""What each provider accepts as images and documents, checked before anything is sent.

Each client checks every `ImagePart` / `DocumentPart` of a request against its `MediaRules`
while building the body, and raises `MediaError` naming the provider, the type or size and
what it accepts — a refusal the API would give only after the upload, or never clearly.

The limits are the providers' documented ones (checked on the base64 form, which is what
travels and what the APIs measure):

- Anthropic (platform.claude.com/docs/en/build-with-claude/vision, "Before you upload"; and
  .../pdf-support, "PDF support"): JPEG, PNG, GIF and WebP images of at most 5 MB each
  (the API answers `image exceeds 5 MB maximum`); PDF and plain-text documents; 32 MB per
  request.
- OpenAI (platform.openai.com/docs/guides/images-vision, "Image input requirements"; and
  .../pdf-files): PNG, JPEG, WebP and non-animated GIF images, 50 MB of payload per request;
  PDF files as `file_data`, up to the same 50 MB.
- Gemini (ai.google.dev/gemini-api/docs/image-understanding and .../document-processing,
  "Inline data"): PNG, JPEG, WebP, HEIC and HEIF images, PDF and plain-text documents;
  inline data counts against the 20 MB request size limit.
"""

from __future__ import annotations

import base64
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from llm_worker._sniff import check_content, shown_url
from llm_worker.errors import MediaError
from llm_worker.messages import DocumentPart, ImagePart, MediaPart, Message, ToolResultPart

if TYPE_CHECKING:
    from collections.abc import Iterable
    from types import TracebackType

__all__ = (
    "ANTHROPIC",
    "GEMINI",
    "OPENAI_CHAT",
    "OPENAI_RESPONSES",
    "MediaRules",
    "MediaTotal",
    "b64",
    "check",
    "check_total",
    "data_url",
    "document_text",
    "inline_size",
    "media_size",
    "rules_for",
    "sendable",
)

_MB: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class MediaRules:
    """The images and documents one provider accepts.

    Attributes:
        provider: The provider's name as a person reads it.
        images: Image media types it accepts.
        documents: Document media types it accepts as files (inline bytes).
        max_image_bytes: The largest image it accepts (base64 size).
        max_document_bytes: The largest document it accepts (base64 size).
        url_documents: Document media types it fetches from a URL.
        max_request_bytes: The most inline media (base64) one request may carry in all.
    """

    provider: str
    images: frozenset[str]
    documents: frozenset[str]
    max_image_bytes: int
    max_document_bytes: int
    url_documents: frozenset[str] = frozenset()
    max_request_bytes: int = 20 * _MB


_PDF: Final = frozenset({"application/pdf"})
_PDF_AND_TEXT: Final = frozenset({"application/pdf", "text/plain"})

ANTHROPIC: Final = MediaRules(
    "Anthropic",
    frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"}),
    _PDF_AND_TEXT,
    max_image_bytes=5 * _MB,
    max_document_bytes=32 * _MB,
    url_documents=_PDF,
    max_request_bytes=32 * _MB,
)
_OPENAI_IMAGES: Final = frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"})
# Plain text goes to OpenAI as text (see `document_text`), so only PDFs are files there.
OPENAI_CHAT: Final = MediaRules(
    "OpenAI Chat Completions", _OPENAI_IMAGES, _PDF, 50 * _MB, 50 * _MB, max_request_bytes=50 * _MB
)
OPENAI_RESPONSES: Final = MediaRules(
    "OpenAI Responses",
    _OPENAI_IMAGES,
    _PDF,
    50 * _MB,
    50 * _MB,
    url_documents=_PDF,
    max_request_bytes=50 * _MB,
)
GEMINI: Final = MediaRules(
    "Gemini",
    frozenset({"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"}),
    _PDF_AND_TEXT,
    max_image_bytes=20 * _MB,
    max_document_bytes=20 * _MB,
    url_documents=_PDF_AND_TEXT,
)


_BY_PROVIDER: Final = {
    "anthropic": ANTHROPIC,
    "openai_chat": OPENAI_CHAT,
    "openai_responses": OPENAI_RESPONSES,
    "gemini": GEMINI,
}


def rules_for(provider: str) -> MediaRules | None:
    """The media rules of a client's `provider`, or `None` for one this module does not know."""
    return _BY_PROVIDER.get(provider)


def sendable(
    media: Iterable[MediaPart], rules: MediaRules, used: int = 0
) -> tuple[list[MediaPart], list[str]]:
    """The parts `rules` accept (each, and together within one request), and why the rest not.

    A part is refused for its type, its bytes, or its size; a part that would take the parts
    kept so far, on top of the `used` bytes (base64) the request already carries, past the
    provider's per-request limit is refused too, so what is kept can be sent. Never raises:
    the reasons are `MediaError` messages, for the model to read.
    """
    kept: list[MediaPart] = []
    refused: list[str] = []
    total = used
    for part in media:
        try:
            check(part, rules)
        except MediaError as exc:
            refused.append(str(exc))
            continue
        size = _b64_size(len(part.data)) if part.data is not None else 0
        if total + size > rules.max_request_bytes:
            refused.append(
                f"{rules.provider} accepts at most {rules.max_request_bytes // _MB} MB of images "
                f"and documents per request (base64); this {part.media_type} {part.type} would "
                f"make {(total + size) / _MB:.1f} MB"
            )
            continue
        total += size
        kept.append(part)
    return kept, refused


def check(part: MediaPart, rules: MediaRules) -> None:
    """Refuse a part that `rules` do not accept.

    Raises:
        MediaError: Its media type is not one the provider accepts (the message lists those
            it does), its bytes are not of that type, or it is over the provider's limit.
    """
    if isinstance(part, ImagePart):
        _check_type(part, rules.images, rules, "image")
        limit = rules.max_image_bytes
    else:
        kinds = rules.documents if part.data is not None else rules.url_documents
        _check_type(part, kinds | _text_ok(part, rules), rules, "document")
        limit = rules.max_document_bytes
    if part.data is not None:
        if part.media_type is not None:
            check_content(part.data, part.media_type, type(part).__name__)
        _check_size(part, limit, rules)
        total = _COUNTING.get()
        if total is not None:
            total.bytes += _b64_size(len(part.data))


_COUNTING: ContextVar[MediaTotal | None] = ContextVar("llm_worker_media_total", default=None)


class MediaTotal:
    """Refuse a request whose media, checked while its body is built, pass the limit together.

    `with MediaTotal(rules): ...` around the building of a body's messages: each inline part
    a request builder sends passes `check` on its way into the body, which adds its base64
    size here, so the request's total costs nothing beyond the media parts themselves. (A
    walk over every part of the whole history, `check_total`, cost a long run 0.4-0.6 ms a
    request at 2,000 messages.) Counted in a context variable: a body is built in one
    synchronous stretch, and a body built at the same time in another thread or built
    inside this one keeps a total of its own.

    Raises:
        MediaError: On leaving the block (not after an error in it), as `check_total`.
    """

    __slots__ = ("_token", "bytes", "rules")

    def __init__(self, rules: MediaRules) -> None:
        self.rules = rules
        self.bytes = 0

    def __enter__(self) -> MediaTotal:
        self._token = _COUNTING.set(self)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        _COUNTING.reset(self._token)
        if kind is None:
            _refuse_over(self.bytes, self.rules)


def check_total(messages: Iterable[Message], rules: MediaRules) -> None:
    """Refuse a request whose inline images and documents together pass the provider's limit.

    Each part may be under its own limit while all of them are not (Gemini's 20 MB is for the
    whole request, Anthropic's 32 MB and OpenAI's 50 MB too).

    Raises:
        MediaError: The base64 of all inline parts is over `rules.max_request_bytes`.
    """
    _refuse_over(inline_size(messages), rules)


def _refuse_over(total: int, rules: MediaRules) -> None:
    if total > rules.max_request_bytes:
        raise MediaError(
            f"{rules.provider} accepts at most {rules.max_request_bytes // _MB} MB of images "
            f"and documents per request (base64); these are {total / _MB:.1f} MB: send fewer, "
            "smaller ones, or give them by URL"
        )


def inline_size(messages: Iterable[Message]) -> int:
    """The base64 bytes of the inline images and documents of `messages`, as a request has them."""
    # One plain loop: it visits every part of every request's whole history, so a generator
    # here (a resumption per media part, a frame per message) cost a long run's turns.
    total = 0
    for message in messages:
        for part in message.content:
            if isinstance(part, ToolResultPart):
                if part.media:
                    total += media_size(part.media)
            elif isinstance(part, _MEDIA_PARTS) and part.data is not None:
                total += _b64_size(len(part.data))
    return total


def media_size(parts: Iterable[MediaPart]) -> int:
    """The base64 bytes of the parts given inline (a part given by URL weighs nothing)."""
    return sum(_b64_size(len(m.data)) for m in parts if m.data is not None)


def _text_ok(part: DocumentPart, rules: MediaRules) -> frozenset[str]:
    # OpenAI takes plain text as text: any text document given as bytes goes.
    if part.data is not None and "text/plain" not in rules.documents:
        return frozenset({"text/plain"})
    return frozenset()


def _check_type(part: MediaPart, kinds: frozenset[str], rules: MediaRules, what: str) -> None:
    if part.media_type in kinds:
        return
    how = "by URL" if part.data is None else "as data"
    if part.media_type is None:
        raise MediaError(
            f"{rules.provider} needs the media type of the {what} at "
            f"{shown_url(part.url or '')!r}: pass "
            f"media_type= to {type(part).__name__}.from_url ({_listed(kinds)})"
        )
    accepted = _listed(kinds) if kinds else "none"
    raise MediaError(
        f"{rules.provider} does not accept {part.media_type} {what}s {how}; it accepts {accepted}"
    )


def _check_size(part: MediaPart, limit: int, rules: MediaRules) -> None:
    size = _b64_size(len(part.data or b""))
    if size > limit:
        raise MediaError(
            f"{rules.provider} accepts {part.type}s of at most {limit // _MB} MB (base64); "
            f"this {part.media_type} {part.type} is {size / _MB:.1f} MB: make it smaller"
        )


_MEDIA_PARTS = (ImagePart, DocumentPart)


def _b64_size(n: int) -> int:
    return 4 * ((n + 2) // 3)


def _listed(kinds: frozenset[str]) -> str:
    return ", ".join(sorted(kinds))


def b64(data: bytes) -> str:
    """`data` as standard base64 text."""
    return base64.b64encode(data).decode("ascii")


def data_url(part: MediaPart) -> str:
    """The `data:` URL of a part given as bytes, else its URL."""
    if part.data is None:
        return part.url or ""
    return f"data:{part.media_type};base64,{b64(part.data)}"


def document_text(part: DocumentPart) -> str | None:
    """A plain-text document as the text a provider without text files reads, else `None`.

    The text is wrapped in a `<document>` element naming the file, so the model can tell it
    from the prompt around it.
    """
    text = part.text
    if text is None:
        return None
    name = f" name={_quoteattr(part.name)}" if part.name else ""  # a name cannot close it
    return f"<document{name}>\n{text}\n</document>"


def _quoteattr(value: str) -> str:
    """`value` as a quoted XML attribute value (as `xml.sax.saxutils.quoteattr`).

    Written out here: `xml.sax.saxutils` imports `urllib.request` (~15 ms) for this one helper.
    """
    value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    value = value.replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;")
    if '"' not in value:
        return f'"{value}"'
    if "'" not in value:
        return f"'{value}'"
    return '"' + value.replace('"', "&quot;") + '"'
