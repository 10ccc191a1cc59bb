"""Encoding cost of the web protocols, per event, as a ratio to `Worker.stream` alone.

Run: `uv run python benchmarks/bench_ui.py [--rounds 9] [--turns 20]`

The same scripted turn as bench_worker.py (3 requests, 4 tool calls, ~1,500 streamed deltas,
through `ScriptedClient`: no network noise) is read three ways: the bare `Worker.stream`, the
stream encoded as the Vercel AI SDK UI message stream (`to_vercel_stream`: SSE text, one
JSON object per chunk), and as AG-UI events (`to_agui_events`). Target (issue 39): <= 1.2x.
CPU time per turn, the three subjects measured in turn in each round; the ratio is each
round's own (encoded / bare), the median over rounds reported with its range.

`--floors` adds three subjects that show what any encoder of this shape pays: the Worker's
events passed through an async generator unchanged (`pass-through`), one SSE line per
event made by an f-string around the stdlib's JSON string escaper (`one f-string`), the
least a text delta's line costs, and the stream read in batches of the events ready now by
stepping each `__anext__` by hand (`hand-stepped`), what a batching encoder's reading costs.

`--instructions` counts CPU instructions instead of timing (valgrind's callgrind, in child
processes; needs `valgrind` on PATH): each subject runs in a process of its own, one turn to
warm up and then `--turns` turns inside `sys.call_tracing` (a C function of its own, which
callgrind's `--toggle-collect` counts alone: no start-up, no warm-up), with
`PYTHONHASHSEED=0` (the same dict and set layouts in every child): the count over the turns
is one turn's. Instruction counts do not depend on the machine's load: the load-free ratio
beside the timed one (slower: a few minutes per child under valgrind). `--check` counts each
subject at `--turns` and twice as many: the two per-turn counts agree when the count is steady.

`--over http` runs the Worker on `OpenAIChatClient` against a local server in a child
process (one per subject, so each replays the script from its start), as a served run does:
the encoding's share of a real run. The default, `ScriptedClient`, is the strictest
denominator: a Worker with no network under it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import types
from collections.abc import AsyncIterator, Generator
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_worker import lookup, script

from llm_worker import Worker
from llm_worker.messages import Origin
from llm_worker.testing import ScriptedClient
from llm_worker.ui import to_agui_events, to_vercel_stream

ORIGIN = Origin("scripted", "scripted-model")
# Set by `--over http`: each subject's Worker is made on its own client over its own server.
CLIENTS: dict[str, Any] = {}


def worker_for(subject: str) -> Worker:
    """A fresh Worker for one turn of `subject` (on its HTTP client, or a ScriptedClient)."""
    client = CLIENTS.get(subject)
    return Worker(client or ScriptedClient(script()), tools=[lookup])


async def bare() -> int:
    worker = worker_for("bare")
    n = 0
    async with worker.stream("go") as stream:
        async for _event in stream:
            n += 1
    return n


async def vercel() -> int:
    worker = worker_for("vercel")
    n = 0
    async with worker.stream("go") as stream:
        async for _text in to_vercel_stream(stream, message_id="m1", origin=ORIGIN):
            n += 1
    return n


async def agui() -> int:
    worker = worker_for("agui")
    n = 0
    async with worker.stream("go") as stream:
        async for _text in to_agui_events(stream, thread_id="t", run_id="r", origin=ORIGIN):
            n += 1
    return n


async def passing(events: AsyncIterator[object]) -> AsyncIterator[object]:
    async for event in events:
        yield event


async def lining(events: AsyncIterator[object]) -> AsyncIterator[str]:
    head = 'data: {"type":"text-delta","id":"text_0123456789abcdef_1","delta":'
    async for event in events:
        text = getattr(getattr(event, "delta", None), "text", "")
        yield f"{head}{encode_basestring(text)}}}\n\n"


async def pass_through() -> int:
    worker = worker_for("bare")
    n = 0
    async with worker.stream("go") as stream:
        async for _event in passing(stream):
            n += 1
    return n


async def one_line() -> int:
    worker = worker_for("bare")
    n = 0
    async with worker.stream("go") as stream:
        async for _text in lining(stream):
            n += 1
    return n


@types.coroutine
def _rest(step: Any, future: Any) -> Generator[Any, Any, Any]:
    """Await the rest of a coroutine stepped by hand that yielded `future` (asyncio's wait)."""
    while True:
        try:
            yield future
        except BaseException as exc:  # a cancellation: the coroutine's to handle
            try:
                future = step.throw(exc)
            except StopIteration as stop:
                return stop.value
            continue
        try:
            future = step.send(None)
        except StopIteration as stop:
            return stop.value


async def hand_stepped() -> int:
    worker = worker_for("bare")
    n = 0
    async with worker.stream("go") as stream:
        take = stream.__anext__
        while True:
            batch: list[object] = []
            while len(batch) < 256:
                step = take()
                try:
                    future = step.send(None)
                except StopIteration as stop:  # ready now
                    batch.append(stop.value)
                    continue
                except StopAsyncIteration:
                    return n + len(batch)
                # Not ready: an encoder would write the batch so far here, then wait.
                try:
                    batch.append(await _rest(step, future))
                except StopAsyncIteration:
                    return n + len(batch)
            n += len(batch)


async def cpu_of(fn: Any, turns: int) -> float:
    gc.collect()  # each subject starts from a clean heap, not with the previous one's garbage
    start = time.process_time()
    for _ in range(turns):
        await fn()
    return (time.process_time() - start) / turns


async def main(rounds: int, turns: int, floors: bool = False) -> None:
    events = await bare()
    counts = {"Vercel UI stream": await vercel(), "AG-UI": await agui()}
    subjects = {"Worker.stream": bare, "Vercel UI stream": vercel, "AG-UI": agui}
    if floors:
        floor = {"pass-through": pass_through, "one f-string": one_line}
        floor["hand-stepped"] = hand_stepped
        counts |= {name: await fn() for name, fn in floor.items()}
        subjects |= floor
    costs: dict[str, list[float]] = {name: [] for name in subjects}
    ratios: dict[str, list[float]] = {name: [] for name in counts}
    order = list(subjects)
    for n in range(rounds):
        # Interleaved, so a busy spell on the machine hits all subjects alike, and in a rotating
        # order: whichever subject runs right after another pays for some of its leftovers.
        turn = order[n % len(order) :] + order[: n % len(order)]
        cost = {name: await cpu_of(subjects[name], turns) for name in turn}
        for name, value in cost.items():
            costs[name].append(value)
        for name in counts:
            ratios[name].append(cost[name] / cost["Worker.stream"])
    base = statistics.median(costs["Worker.stream"])
    print(f"Worker.stream: {events} events, {base * 1e3:.2f} ms per turn (median)")
    for name, count in counts.items():
        ratio = statistics.median(ratios[name])
        extra = (statistics.median(costs[name]) - base) / events * 1e6
        print(
            f"{name}: {count} SSE events, {statistics.median(costs[name]) * 1e3:.2f} ms per turn, "
            f"ratio {ratio:.2f} (rounds {min(ratios[name]):.2f}-{max(ratios[name]):.2f}; "
            f"{extra:.2f} µs per Worker event)"
        )


SUBJECTS = {
    "Worker.stream": bare,
    "Vercel UI stream": vercel,
    "AG-UI": agui,
    "pass-through": pass_through,
    "one f-string": one_line,
    "hand-stepped": hand_stepped,
}


async def turns_of(fn: Any, turns: int) -> None:
    for _ in range(turns):
        await fn()


def run_only(subject: str, turns: int) -> None:
    """One subject's turns, after one turn to warm up (a child of `--instructions`).

    The measured turns run inside `sys.call_tracing`, the C function the parent's callgrind
    counts alone (`--toggle-collect`); with no tracer set it only calls its argument.
    """
    fn = SUBJECTS[subject]
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(fn())
        gc.collect()
        sys.call_tracing(loop.run_until_complete, (turns_of(fn, turns),))
    finally:
        loop.close()


def instructions_of(subject: str, turns: int) -> int:
    """The instructions `turns` turns of `subject` execute in a process of their own."""
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        "--toggle-collect=sys_call_tracing",
        sys.executable,
        __file__,
        "--only",
        subject,
        "--turns",
        str(turns),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from valgrind: {done.stderr[-500:]}")
    return int(found.group(1))


def count_instructions(turns: int, floors: bool, check: bool) -> None:
    """Per-turn instruction counts of each subject and their ratios to `Worker.stream`."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind on PATH")
    names = list(SUBJECTS) if floors else ["Worker.stream", "Vercel UI stream", "AG-UI"]
    per_turn: dict[str, float] = {}
    for name in names:
        per_turn[name] = instructions_of(name, turns) / turns
        if check:
            twice = instructions_of(name, 2 * turns) / (2 * turns)
            once = per_turn[name] / 1e6
            print(f"{name}: {once:.3f} M at {turns} turns, {twice / 1e6:.3f} M at {2 * turns}")
    base = per_turn["Worker.stream"]
    print(f"Worker.stream: {base / 1e6:.2f} M instructions per turn")
    for name in names[1:]:
        print(f"{name}: {per_turn[name] / 1e6:.2f} M per turn, ratio {per_turn[name] / base:.3f}")


async def over_http(rounds: int, turns: int) -> None:
    """`main` with each subject's Worker on the Chat client over its own local server."""
    from _harness import start_script_server

    from llm_worker.providers import OpenAIChatClient

    names = ("bare", "vercel", "agui")
    servers = [start_script_server("openai_chat", rounds * turns + 2) for _ in names]
    try:
        for name, server in zip(names, servers, strict=True):
            base_url = server.base_url + "/v1"
            CLIENTS[name] = OpenAIChatClient(model="m", base_url=base_url, api_key="k")
        await main(rounds, turns)
    finally:
        for client in CLIENTS.values():
            await client.aclose()
        for server in servers:
            server.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Encoding cost of the web protocols.")
    parser.add_argument("--rounds", type=int, default=9, help="rounds (the median is reported)")
    parser.add_argument("--turns", type=int, default=20, help="turns per subject and round")
    parser.add_argument(
        "--floors", action="store_true", help="add the pass-through and one-f-string subjects"
    )
    parser.add_argument(
        "--over", choices=["scripted", "http"], default="scripted", help="the Worker's client"
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions under valgrind (callgrind) instead of timing",
    )
    parser.add_argument(
        "--check", action="store_true", help="with --instructions: count at 2x turns as well"
    )
    parser.add_argument("--only", choices=list(SUBJECTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        run_only(args.only, args.turns)
    elif args.instructions:
        count_instructions(args.turns, args.floors, args.check)
    elif args.over == "scripted":
        asyncio.run(main(args.rounds, args.turns, args.floors))
    else:
        asyncio.run(over_http(args.rounds, args.turns))
