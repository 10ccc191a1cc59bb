"""The streams of the transport and peer benchmarks, and a bare asyncio server that plays them.

One server in a child process answers the four wire shapes: `POST …/chat/completions` (OpenAI
Chat Completions), `POST …/messages` (Anthropic), `POST …/responses` (OpenAI Responses) and
`POST …/models/<model>:streamGenerateContent?alt=sse` (Gemini). What it streams is named by the
request's model (the body's `model`; Gemini's is in the path), so that every SDK can ask for
it: `"<kind>-<n>-<pace_ms>"`, where kind is `text` (n text deltas) or `tool` (one tool call
whose arguments come in n fragments; not on Gemini, which sends a call whole), and pace_ms is
the wait between two events (0: the whole body in one write). Paced events go one per write,
so a client meets them one per network read.

The events are copied in shape from the recorded streams (tests/fixtures/recorded/): every
field a real chunk carries (ids, fingerprints, `obfuscation`, empty `logprobs`, Gemini's usage
in every chunk and its CRLF framing), not minimal ones: a parser pays for what it skips.
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


_PAD = ["NBbiCoB2yJyshvQ", "6b0tyCSq6HwaEOD", "f2KWFcSvQWpnGqG", "xIRR7cmTFdDcyLd", "n2jBlV5bR"]
_RESP_ID = "resp_087a1bffb8180cc4006912065042e08196a1a6445d62480120"
_MSG_ID = "msg_087a1bffb8180cc40069120650b3e08196921c90ad59e694eb"


def _response(status: str, output: list[Any], usage: Any) -> dict[str, Any]:
    """A Responses `response` object as `response.created` / `.completed` carry it."""
    return {
        "id": _RESP_ID, "object": "response", "created_at": 1762788944, "status": status,
        "background": False, "error": None, "incomplete_details": None, "instructions": None,
        "max_output_tokens": None, "max_tool_calls": None, "model": "gpt-4.1-nano-2025-04-14",
        "output": output, "parallel_tool_calls": True, "previous_response_id": None,
        "prompt_cache_key": None, "reasoning": {"effort": None, "summary": None},
        "safety_identifier": None, "service_tier": "default", "store": True,
        "temperature": 1.0, "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto", "tools": [], "top_logprobs": 0, "top_p": 1.0,
        "truncation": "disabled", "usage": usage, "user": None, "metadata": {},
    }  # fmt: skip


class _Typed:
    """Responses events: an `event:` line naming the type, then the `data:` line."""

    def __init__(self) -> None:
        self.out: list[bytes] = []

    def add(self, kind: str, **fields: Any) -> None:
        self.out.append(_sse({"type": kind, "sequence_number": len(self.out), **fields}, kind))


def responses_events(kind: str, n: int) -> list[bytes]:
    """An OpenAI Responses stream: n `output_text` deltas, or a function call in n pieces."""
    s = _Typed()
    s.add("response.created", response=_response("in_progress", [], None))
    s.add("response.in_progress", response=_response("in_progress", [], None))
    if kind == "text":
        item: dict[str, Any] = {"id": _MSG_ID, "type": "message", "status": "in_progress",
                                "content": [], "role": "assistant"}  # fmt: skip
        where = {"item_id": _MSG_ID, "output_index": 0, "content_index": 0}
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        s.add("response.output_item.added", output_index=0, item=item)
        s.add("response.content_part.added", **where, part=part)
        words = [_WORDS[i % len(_WORDS)] for i in range(n)]
        for i, word in enumerate(words):
            s.add("response.output_text.delta", **where, delta=word, logprobs=[],
                  obfuscation=_PAD[i % len(_PAD)])  # fmt: skip
        text = "".join(words)
        s.add("response.output_text.done", **where, text=text, logprobs=[])
        part = {**part, "text": text}
        s.add("response.content_part.done", **where, part=part)
        item = {**item, "status": "completed", "content": [part]}
    else:
        item = {"id": "fc_0687", "type": "function_call", "status": "in_progress",
                "arguments": "", "call_id": "call_1", "name": "lookup"}  # fmt: skip
        where = {"item_id": "fc_0687", "output_index": 0}
        s.add("response.output_item.added", output_index=0, item=item)
        pieces = _fragments(n)
        for i, piece in enumerate(pieces):
            s.add("response.function_call_arguments.delta", **where, delta=piece,
                  obfuscation=_PAD[i % len(_PAD)])  # fmt: skip
        arguments = "".join(pieces)
        s.add("response.function_call_arguments.done", **where, arguments=arguments)
        item = {**item, "status": "completed", "arguments": arguments}
    s.add("response.output_item.done", output_index=0, item=item)
    usage = {"input_tokens": 14, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": n, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 14 + n}  # fmt: skip
    s.add("response.completed", response=_response("completed", [item], usage))
    return s.out


def gemini_events(kind: str, n: int) -> list[bytes]:
    """A Gemini `alt=sse` stream of n text chunks, framed with CRLF as the API sends it.

    Every chunk is a whole `GenerateContentResponse` with its running `usageMetadata`, the
    model version and the response id (as in `usage_in_every_chunk`); the last has the finish.
    """
    if kind != "text":
        raise ValueError("Gemini sends a function call whole: no tool stream in pieces")
    out = []
    for i in range(n):
        candidate: dict[str, Any] = {
            "content": {"parts": [{"text": _WORDS[i % len(_WORDS)]}], "role": "model"},
            "index": 0,
        }
        if i == n - 1:
            candidate["finishReason"] = "STOP"
        usage = {"promptTokenCount": 18, "candidatesTokenCount": i + 1,
                 "totalTokenCount": 53 + i + 1,
                 "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 18}],
                 "thoughtsTokenCount": 35, "serviceTier": "standard"}  # fmt: skip
        chunk = {"candidates": [candidate], "usageMetadata": usage,
                 "modelVersion": "gemini-2.5-flash",
                 "responseId": "ru1garvBEoOiqtsP2fznmQw"}  # fmt: skip
        text = json.dumps(chunk, ensure_ascii=False, separators=(",", ": "))
        out.append(f"data: {text}\r\n\r\n".encode())
    return out


SHAPES = {
    "chat": chat_events,
    "anthropic": anthropic_events,
    "responses": responses_events,
    "gemini": gemini_events,
}
"""Each wire's stream maker, by the shape names of `_peer_subjects`."""


def shape_of(path: str) -> str:
    """The wire a request path speaks."""
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith("/responses"):
        return "responses"
    if ":streamGenerateContent" in path:
        return "gemini"
    return "chat"


@cache
def events(path: str, model: str) -> tuple[list[bytes], float]:
    """The events a request asks for, and the pause between two of them in seconds."""
    kind, n, pace = model.split("-")[:3]
    return SHAPES[shape_of(path)](kind, int(n)), int(pace) / 1000


def _model(path: str, body: dict[str, Any]) -> str:
    # Gemini names the model in the path: `/v1beta/models/<model>:streamGenerateContent`.
    if ":streamGenerateContent" in path:
        return path.rsplit("/", 1)[-1].split(":", maxsplit=1)[0]
    return str(body.get("model", "text-10-0"))


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
            await _answer(writer, *events(path, _model(path, body)))
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

    @property
    def pid(self) -> int:
        """The server process's id (to pin it to a CPU of its own)."""
        return self._process.pid

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
