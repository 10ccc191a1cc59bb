"""Small real images and documents for tests: valid headers, a few bytes each."""

from __future__ import annotations

import struct
import zlib


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png(width: int = 1, height: int = 1) -> bytes:
    """A valid RGB PNG of one colour."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(rows))
        + _chunk(b"IEND", b"")
    )


JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xd9"
GIF = (
    b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00"
    b"\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
)
WEBP = (
    b"RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00/\x00\x00\x00\x10\x07\x10\x11\x11\x88"
    b"\x88\xfe\x07\x00"
)
HEIC = b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic"
BMP = b"BM" + b"\x00" * 60
PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


def screenshot(width: int = 1920, height: int = 1080, noise: int = 150_000) -> bytes:
    """A real PNG of `width` x `height` about `noise` bytes big (its first rows are noise).

    A screenshot's bytes say little about its tokens: this one is ~150 KB (200 KB as
    base64), which at 4 characters a token was ~50,000 "tokens"; Anthropic bills ~1,600.
    """
    import random

    stride = 1 + 3 * width
    rows = bytearray(stride * height)
    rows[1 : 1 + noise] = random.Random(width * height).randbytes(noise)
    for row in range(height):  # filter byte 0 at each row's start
        rows[row * stride] = 0
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(bytes(rows), 1))
        + _chunk(b"IEND", b"")
    )


def jpeg(width: int, height: int, exif: int = 20_000, segments: int = 0) -> bytes:
    """A baseline JPEG's segment stream declaring `width` x `height`, then filler scan data.

    The segments are real (SOI, APP0 JFIF, an `exif`-byte APP1, `segments` COM segments,
    DQT, SOF0, SOS): header readers walk it as they walk a camera's file; the scan data is
    not a picture (no test decodes it).
    """

    def segment(marker: int, body: bytes) -> bytes:
        return bytes((0xFF, marker)) + struct.pack(">H", len(body) + 2) + body

    parts = [b"\xff\xd8", segment(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")]
    parts.append(segment(0xE1, b"Exif\x00\x00" + b"\x00" * exif))
    parts += [segment(0xFE, b"c")] * segments
    parts.append(segment(0xDB, b"\x00" + bytes(range(1, 65))))
    parts.append(segment(0xC0, struct.pack(">BHHB", 8, height, width, 1) + b"\x01\x11\x00"))
    parts.append(segment(0xDA, b"\x01\x01\x00\x00\x3f\x00"))
    return b"".join(parts) + b"\x12\x34" * 500 + b"\xff\xd9"
