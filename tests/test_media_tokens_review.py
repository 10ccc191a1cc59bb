"""Review of images and PDFs in the token estimate: hostile bytes, and a PDF's cost per turn.

A PDF's pages are counted by scanning its bytes; a budget's estimate (`estimate_input`) and
the calibrated estimate count the whole request every turn, so a large PDF carried in the
history was scanned again on every turn: ~90 ms for 32 MB, and a history holding one in each
of 1,000 turns took ~90 s an estimate. It is now scanned once.
"""

from __future__ import annotations

import random
import struct

import pytest

from llm_worker import _media_tokens
from llm_worker._media_tokens import image_size, image_tokens, media_tokens, pdf_pages
from llm_worker._tokens import request_chars
from llm_worker.limits._estimate import estimate_input
from llm_worker.messages import DocumentPart, ImagePart, Message, Request, TextPart
from llm_worker.testing import ScriptedClient
from support.media import GIF, HEIC, JPEG, PDF, WEBP, png, screenshot

_JPEG_SOF = JPEG[:-2] + b"\xff\xc0\x00\x11\x08\x04\x38\x07\x80\x03" + b"\x00" * 15 + b"\xff\xd9"
_VP8 = b"RIFF\x00\x00\x00\x00WEBPVP8 " + b"\x00" * 7 + b"\x9d\x01\x2a\x80\x07\x38\x04" + b"\x00" * 8
_VP8X = b"RIFF\x00\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00" + b"\x00" * 4 + b"\x7f\x07\x00\x37\x04\x00"
_SEEDS = (png(3, 2), JPEG, _JPEG_SOF, GIF, WEBP, _VP8, _VP8X, HEIC, PDF, screenshot(64, 32, 200))
_PROVIDERS = (None, "anthropic", "openai_chat", "gemini")


def _counted(data: bytes) -> None:
    size = image_size(data)
    assert size is None or (size[0] > 0 and size[1] > 0)
    pdf_pages(data)
    for provider in _PROVIDERS:
        assert 0 < media_tokens(ImagePart(data=data, media_type="image/png"), provider) <= 40_000


def test_the_crafted_headers_read_as_their_sides() -> None:
    assert image_size(_JPEG_SOF) == image_size(_VP8) == image_size(_VP8X) == (1920, 1080)


def test_every_truncation_and_seeded_byte_flip_is_counted_without_raising() -> None:
    rng = random.Random(40)
    for seed in _SEEDS:
        for cut in range(len(seed) + 1):
            _counted(seed[:cut])
        for _ in range(400):
            data = bytearray(seed)
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            _counted(bytes(data))


def test_jpeg_loops_and_huge_sides_stay_bounded() -> None:
    assert image_size(b"\xff\xd8\xff" + b"\xff" * 1_000_000) is None  # fill bytes only
    assert image_size(b"\xff\xd8" + b"\xff\xe0\x00\x02" * 100_000) is None  # empty segments
    assert image_size(b"\xff\xd8\xff\xe0\x00\x00") is None  # a zero length
    huge = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR" + struct.pack(">II", 2**32 - 1, 2**32 - 1)
    assert image_tokens(image_size(huge) or (0, 0)) == image_tokens((8_000, 8_000)) < 40_000


def _pdf(size: int, pages: int) -> bytes:
    body = b"".join(b"%d 0 obj << /Type /Page >> endobj\n" % i for i in range(pages))
    return b"%PDF-1.4\n" + body + b"%" * (size - len(body) - 9)


def test_a_large_pdf_carried_every_turn_is_scanned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    scans: list[int] = []
    scan = _media_tokens._scan_pages  # pyright: ignore[reportPrivateUsage]

    def counting(data: bytes) -> int | None:
        scans.append(len(data))
        return scan(data)

    monkeypatch.setattr(_media_tokens, "_scan_pages", counting)
    doc = _pdf(2_000_000, 7)
    history = [
        Message("user", [TextPart(f"turn {i}"), DocumentPart(doc, "application/pdf")])
        for i in range(1_000)
    ]
    first = request_chars(Request(history))
    text = sum(len(f"turn {i}") for i in range(1_000))
    assert request_chars(Request(history)) == first == text + 1_000 * 7 * 3_000 * 4
    assert scans == [len(doc)]


@pytest.mark.anyio
@pytest.mark.parametrize("size", [50_000, 500_000])
async def test_a_budget_estimate_per_turn_does_not_rescan_the_history(
    monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    # (A 50 KB PDF scans in ~0.15 ms: 1,000 of them in a history, 0.15 s an estimate.)
    scans: list[int] = []
    scan = _media_tokens._scan_pages  # pyright: ignore[reportPrivateUsage]
    monkeypatch.setattr(_media_tokens, "_scan_pages", lambda d: scans.append(1) or scan(d))
    doc = _pdf(size, 3)
    client = ScriptedClient([], provider="anthropic")
    history: list[Message] = []
    for turn in range(50):
        history.append(Message("user", [TextPart(str(turn)), DocumentPart(doc, "application/pdf")]))
        await estimate_input(client, Request(list(history)))
    assert len(scans) == 1


def test_pdfs_of_one_length_keep_their_own_counts() -> None:
    one, two = _pdf(100_000, 2), _pdf(100_000, 5)
    assert len(one) == len(two)
    assert (pdf_pages(one), pdf_pages(two), pdf_pages(one)) == (2, 5, 2)
    assert pdf_pages(b"%PDF-1.7\n" + b" " * 100_000) is None
