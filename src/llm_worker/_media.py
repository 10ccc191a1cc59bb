"""Images and documents as message parts: `ImagePart`, `DocumentPart` (re-exported by messages).

Their bytes are kept as given and written as standard base64 in the message JSON; their media
type is detected from the content (`_sniff`) or checked against it. Whether a provider takes
one (its type, its size) is checked by each client before sending.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, cast

from llm_worker import _sniff
from llm_worker.errors import MediaError

if TYPE_CHECKING:
    from os import PathLike

    from pydantic import TypeAdapter

__all__ = (
    "Bytes64",
    "Detail",
    "DocumentPart",
    "ImagePart",
    "MediaPart",
    "media_from_json",
    "media_to_json",
)

Bytes64: TypeAlias = Annotated[bytes, _sniff.Base64()]
"""Bytes, written as standard base64 text in the message JSON."""

Detail: TypeAlias = Literal["low", "high", "auto"]
"""How closely an OpenAI model looks at an image (its `detail`)."""


@dataclass(slots=True, repr=False)
class ImagePart:
    """An image for the model to look at: its bytes, or a URL the provider fetches.

    Build one with `from_path`, `from_bytes` or `from_url`: they detect the media type from
    the content (or check the one given against it). Every client sends it natively; one a
    provider does not take (its type, its size) raises `MediaError` before sending.

    Attributes:
        data: The image's bytes; `None` for an image given by URL.
        media_type: `image/png`, `image/jpeg`, `image/gif`, `image/webp`, `image/heic` or
            `image/heif`; `None` only for a URL whose type is not known (Gemini needs it).
        url: Where the provider fetches the image; `None` for inline bytes.
        detail: OpenAI's `detail` (`"low"`, `"high"`, `"auto"`); other providers ignore it.
    """

    data: Bytes64 | None = None
    media_type: str | None = None
    _: KW_ONLY
    url: str | None = None
    detail: Detail | None = None
    type: Literal["image"] = "image"

    def __post_init__(self) -> None:
        self.data, self.media_type = _checked_source(self, "ImagePart")
        if self.detail not in (None, "low", "high", "auto"):
            raise MediaError(
                f"ImagePart detail must be 'low', 'high' or 'auto', not {self.detail!r}"
            )

    def __repr__(self) -> str:
        return _repr(self, detail=self.detail)

    @classmethod
    def from_bytes(
        cls, data: bytes, media_type: str | None = None, *, detail: Detail | None = None
    ) -> ImagePart:
        """An image from its bytes; `media_type` is detected when not given.

        Raises:
            MediaError: The bytes are not an image of a known type, or not of `media_type`.
        """
        checked = _sniff.checked_type(data, media_type, _sniff.IMAGE_TYPES, "ImagePart")
        return cls(data, checked, detail=detail)

    @classmethod
    def from_path(cls, path: str | PathLike[str], *, detail: Detail | None = None) -> ImagePart:
        """An image read from a file; its media type comes from its content.

        Raises:
            MediaError: The file is not an image of a known type.
            OSError: The file cannot be read.
        """
        data, media_type, _ = _sniff.read(path, _sniff.IMAGE_TYPES, "ImagePart")
        return cls(data, media_type, detail=detail)

    @classmethod
    def from_url(
        cls, url: str, media_type: str | None = None, *, detail: Detail | None = None
    ) -> ImagePart:
        """An image the provider fetches from `url` (a `data:` URL is decoded to bytes).

        `media_type` defaults to what the URL's file name suggests, if it names an image.

        Raises:
            MediaError: `media_type` is not an image type, or a `data:` URL is not an image.
        """
        inline = _sniff.decode_data_url(url)
        if inline is not None:
            return cls.from_bytes(inline[0], inline[1], detail=detail)
        kind = _sniff.url_type(url, media_type, _sniff.IMAGE_TYPES, "ImagePart")
        return cls(None, kind, url=url, detail=detail)


@dataclass(slots=True, repr=False)
class DocumentPart:
    """A document for the model to read: a PDF or plain text, as bytes or by URL.

    Build one with `from_path`, `from_bytes`, `from_text` or `from_url`. Anthropic and Gemini
    take both kinds natively; OpenAI takes PDFs as files and gets plain text as text.

    Attributes:
        data: The document's bytes (UTF-8 for text); `None` for a document given by URL.
        media_type: `application/pdf` or `text/plain`; `None` only for a URL of unknown type.
        url: Where the provider fetches the document; `None` for inline bytes.
        name: The file name (OpenAI's `filename`, Anthropic's `title`).
    """

    data: Bytes64 | None = None
    media_type: str | None = None
    _: KW_ONLY
    url: str | None = None
    name: str | None = None
    type: Literal["document"] = "document"

    def __post_init__(self) -> None:
        self.data, self.media_type = _checked_source(self, "DocumentPart")

    def __repr__(self) -> str:
        return _repr(self, name=self.name)

    @classmethod
    def from_bytes(
        cls, data: bytes, media_type: str | None = None, *, name: str | None = None
    ) -> DocumentPart:
        """A document from its bytes; `media_type` is detected when not given.

        Raises:
            MediaError: The bytes are neither a PDF nor UTF-8 text, or not of `media_type`.
        """
        checked = _sniff.checked_type(data, media_type, _sniff.DOCUMENT_TYPES, "DocumentPart")
        return cls(data, checked, name=name)

    @classmethod
    def from_text(cls, text: str, *, name: str | None = None) -> DocumentPart:
        """A plain-text document."""
        return cls(text.encode(), "text/plain", name=name)

    @classmethod
    def from_path(cls, path: str | PathLike[str]) -> DocumentPart:
        """A document read from a file, named after it; its media type comes from its content.

        Raises:
            MediaError: The file is neither a PDF nor UTF-8 text.
            OSError: The file cannot be read.
        """
        data, media_type, name = _sniff.read(path, _sniff.DOCUMENT_TYPES, "DocumentPart")
        return cls(data, media_type, name=name)

    @classmethod
    def from_url(
        cls, url: str, media_type: str | None = None, *, name: str | None = None
    ) -> DocumentPart:
        """A document the provider fetches from `url` (a `data:` URL is decoded to bytes).

        Raises:
            MediaError: `media_type` is not a document type, or a `data:` URL is not one.
        """
        inline = _sniff.decode_data_url(url)
        if inline is not None:
            return cls.from_bytes(inline[0], inline[1], name=name)
        kind = _sniff.url_type(url, media_type, _sniff.DOCUMENT_TYPES, "DocumentPart")
        return cls(None, kind, url=url, name=name or _sniff.url_name(url) or None)

    @property
    def text(self) -> str | None:
        """The text of a plain-text document given as bytes, else `None`."""
        if self.media_type != "text/plain" or self.data is None:
            return None
        return _sniff.text_of(self.data)


MediaPart: TypeAlias = ImagePart | DocumentPart
"""An image or a document."""


def _repr(part: MediaPart, **extra: str | None) -> str:
    # The bytes stay out of reprs, logs and test failures: their size says enough.
    shown = _sniff.shown_url(part.url or "")
    source = f"<{len(part.data)} bytes>" if part.data is not None else repr(shown)
    more = "".join(f", {k}={v!r}" for k, v in extra.items() if v is not None)
    return f"{type(part).__name__}({source}, {part.media_type!r}{more})"


def _checked_source(part: MediaPart, what: str) -> tuple[bytes | None, str | None]:
    # A part built directly (not through from_*) is checked here: a client must never
    # meet a str or a memoryview where bytes belong.
    data = cast("object", part.data)
    url = cast("object", part.url)
    if (data is None) == (url is None):
        raise MediaError(f"{what} needs either data or a url (exactly one)")
    if isinstance(data, bytearray | memoryview):
        data = bytes(cast("bytearray", data))
    elif data is not None and not isinstance(data, bytes):
        raise MediaError(f"{what} data must be bytes, not {type(data).__name__}")
    if url is not None and not isinstance(url, str):
        raise MediaError(f"{what} url must be a str, not {type(url).__name__}")
    kind = cast("object", part.media_type)
    if kind is not None and not isinstance(kind, str):
        raise MediaError(f"{what} media_type must be a str, not {type(kind).__name__}")
    return data, None if kind is None else _sniff.normal_type(kind)


def media_to_json(parts: list[MediaPart]) -> list[dict[str, Any]]:
    """Images and documents as JSON-ready data (bytes as base64), as in the message JSON."""
    return _media_adapter().dump_python(parts, mode="json")


def media_from_json(data: object) -> list[MediaPart]:
    """Images and documents back from `media_to_json` output.

    Raises:
        pydantic.ValidationError: The data is not a list of images and documents.
    """
    with _sniff.decoding():
        return _media_adapter().validate_python(data)


@cache
def _media_adapter() -> TypeAdapter[list[MediaPart]]:
    from pydantic import TypeAdapter

    return TypeAdapter(list[MediaPart])
