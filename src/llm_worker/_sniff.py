"""What images and documents are: media types from content and name, base64 in JSON.

The helpers behind `ImagePart` / `DocumentPart` (`_media`): a file's media type is read
from its first bytes (magic numbers), not trusted from its name; a declared media type is
checked against the bytes; `data:` URLs are decoded; `Base64` makes pydantic write bytes as
standard base64 text in the message JSON and read them back.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Generator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote, unquote_to_bytes, urlsplit, urlunsplit

from llm_worker.errors import MediaError

if TYPE_CHECKING:
    from os import PathLike

    from pydantic_core import CoreSchema

__all__ = (
    "DOCUMENT_TYPES",
    "IMAGE_TYPES",
    "Base64",
    "check_content",
    "checked_type",
    "decode_data_url",
    "decoding",
    "guess_from_name",
    "normal_type",
    "read",
    "shown_url",
    "sniff",
    "text_of",
    "url_name",
    "url_type",
)

IMAGE_TYPES: Final = frozenset(
    {"image/png", "image/jpeg", "image/gif", "image/webp", "image/heic", "image/heif"}
)
"""Image media types some provider accepts."""

DOCUMENT_TYPES: Final = frozenset({"application/pdf", "text/plain"})
"""Document media types: PDF and plain text."""

# Magic numbers at offset 0 (RIFF/ftyp containers are told apart further in: `_container`).
_MAGIC: Final[tuple[tuple[bytes, str], ...]] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"BM", "image/bmp"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
)
# ISO-BMFF brands (bytes 8..12 after `ftyp`) of HEIF images and of HEVC-coded HEIC ones.
_HEIC_BRANDS: Final = frozenset({b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis"})
_HEIF_BRANDS: Final = frozenset({b"mif1", b"msf1", b"avif"})
_TEXT_PROBE: Final = 4096
# Names that say "plain text" for what is plain text to a model (mimetypes maps these otherwise).
_TEXT_SUFFIXES: Final = frozenset({".txt", ".md", ".markdown", ".rst", ".log", ".csv", ".text"})


def sniff(data: bytes) -> str | None:
    """The media type `data` starts with, or `text/plain` for UTF-8 text, else `None`."""
    for magic, media_type in _MAGIC:
        if data.startswith(magic):
            return media_type
    return _container(data) or ("text/plain" if _is_text(data) else None)


def _container(data: bytes) -> str | None:
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[4:8] == b"ftyp":
        brand = data[8:12]
        if brand in _HEIC_BRANDS:
            return "image/heic"
        if brand in _HEIF_BRANDS:
            return "image/avif" if brand == b"avif" else "image/heif"
    return None


def _is_text(data: bytes) -> bool:
    probe = data[:_TEXT_PROBE]
    if 0x00 in probe:  # (a byte's value: `bytes in bytes` builds a TypeError first)
        return False
    try:
        probe.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut by the probe's end is still text.
        return exc.start >= len(probe) - 3 and exc.reason == "unexpected end of data"
    return True


def guess_from_name(name: str) -> str | None:
    """The media type a file or URL path's suffix suggests (`cat.png` → `image/png`)."""
    lowered = name.lower()
    if any(lowered.endswith(suffix) for suffix in _TEXT_SUFFIXES):
        return "text/plain"
    import mimetypes  # only when a name is read: its tables take a while to load

    guessed, _ = mimetypes.guess_type(lowered, strict=False)
    return "image/jpeg" if guessed == "image/jpg" else guessed


def check_content(data: bytes, media_type: str, what: str) -> None:
    """Refuse bytes that are not what their media type says.

    Args:
        data: The content.
        media_type: The declared media type.
        what: The part, for the message (`"ImagePart"`).

    Raises:
        MediaError: The bytes are of another known type, or are not that type at all.
    """
    if media_type == "text/plain":
        if text_of(data) is None:
            raise MediaError(f"{what} says text/plain, but its content is not UTF-8 text")
        return
    found = sniff(data)
    if found == media_type:
        return
    shown = f"{found} data" if found else "no known image or document format"
    raise MediaError(
        f"{what} says {media_type}, but its content is {shown} "
        f"(first bytes {data[:8]!r}): pass the right media type, or let it be detected"
    )


def text_of(data: bytes) -> str | None:
    """`data` as text, if it is UTF-8 without NUL characters."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\x00" in text else text


def decode_data_url(url: str) -> tuple[bytes, str] | None:
    """The bytes and media type of a `data:` URL, `None` for any other URL.

    Raises:
        MediaError: A `data:` URL that does not decode.
    """
    if url[:5].lower() != "data:":
        return None
    header, sep, payload = url[5:].partition(",")
    if not sep:
        raise MediaError("a data: URL without a comma before its data")
    params = header.split(";")
    media_type = params[0].strip().lower() or "text/plain"
    if "base64" not in (p.strip().lower() for p in params[1:]):
        return unquote_to_bytes(payload), media_type  # %XX are bytes, not UTF-8 text
    try:
        return binascii.a2b_base64(payload, strict_mode=True), media_type
    except (binascii.Error, ValueError) as exc:
        raise MediaError(f"a data: URL whose base64 data does not decode: {exc}") from exc


def shown_url(url: str) -> str:
    """`url` as reprs and errors show it: without a password, a query or a fragment.

    A signed URL's query (`X-Amz-Signature=...`, a SAS token) is a credential.
    """
    try:
        parts = urlsplit(url)
        host = parts.netloc.rpartition("@")[2]
    except ValueError:
        return "<a malformed url>"
    hidden = "?…" if parts.query or parts.fragment else ""
    return urlunsplit((parts.scheme, host, parts.path, "", "")) + hidden


def url_name(url: str) -> str:
    """The last segment of a URL's path (`https://x/a/cat.png?s=1` → `cat.png`)."""
    return unquote(urlsplit(url).path.rsplit("/", 1)[-1])


# pydantic tries a part against every kind of the union, so the same base64 text would be
# decoded once per media kind: within one validation (`decoding()`), it is decoded once.
_decoded: ContextVar[dict[int, tuple[str, bytes]] | None] = ContextVar("_decoded", default=None)


@contextmanager
def decoding() -> Generator[None]:
    """Decode each base64 text once while validating one message or history."""
    token = _decoded.set({})
    try:
        yield
    finally:
        _decoded.reset(token)


def _from_json(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if not isinstance(value, str):
        raise ValueError("expected base64 text")  # pydantic reports a ValueError
    seen = _decoded.get()
    if seen is None:
        return _decode(value)
    hit = seen.get(id(value))
    if hit is not None and hit[0] is value:
        return hit[1]
    data = _decode(value)
    seen[id(value)] = (value, data)  # the text is kept too: its id stays its own
    return data


def _decode(value: str) -> bytes:
    try:
        # strict_mode checks in C what b64decode(validate=True) checks with a slow regex.
        return binascii.a2b_base64(value, strict_mode=True)
    except (binascii.Error, ValueError) as exc:  # ValueError: a non-ASCII character
        raise ValueError(f"not valid base64: {exc}") from exc


def _to_json(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


class Base64:
    """pydantic marker: `Annotated[bytes, Base64()]` is standard base64 text in JSON.

    pydantic's own `ser_json_bytes="base64"` writes the URL-safe alphabet, which a reader's
    `base64.b64decode` silently misreads; this writes and reads RFC 4648 standard base64.
    """

    def __get_pydantic_core_schema__(
        self, source: Any, handler: Callable[[Any], CoreSchema]
    ) -> CoreSchema:
        """The schema: base64 text (or bytes) in, base64 text out in JSON mode."""
        from pydantic_core import core_schema

        serializer = core_schema.plain_serializer_function_ser_schema(_to_json, when_used="json")
        return core_schema.no_info_plain_validator_function(_from_json, serialization=serializer)


_ALIASES: Final = {"image/jpg": "image/jpeg", "image/x-png": "image/png"}


def normal_type(media_type: str) -> str:
    """A media type in lowercase, parameters dropped, common aliases mapped (`image/jpg`)."""
    base = media_type.split(";", 1)[0].strip().lower()
    return _ALIASES.get(base, base)


def checked_type(data: bytes, media_type: str | None, kinds: frozenset[str], what: str) -> str:
    """The media type of `data`: the declared one once checked, else the detected one.

    Raises:
        MediaError: The type is not one `what` takes, or the bytes are not of that type.
    """
    if media_type is None:
        found = sniff(data)
        if found is None or found not in kinds:
            shown = f"{found} data" if found else "of no known format"
            raise MediaError(f"{what}: the content is {shown}; {what} takes {_listed(kinds)}")
        if found == "text/plain":
            check_content(data, found, what)  # sniffing probed only the first bytes
        return found
    declared = normal_type(media_type)
    if declared not in kinds:
        raise MediaError(f"{what} does not take {media_type!r}: it takes {_listed(kinds)}")
    check_content(data, declared, what)
    return declared


def read(path: str | PathLike[str], kinds: frozenset[str], what: str) -> tuple[bytes, str, str]:
    """A file's bytes, media type (from its content; its name only names it) and name.

    Raises:
        MediaError: The file is not of a type `what` takes.
        OSError: The file cannot be read.
    """
    from pathlib import Path  # here, where a file is read: building a client need not load it

    file = Path(path)
    data = file.read_bytes()
    found = sniff(data)
    if found in kinds:
        if found == "text/plain":
            check_content(data, found, f"{what} ({file})")
        return data, found, file.name
    named = guess_from_name(file.name)
    shown = f"{found} data" if found else "of no known format"
    hint = f" (its name says {named})" if named and named != found else ""
    raise MediaError(f"{what}: {file} is {shown}{hint}; {what} takes {_listed(kinds)}")


def url_type(url: str, media_type: str | None, kinds: frozenset[str], what: str) -> str | None:
    """The media type of a file at `url`: the declared one if given, else its name's guess.

    Raises:
        MediaError: The declared type is not one `what` takes.
    """
    if media_type is not None:
        declared = normal_type(media_type)
        if declared not in kinds:
            raise MediaError(f"{what} does not take {media_type!r}: it takes {_listed(kinds)}")
        return declared
    guessed = guess_from_name(url_name(url))
    return guessed if guessed in kinds else None


def _listed(kinds: frozenset[str]) -> str:
    return ", ".join(sorted(kinds))
