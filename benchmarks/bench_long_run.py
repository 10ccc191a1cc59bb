"""Per-turn cost of a long run: does the Worker's CPU per turn grow with the history?

Run: `uv run python benchmarks/bench_long_run.py [TURNS] [TRANSPORT]` (TURNS: 1000 by default)

One run of TURNS requests, one tool call per request, each tool returning 400 characters
(the history grows by two messages a turn). Per-turn CPU is `time.process_time()` between
consecutive requests (an on_message_send hook). A figure "at turn N" is the median over the
turns of a stretch ending at N: the last 50 turns for N = TURNS (`STRETCH`), the last half
for turns 10 and 100 (over a wire every other turn of it: see "body" below). A median of
fifty turns moves less with the machine's load than the least of ten did (the least of ten
is printed beside it, as `least`).

1. Over `ScriptedClient` (no network, usage given, so the script itself costs nothing per
   turn): target turn TURNS <= 1.3 x turn 10 (best of three runs).
2. Over each of the four wires, a `ScriptedModelServer` in a child process (so the client's
   CPU alone is measured): the request body must be built and serialized each turn (the
   whole history goes over the wire), so the Worker's per-turn CPU is set against that body's
   serialization alone: target turn TURNS <= 1.5 x serialization. The serialization is
   measured three ways:
   - "body": `client.build_body` + `orjson.dumps` of the previous turn's request as the
     client does it (`_body.encoded_request`), once in the hook of every other turn of the
     stretch (those turns, whose build it warmed, left out of the turns' median), the
     median: the same load, the same state of the caches as the turns' own builds;
   - "in the turn": the same serialization as the turn itself paid for it (the client's
     `_body.encoded_request` — build, encode and drop the body — timed inside that turn),
     the median over the stretch. (Until the review of P32C it timed `build_body` and the
     encoding apart, which left out the body's release, 5-12 % of it at 2,000 messages.)
   - "warm": best of 20 in a loop after the run (the figure earlier sessions reported:
     repeated on one body it gains from caches a turn does not have, and it swings with the
     load of the moment).
   The same request sent by the bare client (body, HTTP, the answer's events; best of 5)
   is shown beside it: the Worker's own share of a turn is the difference.

TRANSPORT (second argument): `httpx` or `aiohttp`; by default the library's default.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import statistics
import sys
import time
from typing import Any

import orjson

from llm_worker import Request, TextPart, ToolUsePart, Worker, tool
from llm_worker.events import UsageEvent
from llm_worker.hooks import MessageSendContext
from llm_worker.testing import ScriptedClient, ScriptedRequest, ScriptedResponse

WIRES = ("anthropic", "openai_chat", "openai_responses", "gemini")
RESULT = "r" * 400
TRANSPORT: dict[str, Any] = {}
USAGE = UsageEvent(input_tokens=100, output_tokens=10)


@tool
async def read(n: int) -> str:
    """Read page n."""
    return RESULT


def answer(index: int, turns: int) -> ScriptedResponse:
    if index >= turns - 1:
        return ScriptedResponse([TextPart("done")], usage=USAGE)
    return ScriptedResponse([ToolUsePart("", "read", {"n": index})], usage=USAGE)


SERIALIZING = [0.0]  # CPU spent in the clients' `encoded_request` (the body), so far


def timed(fn: Any) -> Any:
    """`fn`, adding its CPU to SERIALIZING."""

    def inner(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            SERIALIZING[0] += time.process_time() - start

    return inner


STRETCH = 50  # the turns the figure at the last turn is the median of


def stretch(turn: int) -> range:
    """The turns a figure at `turn` is the median of: the last STRETCH, at most half of them."""
    return range(turn - min(STRETCH, turn // 2) + 1, turn + 1)


class Clock:
    """Per-turn CPU, its serialization, and the requests at the turns measured."""

    def __init__(
        self, keep: set[int], client: Any = None, measured: set[int] | None = None
    ) -> None:
        self.last = time.process_time()
        self.serialized = SERIALIZING[0]
        # turn -> (the turn's CPU, what it spent serializing its request)
        self.turns: dict[int, tuple[float, float]] = {}
        self.keep = keep
        self.requests: dict[int, Request] = {}
        # At each hook in `measured` the previous request's body is serialized once, which
        # warms the caches for the build that follows: the turn starting there is left out
        # of the medians, so turns and bodies alternate in a stretch.
        self.client = client
        self.measured = measured or set()
        self.bodies: dict[int, float] = {}
        self.previous: Request | None = None

    def __call__(self, ctx: MessageSendContext) -> None:
        now = time.process_time()
        number = ctx.request_number
        if number > 1:
            self.turns[number - 1] = (now - self.last, SERIALIZING[0] - self.serialized)
        if number in self.measured and self.previous is not None:
            self.bodies[number] = self._body(self.previous)
        if number in self.keep:
            self.requests[number] = ctx.request
        self.previous = ctx.request  # its messages a plain list once sent
        self.serialized = SERIALIZING[0]
        self.last = time.process_time()  # the hook's own bookkeeping left out

    def _body(self, request: Request) -> float:
        from llm_worker.providers import _body

        start = time.process_time()
        _body.encoded_request(self.client.build_body, request)  # as the client encodes it
        return time.process_time() - start

    def median(self, turn: int) -> tuple[float, float]:
        """The median CPU of the stretch ending at `turn`, and of its serialization."""
        cells = [self.turns[t] for t in stretch(turn) if t in self.turns and t not in self.measured]
        return statistics.median(c[0] for c in cells), statistics.median(c[1] for c in cells)

    def body(self, turn: int) -> float:
        """The median serialization of the stretch's bodies, measured in the hooks."""
        return statistics.median(self.bodies[t] for t in stretch(turn) if t in self.bodies)

    def least(self, turn: int) -> float:
        """The least CPU of the ten turns up to `turn` (the figure earlier sessions gave)."""
        ten = range(max(turn - 9, 1), turn + 1)
        return min(self.turns[t][0] for t in ten if t in self.turns and t not in self.measured)


async def run(client: Any, turns: int, marks: tuple[int, ...], measure: bool = False) -> Clock:
    measured = {t for mark in marks for t in stretch(mark) if t % 2 == 0} if measure else set()
    clock = Clock(set(marks), client if measure else None, measured)
    worker = Worker(client, tools=[read], max_requests=turns + 1)
    worker.add_on_message_send_hook(clock)
    clock.last = time.process_time()
    result = await worker.run("read every page")
    assert result.requests == turns, result.requests
    return clock


async def scripted(turns: int, marks: tuple[int, ...]) -> None:
    best: dict[int, float] = {}
    least: dict[int, float] = {}
    for _ in range(3):
        client = ScriptedClient(lambda r: answer(r.index, turns))
        clock = await run(client, turns, marks)
        for mark in marks:
            best[mark] = min(best.get(mark, float("inf")), clock.median(mark)[0])
            least[mark] = min(least.get(mark, float("inf")), clock.least(mark))
    cells = ", ".join(f"turn {m}: {best[m] * 1e3:.3f} ms" for m in marks)
    ratio = best[marks[-1]] / best[marks[0]]
    old = least[marks[-1]] / least[marks[0]]
    print(
        f"ScriptedClient: {cells}; turn {marks[-1]} / turn {marks[0]} = {ratio:.2f} (<= 1.3)"
        f" (least of ten: {old:.2f})"
    )


def _serve(provider: str, turns: int, port_queue: Any, stop: Any) -> None:
    from llm_worker.testing import ScriptedModelServer

    async def main() -> None:
        def step(request: ScriptedRequest) -> ScriptedResponse:
            server.requests.clear()  # a thousand growing bodies would not fit the machine
            return answer(request.index, turns)

        server = ScriptedModelServer(provider, step, model="m")  # type: ignore[call-overload]
        await server.start()
        port_queue.put(server.port)
        await asyncio.to_thread(stop.wait)
        await server.close()

    asyncio.run(main())


async def round_trip(client: Any, request: Request) -> float:
    """The bare client's CPU for the same request: body, HTTP, the answer's events."""
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        async for _event in client.stream(request):
            pass
        best = min(best, time.process_time() - start)
    return best


def serialization(client: Any, request: Request) -> float:
    best = float("inf")
    for _ in range(20):
        start = time.process_time()
        orjson.dumps(client.build_body(request))
        best = min(best, time.process_time() - start)
    return best


async def wire(provider: str, turns: int, marks: tuple[int, ...]) -> None:
    from llm_worker import providers
    from llm_worker.providers import _body
    from llm_worker.testing import WIRE_PROVIDERS

    # The body as a client sends it: built, encoded and dropped in `encoded_request`, timed
    # where each client module calls it (the hook's own measure calls `_body`'s, untimed).
    # The clients' modules are imported first: `providers` loads them at first use.
    for class_name, _suffix in WIRE_PROVIDERS.values():
        getattr(providers, class_name)
    users: list[Any] = [
        module
        for name, module in list(sys.modules.items())
        if name.startswith("llm_worker.providers.")
        and getattr(module, "encoded_request", None) is _body.encoded_request
        and module is not _body
    ]
    assert users, "no client module sends through _body.encoded_request"
    for module in users:
        module.encoded_request = timed(_body.encoded_request)
    try:
        await _wire(providers, WIRE_PROVIDERS, provider, turns, marks)
    finally:
        for module in users:
            module.encoded_request = _body.encoded_request


async def _wire(
    providers: Any, wire_providers: Any, provider: str, turns: int, marks: tuple[int, ...]
) -> None:
    ctx = mp.get_context("spawn")
    queue, stop = ctx.Queue(), ctx.Event()
    process = ctx.Process(target=_serve, args=(provider, turns, queue, stop), daemon=True)
    process.start()
    try:
        port = queue.get(timeout=60)
        class_name, suffix = wire_providers[provider]
        cls = getattr(providers, class_name)
        async with cls(
            model="m", base_url=f"http://127.0.0.1:{port}{suffix}", api_key="k", **TRANSPORT
        ) as c:
            clock = await run(c, turns, marks, measure=True)
            cells = []
            for mark in marks:
                spent, in_turn = clock.median(mark)
                body = clock.body(mark)
                warm = serialization(c, clock.requests[mark])
                bare = await round_trip(c, clock.requests[mark])
                cells.append(
                    f"turn {mark}: {spent * 1e3:.2f} ms "
                    f"(body {body * 1e3:.2f} ms, {spent / body:.2f}x; in the turn "
                    f"{in_turn * 1e3:.2f} ms, {spent / in_turn:.2f}x; warm {warm * 1e3:.2f} ms, "
                    f"{spent / warm:.2f}x; least of ten {clock.least(mark) * 1e3:.2f} ms; "
                    f"bare client {bare * 1e3:.2f} ms)"
                )
        print(f"{provider} ({c.transport.transport}): " + "; ".join(cells))
    finally:
        stop.set()
        process.join(timeout=10)
        if process.is_alive():
            process.kill()


async def main(turns: int) -> None:
    marks = (*(m for m in (10, 100) if m < turns), turns)
    await scripted(turns, marks)
    for provider in WIRES:
        await wire(provider, turns, marks)


if __name__ == "__main__":
    if len(sys.argv) > 2:
        TRANSPORT["transport"] = sys.argv[2]
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000))
