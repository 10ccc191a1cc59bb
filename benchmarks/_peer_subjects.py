# pyright: reportMissingImports=false
# (the peers come from the `bench` group, which the default sync leaves out)
"""The subjects of `peers.py`, each measured in a fresh interpreter by running this file.

The raw baselines parse each `data:` payload with orjson and nothing more. `raw_aiohttp` and
`raw_httpx` are what a careful person would write by hand: the body bytes as they arrive,
split into lines with `bytes.split`. `raw_aiohttp_lines` and `raw_httpx_lines` use the
library's own line reader (`async for line in response.content`, `aiter_lines()`).

Run by peers.py as `python _peer_subjects.py SUBJECT SHAPE MODEL BASE_URL [--streams N]
[--serve] [--cpu C]`. A subject makes a stream factory (one stream per call, all sharing one
client and its connection pool); one whole stream warms it up, then it measures one stream
(or `--streams N` at once) and prints one JSON line. With `--serve` it prints `ready` after
the warm-up and then measures once per `go` line on stdin, a JSON line each, until stdin
ends: peers.py keeps every subject of a round alive so and takes their measurements in turn,
A B A B, each one next in time to the others'. Every subject uses its library's lightest
documented streaming call.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.metadata
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any

Factory = Callable[[], AsyncIterator[Any]]
Made = tuple[Factory, Callable[[], Awaitable[None]]]

BOTH = ("chat", "anthropic")
WIRES = ("chat", "anthropic", "responses", "gemini")
SHAPES: dict[str, tuple[str, ...]] = {
    "raw_aiohttp": WIRES,
    "raw_aiohttp_lines": WIRES,
    "raw_httpx": WIRES,
    "raw_httpx_lines": WIRES,
    "ours_aiohttp": WIRES,
    "ours_httpx": WIRES,
    "worker_aiohttp": WIRES,
    "worker_httpx": WIRES,
    # Built without transport=: what a plain install gets (aiohttp under asyncio).
    "ours_default": WIRES,
    "worker_default": WIRES,
    "openai_sdk": ("chat", "responses"),
    "google_genai": ("gemini",),
    "anthropic_sdk": ("anthropic",),
    "pydantic_ai": ("chat",),
    "openai_agents": ("chat",),
    "litellm": ("chat",),
}
# Agent loops would run the streamed tool call and ask again: measured on text only.
TEXT_ONLY = frozenset({"worker_aiohttp", "worker_httpx", "worker_default", "pydantic_ai",
                       "openai_agents"})  # fmt: skip

_CLIENT = (
    "from llm_worker.providers import OpenAIChatClient; OpenAIChatClient(model='m', api_key='k'"
)
IMPORTS: dict[str, str] = {
    "raw_aiohttp": "import aiohttp, orjson",
    "raw_aiohttp_lines": "import aiohttp, orjson",
    "raw_httpx": "import httpx, orjson",
    "raw_httpx_lines": "import httpx, orjson",
    "ours_aiohttp": f"import llm_worker; {_CLIENT}, transport='aiohttp')",
    "ours_httpx": f"import llm_worker; {_CLIENT}, transport='httpx')",
    "worker_aiohttp": f"from llm_worker import Worker; {_CLIENT}, transport='aiohttp')",
    "worker_httpx": f"from llm_worker import Worker; {_CLIENT}, transport='httpx')",
    "ours_default": f"import llm_worker; {_CLIENT})",
    "worker_default": f"from llm_worker import Worker; {_CLIENT})",
    "openai_sdk": "import openai; openai.AsyncOpenAI(api_key='k')",
    "anthropic_sdk": "import anthropic; anthropic.AsyncAnthropic(api_key='k')",
    "pydantic_ai": "import pydantic_ai, pydantic_ai.models.openai",
    "openai_agents": "import agents",
    "litellm": "import litellm",
    "google_genai": "import google.genai as genai; genai.Client(api_key='k')",
}
_DISTRIBUTIONS = ("aiohttp", "httpx", "openai", "anthropic", "pydantic-ai-slim", "openai-agents",
                  "litellm", "google-genai", "orjson")  # fmt: skip


def versions() -> str:
    found = []
    for name in _DISTRIBUTIONS:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return ", ".join(found)


def _path(shape: str, model: str) -> str:
    if shape == "gemini":
        return f"/v1beta/models/{model}:streamGenerateContent?alt=sse"
    return {"anthropic": "/v1/messages", "responses": "/v1/responses"}.get(
        shape, "/v1/chat/completions"
    )


def _body(shape: str, model: str) -> bytes:
    body: dict[str, Any] = {"model": model, "stream": True,
                            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    if shape == "anthropic":
        body["max_tokens"] = 1024
    elif shape == "responses":
        body = {"model": model, "stream": True, "input": "hi"}
    elif shape == "gemini":
        body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    return json.dumps(body).encode()


async def raw_aiohttp(base: str, shape: str, model: str, pool: int) -> Made:
    import aiohttp
    import orjson

    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=pool))
    url, body = base + _path(shape, model), _body(shape, model)
    headers = {"content-type": "application/json"}

    async def stream() -> AsyncIterator[Any]:
        async with session.post(url, data=body, headers=headers) as response:
            rest = b""
            while chunk := await response.content.readany():
                *lines, rest = (rest + chunk).split(b"\n")
                for line in lines:
                    if line.startswith(b"data:"):
                        data = line[5:].strip()
                        if data and data != b"[DONE]":
                            yield orjson.loads(data)

    return stream, session.close


async def raw_aiohttp_lines(base: str, shape: str, model: str, pool: int) -> Made:
    import aiohttp
    import orjson

    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=pool))
    url, body = base + _path(shape, model), _body(shape, model)
    headers = {"content-type": "application/json"}

    async def stream() -> AsyncIterator[Any]:
        async with session.post(url, data=body, headers=headers) as response:
            async for line in response.content:
                if line.startswith(b"data:"):
                    data = line[5:].strip()
                    if data and data != b"[DONE]":
                        yield orjson.loads(data)

    return stream, session.close


async def raw_httpx_lines(base: str, shape: str, model: str, pool: int) -> Made:
    import httpx
    import orjson

    limits = httpx.Limits(max_connections=pool, max_keepalive_connections=pool)
    client = httpx.AsyncClient(timeout=600, limits=limits)
    url, body = base + _path(shape, model), _body(shape, model)

    async def stream() -> AsyncIterator[Any]:
        async with client.stream("POST", url, content=body) as response:
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    data = line[5:].strip()
                    if data and data != "[DONE]":
                        yield orjson.loads(data)

    return stream, client.aclose


async def raw_httpx(base: str, shape: str, model: str, pool: int) -> Made:
    import httpx
    import orjson

    limits = httpx.Limits(max_connections=pool, max_keepalive_connections=pool)
    client = httpx.AsyncClient(timeout=600, limits=limits)
    url, body = base + _path(shape, model), _body(shape, model)

    async def stream() -> AsyncIterator[Any]:
        async with client.stream("POST", url, content=body) as response:
            rest = b""
            async for chunk in response.aiter_bytes():
                *lines, rest = (rest + chunk).split(b"\n")
                for line in lines:
                    if line.startswith(b"data:"):
                        data = line[5:].strip()
                        if data and data != b"[DONE]":
                            yield orjson.loads(data)

    return stream, client.aclose


def _ours(base: str, shape: str, model: str, pool: int, transport: Any) -> Any:
    from llm_worker.providers import (
        AnthropicClient,
        GeminiClient,
        OpenAIChatClient,
        OpenAIResponsesClient,
        RetryPolicy,
    )

    options: dict[str, Any] = {"api_key": "k", "retry": RetryPolicy.disabled(),
                               "transport": transport, "max_concurrency": pool}  # fmt: skip
    if shape == "anthropic":
        return AnthropicClient(model=model, base_url=base, **options)
    if shape == "gemini":
        return GeminiClient(model=model, base_url=base + "/v1beta", **options)
    if shape == "responses":
        return OpenAIResponsesClient(model=model, base_url=base + "/v1", **options)
    return OpenAIChatClient(model=model, base_url=base + "/v1", **options)


async def ours(base: str, shape: str, model: str, pool: int, transport: str | None) -> Made:
    from llm_worker import Message, Request

    client = _ours(base, shape, model, pool, transport)
    request = Request([Message.user("hi")])
    return (lambda: client.stream(request)), client.aclose


async def worker(base: str, shape: str, model: str, pool: int, transport: str | None) -> Made:
    from llm_worker import Worker

    client = _ours(base, shape, model, pool, transport)

    # The RunStream itself, as `ours` gives the client's stream itself (a wrapping generator
    # would add its own cost per event); read to its end, its run is over and closed.
    return (lambda: Worker(client).stream("hi")), client.aclose


async def openai_sdk(base: str, shape: str, model: str, pool: int) -> Made:
    import openai

    client = openai.AsyncOpenAI(base_url=base + "/v1", api_key="k", max_retries=0)

    async def stream() -> AsyncIterator[Any]:
        messages: Any = [{"role": "user", "content": "hi"}]
        chunks = await client.chat.completions.create(model=model, messages=messages, stream=True)
        async for chunk in chunks:
            yield chunk

    async def responses() -> AsyncIterator[Any]:
        events = await client.responses.create(model=model, input="hi", stream=True)
        async for event in events:
            yield event

    return (responses if shape == "responses" else stream), client.close


async def google_genai(base: str, shape: str, model: str, pool: int) -> Made:
    import google.genai as genai  # noqa: PLR0402 (pyright resolves the namespace package only so)
    from google.genai import types

    options = types.HttpOptions(base_url=base, api_version="v1beta")
    client = genai.Client(api_key="k", http_options=options)

    async def stream() -> AsyncIterator[Any]:
        chunks = await client.aio.models.generate_content_stream(model=model, contents="hi")
        async for chunk in chunks:
            yield chunk

    return stream, client.aio.aclose


async def anthropic_sdk(base: str, shape: str, model: str, pool: int) -> Made:
    import anthropic

    client = anthropic.AsyncAnthropic(base_url=base, api_key="k", max_retries=0)

    async def stream() -> AsyncIterator[Any]:
        messages: Any = [{"role": "user", "content": "hi"}]
        events = await client.messages.create(
            model=model, max_tokens=1024, messages=messages, stream=True
        )
        async for event in events:
            yield event

    return stream, client.close


async def pydantic_ai(base: str, shape: str, model: str, pool: int) -> Made:
    from pydantic_ai import Agent
    from pydantic_ai.models import openai as models
    from pydantic_ai.providers.openai import OpenAIProvider

    cls: Any = getattr(models, "OpenAIChatModel", None) or getattr(models, "OpenAIModel")  # noqa: B009
    provider = OpenAIProvider(base_url=base + "/v1", api_key="k")
    agent = Agent(cls(model, provider=provider))

    async def stream() -> AsyncIterator[Any]:
        async with agent.run_stream("hi") as result:
            async for text in result.stream_text(delta=True):
                yield text

    return stream, _nothing


async def openai_agents(base: str, shape: str, model: str, pool: int) -> Made:
    import openai
    from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled

    set_tracing_disabled(True)
    client = openai.AsyncOpenAI(base_url=base + "/v1", api_key="k", max_retries=0)
    llm = OpenAIChatCompletionsModel(model=model, openai_client=client)
    agent = Agent(name="bench", instructions="Answer.", model=llm)

    async def stream() -> AsyncIterator[Any]:
        result = Runner.run_streamed(agent, "hi")
        async for event in result.stream_events():
            yield event

    return stream, client.close


async def litellm(base: str, shape: str, model: str, pool: int) -> Made:
    import litellm as lib

    messages = [{"role": "user", "content": "hi"}]

    async def stream() -> AsyncIterator[Any]:
        response: Any = await lib.acompletion(
            model="openai/" + model, api_base=base + "/v1", api_key="k", messages=messages,
            stream=True, num_retries=0,
        )  # fmt: skip
        async for chunk in response:
            yield chunk

    return stream, _nothing


async def _nothing() -> None:
    return None


async def make(subject: str, base: str, shape: str, model: str, pool: int) -> Made:
    if subject.startswith(("ours_", "worker_")):
        kind, transport = subject.split("_")
        chosen = None if transport == "default" else transport  # default: no transport=
        return await (ours if kind == "ours" else worker)(base, shape, model, pool, chosen)
    maker = globals()[subject]
    return await maker(base, shape, model, pool)


def _rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() // 1024


def _counters() -> tuple[float, float, int, int, int]:
    """CPU and wall clocks, minor page faults, context switches, GC passes: one reading."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    passes = sum(generation["collections"] for generation in gc.get_stats())
    return (time.process_time(), time.perf_counter(), usage.ru_minflt,
            usage.ru_nvcsw + usage.ru_nivcsw, passes)  # fmt: skip


async def single(factory: Factory, n: int) -> dict[str, float]:
    """One measured stream read to its end: per event CPU and wall, and what disturbed it."""
    before = _counters()
    items = 0
    async for _ in factory():
        items += 1
    cpu, wall, faults, switches, passes = (a - b for a, b in zip(_counters(), before, strict=True))
    return {"cpu_us": cpu / n * 1e6, "wall_us": wall / n * 1e6, "items": items,
            "minflt": faults, "switches": switches, "gc": passes}  # fmt: skip


async def many(factory: Factory, n: int, streams: int) -> dict[str, float]:
    """`streams` streams at once; `kib` counts only in a process's first measurement."""
    firsts: list[float] = []
    # Every subject starts its streams from a collected heap: where the collector's counters
    # happen to stand after the warm-up (not the subject's work) would otherwise decide
    # whether 1,000 streams in flight take one full pass or two (~80 ms, 0.4 µs an event).
    gc.collect()
    start = time.perf_counter()

    async def one() -> None:
        seen = False
        async for _ in factory():
            if not seen:
                firsts.append(time.perf_counter() - start)
                seen = True

    rss = _rss_kib()
    cpu = time.process_time()
    await asyncio.gather(*(one() for _ in range(streams)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cuts = statistics.quantiles(firsts, n=100)
    return {"cpu_us": cpu / (n * streams) * 1e6, "ttfe_p50": cuts[49] * 1000,
            "ttfe_p99": cuts[98] * 1000, "wall_s": wall, "kib": (peak - rss) / streams}  # fmt: skip


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("subject", choices=list(SHAPES))
    parser.add_argument("shape", choices=WIRES)
    parser.add_argument("model")
    parser.add_argument("base_url")
    parser.add_argument("--streams", type=int, default=0)
    parser.add_argument("--serve", action="store_true", help="one measurement per `go` line")
    parser.add_argument("--cpu", type=int, default=None, help="run on this CPU only")
    args = parser.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    n = int(args.model.split("-")[1])
    pool = max(args.streams, 10)
    factory, close = await make(args.subject, args.base_url, args.shape, args.model, pool)
    # The warm-up is one whole stream of the measured client: imports, code paths, its pooled
    # connection, and the memory a stream of this size touches (the allocator's arenas and
    # glibc's adaptive mmap threshold), so that no measurement pays a first touch.
    async for _ in factory():
        pass
    measure = (
        partial(many, factory, n, args.streams) if args.streams else partial(single, factory, n)
    )
    if args.serve:
        print("ready", flush=True)
        # Blocking reads: between two measurements this process waits, using no CPU, while
        # the other subjects of the round take their turn.
        while sys.stdin.readline().strip() == "go":
            print(json.dumps(await _with_rss(measure())), flush=True)
    else:
        print(json.dumps(await _with_rss(measure())))
    await close()


async def _with_rss(measured: Awaitable[dict[str, float]]) -> dict[str, float]:
    out = await measured
    out["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


if __name__ == "__main__":
    asyncio.run(main())
