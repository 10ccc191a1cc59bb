"""Images in requests: what building each provider's body costs for a 3.5 MB image.

Run: `uv run python benchmarks/bench_media.py [--runs 7] [--mb 3.5]`

For one PNG of `--mb` megabytes (under every provider's limit: Anthropic's 5 MB applies to
the base64 form), the best of `--runs` wall-clock times (`time.perf_counter`) of:

- `ImagePart.from_path` (read, detect the type) and the message's JSON round trip;
- each client's `build_body` for a request holding the image, then `orjson.dumps` of the body
  (what the transport sends);
- the baselines: `base64.b64encode` of the bytes and `orjson.dumps` of `{"data": ...}` — the
  least any client must do to put the image in a JSON body — and, for the round trip, that
  and back (`orjson.loads`, `binascii.a2b_base64`).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import struct
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import orjson

from llm_worker import ImagePart, Message, Request
from llm_worker.providers._anthropic_request import build_body as anthropic_body
from llm_worker.providers._gemini_request import build_body as gemini_body
from llm_worker.providers._openai_chat_request import build_chat_body
from llm_worker.providers._openai_responses_request import build_body as responses_body


def big_png(size: int) -> bytes:
    """A valid PNG header followed by `size` bytes of incompressible pixel data."""
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    body = b"IHDR" + header
    ihdr = struct.pack(">I", len(header)) + body + struct.pack(">I", zlib.crc32(body))
    filler = (bytes(range(256)) * (size // 256 + 1))[:size]
    return b"\x89PNG\r\n\x1a\n" + ihdr + filler


def round_trip(data: bytes) -> bytes:
    text = orjson.dumps({"data": base64.b64encode(data).decode()})
    return binascii.a2b_base64(orjson.loads(text)["data"], strict_mode=True)


def best(runs: int, step: Callable[[], object]) -> float:
    times: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--mb", type=float, default=3.5)
    args = parser.parse_args()
    data = big_png(int(args.mb * 1024 * 1024))
    path = Path(tempfile.mkdtemp()) / "big.png"
    path.write_bytes(data)
    image = ImagePart.from_path(path)
    request = Request([Message.user("What is this?", image)])
    rows = {
        "baseline: b64encode + orjson.dumps": lambda: orjson.dumps(
            {"data": base64.b64encode(data).decode()}
        ),
        "ImagePart.from_path": lambda: ImagePart.from_path(path),
        "baseline round trip: b64encode + dumps + loads + a2b_base64": lambda: round_trip(data),
        "message JSON round trip": lambda: Message.from_json(request.messages[0].to_json()),
        "anthropic body + dumps": lambda: orjson.dumps(anthropic_body(request, model="m")),
        "openai_chat body + dumps": lambda: orjson.dumps(build_chat_body(request, "m")),
        "openai_responses body + dumps": lambda: orjson.dumps(responses_body(request, model="m")),
        "gemini body + dumps": lambda: orjson.dumps(gemini_body(request, "gemini-2.5-flash")),
    }
    print(f"image: {len(data) / 1024 / 1024:.2f} MB, best of {args.runs}")
    for name, step in rows.items():
        print(f"| {name} | {best(args.runs, step) * 1000:.1f} ms |")


if __name__ == "__main__":
    main()
