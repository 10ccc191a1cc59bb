"""The streams of the transport and peer benchmarks, and a bare asyncio server that plays them.

One server in a child process answers both wire shapes: `POST …/chat/completions` (OpenAI Chat
Completions) and `POST …/messages` (Anthropic). What it streams is named by the request's
`model`, so that every SDK can ask for it: `"<kind>-<n>-<pace_ms>"`, where kind is `text` (n
text deltas) or `tool` (one tool call whose arguments come in n fragments), and pace_ms is the
wait between two events (0: the whole body in one write). Paced events go one per write, so a
client meets them one per network read.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
from dataclasses import dataclass
from functools import cache
from typing import Any

_WORDS = ["The ", "pelican ", "glides ", "over ", "the ", "bay, ", "scooping ", "fish — ", "😄 "]


def _sse(data: dict[str, Any], event: str | None = None) -> bytes:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


def _chat(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return _sse(
        {
            "id": "chatcmpl-C2QD1kGWsTW5OWiqAtOSFEAOfPfQH",
            "object": "chat.completion.chunk",
            "created": 1754693439,
            "model": "gpt-4o-2024-08-06",
            "system_fingerprint": "fp_07871e2ad8",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
    )


def chat_events(kind: str, n: int) -> list[bytes]:
    """A Chat Completions stream: n text deltas, or one tool call in n argument fragments."""
    out = [_chat({"role": "assistant", "content": ""})]
    if kind == "text":
        out += [_chat({"content": _WORDS[i % len(_WORDS)]}) for i in range(n)]
        finish = "stop"
    else:
        call = {"index": 0, "id": "call_1", "type": "function"}
        out.append(
            _chat({"tool_calls": [{**call, "function": {"name": "lookup", "arguments": ""}}]})
        )
        out += [
            _chat({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})
            for part in _fragments(n)
        ]
        finish = "tool_calls"
    out.append(_chat({}, finish))
    usage = {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": 10 + n}
    out.append(_sse({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                     "model": "gpt-4o", "choices": [], "usage": usage}))  # fmt: skip
    out.append(b"data: [DONE]\n\n")
    return out


def anthropic_events(kind: str, n: int) -> list[bytes]:
    """An Anthropic Messages stream: n text deltas, or one tool_use in n JSON fragments."""
    message = {
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }  # fmt: skip
    out = [_sse({"type": "message_start", "message": message}, "message_start")]
    if kind == "text":
        block: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": _WORDS[i % len(_WORDS)]} for i in range(n)]
        stop = "end_turn"
    else:
        block = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": part} for part in _fragments(n)]
        stop = "tool_use"
    start = {"type": "content_block_start", "index": 0, "content_block": block}
    out.append(_sse(start, "content_block_start"))
    out += [
        _sse({"type": "content_block_delta", "index": 0, "delta": d}, "content_block_delta")
        for d in deltas
    ]
    out.append(_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
    delta = {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
             "usage": {"output_tokens": n}}  # fmt: skip
    out.append(_sse(delta, "message_delta"))
    out.append(_sse({"type": "message_stop"}, "message_stop"))
    return out


def _fragments(n: int) -> list[str]:
    """`{"key": "xxxx…"}` cut into n pieces."""
    text = '{"key": "' + "k" * max(1, 4 * n - 11) + '"}'
    size = -(-len(text) // n)
    return [text[i : i + size] for i in range(0, len(text), size)]


@cache
def events(path: str, model: str) -> tuple[list[bytes], float]:
    """The events a request asks for, and the pause between two of them in seconds."""
    kind, n, pace = model.split("-")[:3]
    shape = anthropic_events if path.endswith("/messages") else chat_events
    return shape(kind, int(n)), int(pace) / 1000


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1].split("?")[0]
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            body = json.loads(await reader.readexactly(length)) if length else {}
            await _answer(writer, *events(path, str(body.get("model", "text-10-0"))))
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _answer(writer: asyncio.StreamWriter, items: list[bytes], pace: float) -> None:
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    if pace:
        for item in items:
            writer.write(b"%x\r\n%s\r\n" % (len(item), item))
            await writer.drain()
            await asyncio.sleep(pace)
    else:
        body = b"".join(items)
        writer.write(b"%x\r\n%s\r\n" % (len(body), body))
    writer.write(b"0\r\n\r\n")
    await writer.drain()


def _serve(port_queue: Any, stop: Any) -> None:
    async def main() -> None:
        server = await asyncio.start_server(_handle, "127.0.0.1", 0, backlog=4096)
        port_queue.put(server.sockets[0].getsockname()[1])
        await asyncio.to_thread(stop.wait)
        server.close()

    asyncio.run(main())


@dataclass
class Server:
    """The server's child process; `base_url` is its root (add `/v1` for OpenAI clients)."""

    base_url: str
    _process: Any
    _stop: Any

    def close(self) -> None:
        self._stop.set()
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.kill()


def start() -> Server:
    """Start the server in a child process (its CPU is not the client's)."""
    ctx = mp.get_context("spawn")
    queue, stop = ctx.Queue(), ctx.Event()
    process = ctx.Process(target=_serve, args=(queue, stop), daemon=True)
    process.start()
    port = queue.get(timeout=30)
    return Server(f"http://127.0.0.1:{port}", process, stop)
