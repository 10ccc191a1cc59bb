"""Peak memory of a client fed one enormous SSE line that never ends.

Run: `uv run python benchmarks/bench_long_line.py [--mb 300]`

A child process serves `data: xxxx…` (`--mb` megabytes, no line break) as a chunked
`text/event-stream`, generated on the fly so that the server holds no copy. The client (an
`OpenAIChatClient` with its default `max_event_bytes`, 16 MiB) reads it in this process. The
baseline is this process's peak RSS after a warm-up request that went through the same code
(imports, connection pool); the figure is the peak RSS after the long line, and the ratio
between the two. Also printed: the error, how long it took, how many bytes the server had
written when the client hung up.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import resource
import time
from typing import Any

import orjson

from llm_worker import Message, Request
from llm_worker.errors import LLMWorkerError
from llm_worker.providers import OpenAIChatClient

_PIECE = 64 * 1024
_SMALL = (
    b"".join(
        b"data: " + orjson.dumps(chunk) + b"\n\n"
        for chunk in (
            {"choices": [{"index": 0, "delta": {"content": "hi"}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}},
        )
    )
    + b"data: [DONE]\n\n"
)


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, sent: Any) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(
        int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length")
    )
    await reader.readexactly(length)
    size = int(lines[0].split()[1].split("/")[1])  # POST /<bytes>/v1/chat/completions
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    )
    pieces = [_SMALL] if size == 0 else _line(size)
    try:
        for piece in pieces:
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            sent.value += len(piece)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
    except ConnectionError:
        pass  # the client gave up: what it did is the point of the benchmark
    writer.close()


def _line(size: int) -> Any:
    yield b"data: "
    filler = b"x" * _PIECE
    for _ in range(size // _PIECE):
        yield filler


def _serve(port_queue: Any, sent: Any) -> None:
    async def main() -> None:
        server = await asyncio.start_server(
            lambda r, w: _answer(r, w, sent), "127.0.0.1", 0, limit=1 << 20
        )
        port_queue.put(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(main())


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


async def stream(base_url: str) -> tuple[int, str]:
    client = OpenAIChatClient(model="m", api_key="sk-bench-0123456789", base_url=base_url)
    received = 0
    try:
        async for _ in client.stream(Request([Message.user("hi")])):
            received += 1
        return received, "completed"
    except LLMWorkerError as exc:
        return received, f"{type(exc).__name__}: {exc}"
    finally:
        await client.aclose()


async def main(megabytes: int) -> None:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    sent = ctx.Value("q", 0)
    server = ctx.Process(target=_serve, args=(queue, sent), daemon=True)
    server.start()
    root = f"http://127.0.0.1:{queue.get(timeout=30)}"
    try:
        await stream(f"{root}/0/v1")  # warm-up: imports, pool, one whole small answer
        await stream(f"{root}/0/v1")
        baseline = peak_mb()
        sent.value = 0
        started = time.perf_counter()
        _, outcome = await stream(f"{root}/{megabytes * 1_000_000}/v1")
        elapsed = time.perf_counter() - started
        peak = peak_mb()
    finally:
        server.terminate()
    print(f"line: {megabytes} MB without a line break; outcome after {elapsed:.2f} s:")
    print(f"  {outcome[:240]}")
    print(f"server had written {sent.value / 1e6:.1f} MB when the client hung up")
    print(f"peak RSS: baseline {baseline:.1f} MB, after the line {peak:.1f} MB")
    print(f"  growth {peak - baseline:.1f} MB, ratio {peak / baseline:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=300, help="length of the line in MB")
    asyncio.run(main(parser.parse_args().mb))
