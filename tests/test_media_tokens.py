"""Images and PDFs in the token estimate: their pixels and pages, never their bytes' size.

An inline image counted as its base64 size at 4 characters a token: a 177 KB screenshot was
~59,000 "tokens" where Anthropic bills ~1,600. Every count that goes through `request_chars`
(the calibrated estimate, `count_tokens` fallbacks, Limits' budgets, the scripted servers'
usage, the ContextPolicy) now counts media by the providers' formulas.
"""

from __future__ import annotations

import math
import struct
import time
import zlib
from typing import Any

import pytest

from llm_worker import Message
from llm_worker._media_tokens import (
    UNKNOWN_SIZE,
    URL_DOCUMENT_PAGES,
    image_size,
    image_tokens,
    media_tokens,
    pdf_pages,
)
from llm_worker._tokens import TokenEstimator, media_provider, request_chars
from llm_worker.limits._estimate import estimate_input
from llm_worker.messages import DocumentPart, ImagePart, Request, TextPart
from llm_worker.providers import AnthropicClient, FallbackClient, GeminiClient
from llm_worker.testing import ScriptedClient
from llm_worker.testing._script import prompt_tokens
from support.media import GIF, WEBP, jpeg, screenshot

PROVIDERS = ("anthropic", "openai_chat", "openai_responses", "gemini")
SHOT = screenshot()  # 1920 x 1080, ~177 KB


def _png_header(width: int, height: int) -> bytes:
    body = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    crc = struct.pack(">I", zlib.crc32(b"IHDR" + body))
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + body + crc


def test_the_image_headers_give_their_sizes() -> None:
    assert image_size(SHOT) == (1920, 1080)
    assert image_size(jpeg(1280, 720)) == (1280, 720)  # past a 20 KB EXIF segment
    assert image_size(GIF) == (1, 1)
    assert image_size(WEBP) == (1, 1)  # VP8L
    vp8x = b"RIFF\x00\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x00\x00\x00\x00"
    assert image_size(vp8x + (799).to_bytes(3, "little") + (599).to_bytes(3, "little")) == (
        800,
        600,
    )
    vp8 = b"RIFF\x00\x00\x00\x00WEBPVP8 \x00\x00\x00\x00" + b"\x00\x00\x00\x9d\x01\x2a"
    assert image_size(vp8 + struct.pack("<HH", 640, 480)) == (640, 480)


def test_the_providers_formulas_for_a_full_hd_screenshot() -> None:
    # Anthropic: 1568 x 882 / 750 = 1,844, capped at ~1,600. OpenAI (high): 1365 x 768,
    # 3 x 2 tiles: 85 + 6 x 170. Gemini: 3 x 2 tiles of 768: 6 x 258.
    shot = ImagePart.from_bytes(SHOT)
    assert media_tokens(shot, "anthropic") == 1_600
    assert media_tokens(shot, "openai_chat") == media_tokens(shot, "openai_responses") == 1_105
    assert media_tokens(shot, "gemini") == 1_548
    assert media_tokens(shot) == 1_600  # unknown provider: the largest
    assert media_tokens(ImagePart.from_bytes(SHOT, detail="low"), "openai_responses") == 85
    # Small images: Anthropic by the pixel, Gemini's one tile, OpenAI's one tile.
    assert image_tokens((300, 200), "anthropic") == 80
    assert image_tokens((300, 200), "gemini") == 258
    assert image_tokens((300, 200), "openai_chat") == 255
    # A 4000 x 3000 photo: Anthropic scales it to 1568 x 1176 (2,459, capped at 1,600).
    assert image_tokens((4000, 3000), "anthropic") == 1_600
    assert image_tokens((4000, 3000), "openai_chat") == 85 + 170 * 2 * 2  # 1024 x 768
    assert image_tokens((4000, 3000), "gemini") == 258 * 6 * 4


@pytest.mark.parametrize("provider", [None, *PROVIDERS])
def test_hostile_and_unreadable_images_get_a_bounded_stated_estimate(
    provider: str | None,
) -> None:
    default = image_tokens(UNKNOWN_SIZE, provider)
    unreadable = [
        SHOT[:20],  # the header cut short
        b"\xff\xd8\xff" + b"\x00" * 40,  # a JPEG whose segments are garbage
        jpeg(640, 480)[:30],  # cut inside its EXIF segment
        jpeg(640, 480, exif=0, segments=5_000),  # no frame header within the bounded walk
        _png_header(0, 0),  # a zero size
        b"RIFF\x00\x00\x00\x00WEBPVP8 \x00\x00",  # a WebP cut short
    ]
    for data in unreadable:
        started = time.perf_counter()
        assert media_tokens(ImagePart(data, "image/png"), provider) == default
        assert time.perf_counter() - started < 0.5  # never a walk over the whole file
    # A declared 100000 x 100000 counts as at most 8000 px a side.
    huge = media_tokens(ImagePart(_png_header(100_000, 100_000), "image/png"), provider)
    assert huge == image_tokens((8_000, 8_000), provider) <= 258 * 11 * 11
    assert media_tokens(ImagePart.from_bytes(_png_header(2**32 - 1, 1)), provider) <= huge
    # An image by URL: its bytes are not here, the stated default.
    assert media_tokens(ImagePart.from_url("https://example.com/a.png"), provider) == default


def test_pdfs_count_their_pages_and_text_documents_their_text() -> None:
    pages = b"".join(b"%d 0 obj << /Type /Page /Parent 2 0 R >> endobj\n" % i for i in range(3))
    pdf = b"%PDF-1.7\n2 0 obj << /Type /Pages /Count 3 >> endobj\n" + pages + b"%%EOF\n"
    assert pdf_pages(pdf) == 3
    document = DocumentPart.from_bytes(pdf)
    assert media_tokens(document, "anthropic") == 3 * 3_000
    assert media_tokens(document, "gemini") == 3 * 560
    assert media_tokens(document) == 3 * 3_000
    # Pages inside compressed object streams are not visible: one a 100 KB, at least one.
    hidden = b"%PDF-1.7\n" + b"\x00" * 250_000 + b"%%EOF\n"
    assert pdf_pages(hidden) is None
    assert media_tokens(DocumentPart(hidden, "application/pdf"), "anthropic") == 2 * 3_000
    bomb = b"%PDF-1.7\n" + b"/Type/Page " * 50_000
    assert pdf_pages(bomb) == 1_000  # bounded
    url = DocumentPart.from_url("https://example.com/a.pdf")
    assert media_tokens(url, "gemini") == URL_DOCUMENT_PAGES * 560
    text = DocumentPart.from_text("é" * 1_000)
    assert request_chars(Request([Message.user(text)])) == 2_000  # its UTF-8 bytes


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_mixed_request_is_within_a_few_percent_of_the_provider_formula(provider: str) -> None:
    text = "Click the blue button, then read the dialog. " * 200  # 9,200 characters
    shots = [ImagePart.from_bytes(SHOT), ImagePart.from_bytes(jpeg(1280, 720))]
    request = Request([Message.user(TextPart(text), *shots)])
    formula = len(text) / 4 + sum(image_tokens(s, provider) for s in [(1920, 1080), (1280, 720)])
    estimate = TokenEstimator(provider).estimate(request).input_tokens
    assert math.isclose(estimate, formula, rel_tol=0.01)
    # Every count agrees: the scripted usage, the Limits' fallback, count_tokens' estimate.
    assert abs(prompt_tokens(request, provider) - formula) <= 2
    assert estimate < 6_000  # it was ~68,000 from the bytes' size


def test_calibration_on_screenshots_keeps_text_honest() -> None:
    # A provider billing code-like text at 3 characters a token, and each screenshot by
    # its formula: a ratio learned on screenshot-heavy requests stays between 3 and 4, so
    # a text-only request afterwards is estimated within 4/3 of its tokens (from the
    # bytes' size it learned ~30 characters a token: text under-counted ~10 times).
    estimator = TokenEstimator("anthropic")
    for turn in range(1, 17):
        text = "x" * 3_000 * turn
        request = Request([Message.user(TextPart(text), *[ImagePart.from_bytes(SHOT)] * turn)])
        estimator.observe_request(request, len(text) // 3 + 1_600 * turn)
    assert 3.0 <= estimator.chars_per_token <= 4.0
    plain = Request([Message.user("y" * 60_000)])
    estimated = estimator.estimate(plain).input_tokens
    assert 20_000 / (4 / 3) <= estimated <= 20_000  # its true tokens: 60,000 / 3


@pytest.mark.anyio
async def test_each_client_counts_with_its_provider_figures() -> None:
    request = Request([Message.user(TextPart("look"), ImagePart.from_bytes(_png_header(300, 200)))])
    async with AnthropicClient(model="claude-x", api_key="k") as anthropic:
        assert anthropic.estimator.provider == "anthropic"
        assert media_provider(anthropic) == "anthropic"
        no_counter: Any = ScriptedClientLike(anthropic)
        estimate = await estimate_input(no_counter, request)
        assert estimate.tokens == request_chars(request, "anthropic") // 4 + 1
        async with GeminiClient(model="gemini-x", api_key="k") as gemini:
            assert gemini.estimator.estimate(request).input_tokens == 1 + 258
            mixed = FallbackClient([anthropic, gemini])
            assert media_provider(mixed) is None  # any may answer: the largest figures
    shot = ImagePart.from_bytes(SHOT)  # "scripted": no provider's figures, the largest
    assert media_tokens(shot, media_provider(ScriptedClient([]))) == media_tokens(shot)
    assert media_provider(ScriptedClient([], provider="gemini")) == "gemini"


class ScriptedClientLike:
    """A client with no `count_tokens`: Limits estimate with its provider's figures."""

    def __init__(self, of: AnthropicClient) -> None:
        self.provider = of.provider
