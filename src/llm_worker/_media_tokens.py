"""The tokens an image or a PDF costs, from what its bytes say (not from their size).

A provider bills an image by its pixels, not its bytes: a 200 KB PNG screenshot is about
1,600 tokens, not the 67,000 its base64 size at 4 characters a token would say. The width
and height are read from the image's header (PNG IHDR, JPEG SOF, GIF screen, WebP VP8 /
VP8L / VP8X: a few bytes, never the whole image); a PDF's pages are counted by its page
objects. The figures are the providers' documented ones:

- Anthropic (platform.claude.com/docs/en/build-with-claude/vision, "Evaluate image size"
  and "Calculate image costs"): an image whose long edge passes 1568 px is scaled down to
  it, then costs width x height / 750 tokens, at most about 1,600 (it is scaled down to
  that too). PDFs (.../pdf-support, "Estimate your costs"): each page is its text (1,500 to
  3,000 tokens a page) plus an image of the page: 3,000 a page here.
- OpenAI (platform.openai.com/docs/guides/images-vision, "Calculating costs"): `detail`
  `"low"` is 85 tokens; otherwise the image is fitted in 2048 x 2048, its short side
  scaled to 768, and it costs 85 + 170 per 512 px tile. `"auto"` and no detail count as
  high (the safe side). PDFs are their text and an image of each page: 3,000 a page, as
  Anthropic. (The patch-based models, gpt-4.1-mini and smaller, bill on another scale.)
- Gemini (ai.google.dev/gemini-api/docs/tokens, "Multimodal tokens"): an image at most 384
  px on both sides is 258 tokens; a larger one is cut into 768 x 768 tiles of 258 each.
  PDF pages: 560 each (Gemini 3's default media resolution; 258 on Gemini 2).

Where the provider is not known (`None`, `"scripted"`, a `FallbackClient`'s mix), the
largest of the three is taken: the safe side for a compaction trigger.

Bounds, so a hostile header cannot blow an estimate up: each declared side counts at most
8,000 px (Anthropic refuses larger images; OpenAI and Anthropic scale to far less), a PDF
at most 1,000 pages. What cannot be read (a corrupt or truncated header, a zero size, HEIC,
an image given by URL) counts as a 1920 x 1080 screenshot, the size an agent sends most; a
PDF whose pages cannot be counted (compressed object streams, a URL) as one page per 100 KB
of it, at least 1 (a URL: `URL_DOCUMENT_PAGES`).
"""

from __future__ import annotations

import math
import struct
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from llm_worker.messages import DocumentPart, ImagePart

__all__ = (
    "UNKNOWN_SIZE",
    "URL_DOCUMENT_PAGES",
    "image_size",
    "image_tokens",
    "media_tokens",
    "pdf_pages",
)

UNKNOWN_SIZE: Final = (1920, 1080)
"""The size an image counts as when its own cannot be read: a full-HD screenshot."""
URL_DOCUMENT_PAGES: Final = 10
"""The pages a PDF given by URL counts as (its bytes are not here to count)."""

_MAX_SIDE: Final = 8_000
_MAX_PAGES: Final = 1_000
_BYTES_PER_PAGE: Final = 100_000
_JPEG_SEGMENTS: Final = 1_024  # a header walk stops here: a hostile file cannot make it long
_PAGE_TOKENS: Final = {"anthropic": 3_000, "openai": 3_000, "gemini": 560}


def _family(provider: str | None) -> str | None:
    if provider is None:
        return None
    if provider.startswith("openai"):
        return "openai"
    return provider if provider in ("anthropic", "gemini") else None


def media_tokens(part: ImagePart | DocumentPart, provider: str | None = None) -> int:
    """The tokens `provider` (None: the largest of the providers') bills for an image or PDF.

    A plain-text document is not counted here (it is text: `_tokens.part_chars`).
    """
    if part.type == "image":
        size = image_size(part.data) if part.data is not None else None
        return image_tokens(size or UNKNOWN_SIZE, provider, part.detail)
    if part.data is None:
        pages = URL_DOCUMENT_PAGES
    else:
        pages = pdf_pages(part.data) or min(_MAX_PAGES, max(1, len(part.data) // _BYTES_PER_PAGE))
    family = _family(provider)
    per_page = _PAGE_TOKENS[family] if family else max(_PAGE_TOKENS.values())
    return pages * per_page


def image_tokens(
    size: tuple[int, int], provider: str | None = None, detail: str | None = None
) -> int:
    """The tokens an image of `size` (width, height) costs on `provider` (None: the most)."""
    width, height = (min(max(side, 1), _MAX_SIDE) for side in size)
    family = _family(provider)
    if family == "anthropic":
        return _anthropic(width, height)
    if family == "openai":
        return _openai(width, height, detail)
    if family == "gemini":
        return _gemini(width, height)
    return max(_anthropic(width, height), _openai(width, height, detail), _gemini(width, height))


def _anthropic(width: int, height: int) -> int:
    scale = min(1.0, 1568 / max(width, height))
    return min(1_600, max(1, math.ceil(width * scale * height * scale / 750)))


def _openai(width: int, height: int, detail: str | None) -> int:
    if detail == "low":
        return 85
    w, h = float(width), float(height)
    fit = min(1.0, 2048 / max(w, h))
    w, h = w * fit, h * fit
    short = min(1.0, 768 / min(w, h))
    w, h = w * short, h * short
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def _gemini(width: int, height: int) -> int:
    if width <= 384 and height <= 384:
        return 258
    return 258 * math.ceil(width / 768) * math.ceil(height / 768)


def image_size(data: bytes) -> tuple[int, int] | None:
    """The (width, height) an image's header declares; None when it cannot be read or is 0."""
    try:
        size = _png(data) or _gif(data) or _webp(data) or _jpeg(data)
    except (struct.error, IndexError):  # a header cut short
        return None
    if size is None or size[0] <= 0 or size[1] <= 0:
        return None
    return size


def _png(data: bytes) -> tuple[int, int] | None:
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _gif(data: bytes) -> tuple[int, int] | None:
    if data[:6] not in (b"GIF87a", b"GIF89a"):
        return None
    width, height = struct.unpack("<HH", data[6:10])
    return width, height


def _webp(data: bytes) -> tuple[int, int] | None:
    if data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        return None
    chunk = data[12:16]
    if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":  # a key frame's start code
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and data[20:21] == b"\x2f":
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    return None


# Start-of-frame markers carry the size; C4 (DHT), C8 (JPG) and CC (DAC) are not frames.
_SOF: Final = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg(data: bytes) -> tuple[int, int] | None:
    if data[:3] != b"\xff\xd8\xff":
        return None
    at = 2
    for _ in range(_JPEG_SEGMENTS):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill bytes before a marker
            at += 1
            continue
        if marker in _SOF:
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return width, height
        if marker in (0xD9, 0xDA):  # end of image, start of scan: no frame header
            return None
        (length,) = struct.unpack(">H", data[at + 2 : at + 4])
        if length < 2:
            return None
        at += 2 + length
    return None


# A PDF's page count by (hash, length) of its bytes: a history re-sends the same PDF every
# turn and a budget's estimate counts the whole request each turn, so without this a 32 MB
# PDF was scanned again on every turn (~90 ms each: a history of 1,000 turns with one in
# each took ~90 s an estimate). A bytes object keeps its hash once computed, so a hit costs
# O(1); the key holds no reference to the bytes. Bounded, oldest out first.
_PAGES_CACHED: dict[tuple[int, int], int | None] = {}
_PAGES_CACHE_SIZE: Final = 256
_PAGES_CACHE_FROM: Final = 4_096  # a scan costs ~3 ns a byte: smaller ones in microseconds


def pdf_pages(data: bytes) -> int | None:
    """The pages of a PDF by its page objects (at most 1,000); None when none are visible.

    Page objects inside compressed object streams (PDF 1.5+) are not visible: None then.
    A large PDF is scanned once: its count is kept by its bytes' hash and length.
    """
    if not data.startswith(b"%PDF-"):
        return None
    if len(data) < _PAGES_CACHE_FROM:
        return _scan_pages(data)
    key = (hash(data), len(data))
    pages = _PAGES_CACHED.get(key, -1)
    if pages != -1:
        return pages
    pages = _PAGES_CACHED[key] = _scan_pages(data)
    if len(_PAGES_CACHED) > _PAGES_CACHE_SIZE:
        _PAGES_CACHED.pop(next(iter(_PAGES_CACHED), key), None)
    return pages


def _scan_pages(data: bytes) -> int | None:
    # `bytes.count` runs in C at memory speed: a 32 MB PDF costs ~90 ms (4 passes).
    pages = sum(data.count(spelling) for spelling in (b"/Type/Page", b"/Type /Page"))
    pages -= sum(data.count(spelling) for spelling in (b"/Type/Pages", b"/Type /Pages"))
    return min(pages, _MAX_PAGES) if pages > 0 else None
