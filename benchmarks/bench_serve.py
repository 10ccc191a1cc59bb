"""Memory of many concurrent runs through `llm-worker serve`, per run, and whether it comes back.

Run: `uv run python benchmarks/bench_serve.py [--runs 1000] [--waves 3] [--protocol vercel]
[--client shared|per-request] [--resumable] [--settle 20] [--tracemalloc]`

Three processes, so that each one's memory is its own:

- a model server (a `WireServer` in a child process) answering every Chat Completions request
  with a 100-delta text answer: it sends the first half, holds the stream until it is told
  to go on (`POST /release`), then sends the rest;
- `llm-worker serve bench_serve:app` (the real command, uvicorn and all) whose factory makes a
  Worker per request on one shared `OpenAIChatClient` (opened in the factory's lifespan, as
  an application shares its client, with a pool large enough for every run to stream at
  once), or with `--client per-request` from a model string (`Worker("openai:m")`, the way
  of examples/web_chat: each Worker makes and closes its own client);
  `--limit-concurrency` is the default (1,000), raised to `--runs` past it; with
  `--resumable`, each run's events are kept in its log (and a finished run's for a late
  reconnect, 300 s);
- this process, the browsers: `--runs` chat requests at once over aiohttp, one connection
  each, every one reading its stream to the end.

A wave: the server's resident memory (`VmRSS` in /proc) with nothing running (`idle`, after
a warm-up wave and a `gc.collect()` in the server); the requests go out; once every stream
has shown its first text delta (every run is then mid-answer, its model stream held) the
server's `VmRSS` is `held` and its peak since idle (`VmHWM`, reset through `clear_refs`)
`peak`; the model server is released, every stream read to its end (each must end with its
protocol's last event), then the server collects garbage and reports `after` (and what
glibc's `malloc_trim` hands back of it: `trimmed`), and again `--settle` seconds later, once
the shared client has closed its idle connections to the model (aiohttp keeps them 15 s).
Per run = (peak - idle) / runs; "left" = `after` - `idle` (what the wave left behind). Waves
after the first show whether memory keeps growing (a leak) or is reused.

With `--tracemalloc` the server traces Python's allocations instead (slower): the same
points report the traced memory (`tracemalloc.get_traced_memory`), which counts only what
Python objects hold, free of the allocator's caching.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import json
import multiprocessing as mp
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

from llm_worker.ui._serve import LIMIT_CONCURRENCY

HERE = Path(__file__).parent
DELTAS = 100  # text deltas per answer; the model server holds each stream after half of them
WORDS = [f"word{i} " for i in range(DELTAS)]
MODEL_URL = "BENCH_SERVE_MODEL_URL"  # how the serve process finds the model server
PROBE = "BENCH_SERVE_PROBE"  # the file the serve process writes its memory to, on SIGUSR1
TRACE = "BENCH_SERVE_TRACEMALLOC"
OWN_CLIENT = "BENCH_SERVE_OWN_CLIENT"
POOL = 4096  # the shared client's connections to the model: every run streams at once


# -- the model server (a child process) ---------------------------------------------------------


def _answer_halves() -> tuple[bytes, bytes]:
    """A Chat Completions stream of DELTAS text deltas, split after half of them."""
    head = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = head | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    first = [chunk({"role": "assistant", "content": ""})]
    first += [chunk({"content": w}) for w in WORDS[: DELTAS // 2]]
    rest = [chunk({"content": w}) for w in WORDS[DELTAS // 2 :]]
    rest.append(chunk({}, "stop"))
    usage = {"prompt_tokens": 10, "completion_tokens": DELTAS, "total_tokens": DELTAS + 10}
    rest.append(b"data: " + json.dumps(head | {"choices": [], "usage": usage}).encode() + b"\n\n")
    rest.append(b"data: [DONE]\n\n")
    return b"".join(first), b"".join(rest)


def _model_server(port_queue: Any, stop: Any) -> None:
    from llm_worker.testing import RecordedRequest, WireResponse, WireServer

    first, rest = _answer_halves()

    async def main() -> None:
        gate = asyncio.Event()

        async def body(gate: asyncio.Event) -> AsyncGenerator[bytes]:
            yield first
            await gate.wait()
            yield rest

        def handler(request: RecordedRequest) -> WireResponse:
            nonlocal gate
            if request.path == "/release":  # every stream held so far goes on; new ones wait
                gate.set()
                gate = asyncio.Event()
                return WireResponse({"released": True}, content_type="application/json")
            return WireResponse(stream=body(gate))

        server = WireServer(handler=handler)
        await server.start()
        port_queue.put(server.port)
        while not await asyncio.to_thread(stop.wait, 0.5):
            server.requests.clear()  # it keeps every request: not what is measured
        await server.close()

    asyncio.run(main())


# -- the serve process's factory (`llm-worker serve bench_serve:app`) ---------------------------


@contextlib.asynccontextmanager
async def app() -> AsyncGenerator[Callable[[], Any]]:
    """The factory's lifespan: one shared client; SIGUSR1 writes this process's memory."""
    import tracemalloc

    from llm_worker import Worker
    from llm_worker.providers import OpenAIChatClient

    if os.environ.get(TRACE):
        tracemalloc.start()
    client = OpenAIChatClient(
        model="m", base_url=os.environ[MODEL_URL], api_key="k", max_concurrency=POOL
    )
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, _probe)
    try:
        if os.environ.get(OWN_CLIENT):  # examples/web_chat's way: the Worker owns a client
            yield lambda: Worker("openai:m", system="You are terse.")
        else:
            yield lambda: Worker(client, system="You are terse.")
    finally:
        loop.remove_signal_handler(signal.SIGUSR1)
        await client.aclose()


def _probe() -> None:
    import tracemalloc

    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0
    status = _status(os.getpid())
    with contextlib.suppress(OSError):  # glibc: what it would hand back if asked
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    trimmed = _status(os.getpid())["VmRSS"]
    report = {"rss": status["VmRSS"], "traced": traced // 1024, "trimmed": trimmed}
    Path(os.environ[PROBE]).write_text(json.dumps(report))


def _status(pid: int) -> dict[str, int]:
    """The process's memory fields from /proc, in KiB."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            out[name] = int(value.split()[0])
    return out


# -- the browsers (this process) ----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Serve:
    """`llm-worker serve bench_serve:app` in a child process, and its memory probe."""

    def __init__(self, protocol: str, model_url: str, runs: int, flags: argparse.Namespace) -> None:
        self.port = _free_port()
        self.probe = Path(f"/tmp/bench_serve_{os.getpid()}.json")
        env = os.environ | {MODEL_URL: model_url, PROBE: str(self.probe)}
        if flags.client == "per-request":
            env |= {OWN_CLIENT: "1", "OPENAI_BASE_URL": model_url, "OPENAI_API_KEY": "k"}
        command = [sys.executable, "-m", "llm_worker.cli", "serve", "bench_serve:app"]
        command += ["--protocol", protocol, "--port", str(self.port)]
        if runs > LIMIT_CONCURRENCY:
            command += ["--limit-concurrency", str(runs)]
        command += ["--resumable"] if flags.resumable else []
        # Its log goes to a file (a pipe left unread would block it), shown if it fails.
        self.log = self.probe.with_suffix(".log")
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                command, cwd=HERE, env=env, stdout=subprocess.DEVNULL, stderr=log
            )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/chat"

    async def ready(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                _reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.close()
                return
            if self.process.poll() is not None:
                raise RuntimeError(f"llm-worker serve exited:\n{self.log.read_text()}")
            await asyncio.sleep(0.1)
        raise TimeoutError("llm-worker serve did not start within 60 s")

    def status(self) -> dict[str, int]:
        return _status(self.process.pid)

    def reset_peak(self) -> None:
        Path(f"/proc/{self.process.pid}/clear_refs").write_text("5")

    async def collected(self) -> dict[str, int]:
        """The server's memory after a `gc.collect()` in it (KiB)."""
        self.probe.unlink(missing_ok=True)
        self.process.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(FileNotFoundError, ValueError):
                return json.loads(self.probe.read_text())
            await asyncio.sleep(0.05)
        raise TimeoutError("the server did not answer its memory probe")

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=15)
        self.probe.unlink(missing_ok=True)
        self.log.unlink(missing_ok=True)


def _request(protocol: str, wave: int, i: int) -> dict[str, Any]:
    if protocol == "vercel":
        part = {"type": "text", "text": "Say a hundred words."}
        message = {"id": f"u{i}", "role": "user", "parts": [part]}
        return {"id": f"chat-{wave}-{i}", "messages": [message]}
    message = {"id": f"u{i}", "role": "user", "content": "Say a hundred words."}
    thread = {"threadId": f"chat-{wave}-{i}", "runId": f"run-{wave}-{i}", "messages": [message]}
    return thread | {"tools": [], "context": [], "state": {}, "forwardedProps": {}}


MARKS = {
    "vercel": (b'"type":"text-delta"', b"data: [DONE]"),
    "ag-ui": (b'"type":"TEXT_MESSAGE_CONTENT"', b'"type":"RUN_FINISHED"'),
}


async def one_run(
    session: Any, url: str, body: dict[str, Any], protocol: str, started: Callable[[], None]
) -> bytes:
    """One browser's run: its stream read to the end; `started()` at its first text delta."""
    delta, last = MARKS[protocol]
    seen = b""
    first = True
    async with session.post(url, json=body) as response:
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {await response.text()}")
        async for chunk in response.content.iter_any():
            seen = seen[-400:] + chunk
            if first and delta in seen:
                first = False
                started()
    if last not in seen:
        raise RuntimeError(f"the stream ended without {last!r}: {seen[-200:]!r}")
    return seen


async def wave(
    serve: Serve, model_url: str, protocol: str, runs: int, number: int, *, settle: float = 0
) -> dict[str, float]:
    """One wave of `runs` concurrent runs; the server's memory at each point (KiB)."""
    import aiohttp

    idle = await serve.collected()
    serve.reset_peak()
    all_started = asyncio.Event()
    count = 0

    def started() -> None:
        nonlocal count
        count += 1
        if count == runs:
            all_started.set()

    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        wall = time.perf_counter()
        tasks = [
            asyncio.create_task(
                one_run(session, serve.url, _request(protocol, number, i), protocol, started)
            )
            for i in range(runs)
        ]
        waiting = asyncio.create_task(all_started.wait())
        # Every stream is held mid-answer until released: a run that ends first has failed.
        await asyncio.wait([waiting, *tasks], return_when=asyncio.FIRST_COMPLETED, timeout=600)
        for task in tasks:
            if task.done():
                tail = await task  # its exception, if it raised
                raise RuntimeError(f"a run ended before the model server was released: {tail!r}")
        if not all_started.is_set():
            raise TimeoutError("not every run started within 600 s")
        held = serve.status()
        async with session.post(model_url.removesuffix("/v1") + "/release", json={}) as answer:
            await answer.read()
        await asyncio.wait_for(asyncio.gather(*tasks), 600)
        wall = time.perf_counter() - wall
    after = await serve.collected()
    # The shared client keeps its idle connections to the model 15 s (aiohttp's keep-alive):
    # what is left once they are closed is what the runs left.
    await asyncio.sleep(settle)
    settled = await serve.collected()
    key = "traced" if os.environ.get(TRACE) else "rss"
    return {
        "idle": idle[key],
        "held": held["VmRSS"],
        "peak": held["VmHWM"],
        "after": after[key],
        "trimmed": after["trimmed"],
        "settled": settled[key],
        "wall": wall,
    }


def _mib(kib: float) -> str:
    return f"{kib / 1024:.1f} MiB"


async def main(args: argparse.Namespace) -> None:
    runs, waves, protocol, trace = args.runs, args.waves, args.protocol, args.tracemalloc
    own_client, settle = args.client == "per-request", args.settle
    ctx = mp.get_context("spawn")
    queue, stop = ctx.Queue(), ctx.Event()
    model = ctx.Process(target=_model_server, args=(queue, stop), daemon=True)
    model.start()
    if trace:
        os.environ[TRACE] = "1"
    serve: Serve | None = None
    try:
        model_url = f"http://127.0.0.1:{queue.get(timeout=30)}/v1"
        serve = Serve(protocol, model_url, runs, args)
        await serve.ready()
        await wave(serve, model_url, protocol, min(runs, 50), -1)  # warm-up: imports, caches
        print(f"{runs} concurrent runs through `llm-worker serve --protocol {protocol}`,", end=" ")
        client = "a client per request" if own_client else "one shared client"
        kept = ", resumable" if args.resumable else ""
        print(f"{DELTAS} deltas each, {client}{kept}; load {os.getloadavg()[0]:.2f}")
        per_run: list[float] = []
        for n in range(waves):
            m = await wave(serve, model_url, protocol, runs, n, settle=settle)
            if trace:
                per = (m["after"] - m["idle"]) / runs
                print(
                    f"wave {n + 1}: traced idle {_mib(m['idle'])}, after {_mib(m['after'])} "
                    f"(left {per:.2f} KiB per run; {_mib(m['settled'])} after {settle:g} s); "
                    f"RSS held {_mib(m['held'])}; {m['wall']:.1f} s"
                )
                continue
            per = (m["peak"] - m["idle"]) / runs
            per_run.append(per)
            print(
                f"wave {n + 1}: idle {_mib(m['idle'])}, held {_mib(m['held'])}, peak "
                f"{_mib(m['peak'])}, after {_mib(m['after'])} (trimmed {_mib(m['trimmed'])}): "
                f"{per / 1024:.3f} MiB per run, {_mib(m['after'] - m['idle'])} left, "
                f"{_mib(m['settled'] - m['idle'])} after {settle:g} s; {m['wall']:.1f} s"
            )
        if per_run:
            # The first wave's: a later one starts from memory the first left for reuse.
            print(f"per run (the worst wave): {max(per_run) / 1024:.3f} MiB")
    finally:
        if serve is not None:
            serve.close()
        stop.set()
        model.join(timeout=15)
        if model.is_alive():
            model.kill()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Memory of concurrent runs through serve.")
    parser.add_argument("--runs", type=int, default=1000, help="concurrent runs per wave")
    parser.add_argument("--waves", type=int, default=3, help="waves after the warm-up")
    parser.add_argument("--protocol", choices=("vercel", "ag-ui"), default="vercel")
    parser.add_argument("--tracemalloc", action="store_true", help="trace Python allocations")
    parser.add_argument(
        "--client",
        choices=("shared", "per-request"),
        default="shared",
        help="one client for all runs, or a Worker made from a model string per request",
    )
    parser.add_argument("--resumable", action="store_true", help="serve --resumable")
    parser.add_argument(
        "--settle", type=float, default=20.0, help="seconds before the last reading of a wave"
    )
    asyncio.run(main(parser.parse_args()))
