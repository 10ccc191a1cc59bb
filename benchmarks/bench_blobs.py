"""Large tool outputs: promotion + summary + store, and inspect of a line range.

Run: `uv run python benchmarks/bench_blobs.py [--runs 3] [--mb 100] [--entries 1000000]
[--only fs|s3]`

The stores: `FsBlobStore` on the local disk, and `ObjectBlobStore` on moto's S3 server
(started here on 127.0.0.1, in its own process, so its memory is not counted). For S3,
`fetched` is what one `inspect` call downloads: the index document plus every ranged read.

Each measurement runs in a fresh child process, so that its memory figure is its own:

- time: wall clock (`time.perf_counter`) of the step; the best of `--runs`;
- peak: the process's peak resident memory during the step (Linux `VmHWM`, reset through
  `/proc/self/clear_refs` just before the step) minus its resident memory before the content
  was built, as a multiple of the content's size. For a store it counts the content itself
  (1.0x at least) and every byte the step holds beyond it (parsed JSON, copies, buffers); for
  inspect, what reading the blob file costs, as a multiple of the file's size. The worst of
  `--runs`.

Baselines, measured the same way in the same run: for text, encoding it and writing it with
fsync (the least any store does); for the JSON array, `orjson.loads` (the usual way to check
that a string is JSON) and the same write. For inspect, the stdlib way to read lines
500000-500050 of a file (`itertools.islice` over the opened file), and `orjson.loads` of the
whole file then a slice for entries 500000..500050 of the array.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

LINE = (
    "2026-01-01T00:00:00Z INFO worker-{:07d} request handled in 12 ms status=200 path=/api/items\n"
)


def rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(field)


def release_free_memory() -> None:
    gc.collect()
    # Without glibc, the figures include memory freed but not handed back.
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def make_text(megabytes: int) -> str:
    lines = megabytes * 1_000_000 // len(LINE.format(0))
    blocks = [
        "".join(LINE.format(i) for i in range(start, min(start + 10_000, lines)))
        for start in range(0, lines, 10_000)
    ]
    return "".join(blocks)


def make_array(entries: int) -> str:
    chunks = []
    for start in range(0, entries, 10_000):
        rows = range(start, min(start + 10_000, entries))
        chunks.append(
            ",".join(
                f'{{"id":{i},"name":"item {i}","tags":["a","b"],"score":{i / 7:.6f}}}' for i in rows
            )
        )
    return "[" + ",".join(chunks) + "]"


def measure(step: Callable[[], Any], size: int, baseline_kib: int) -> dict[str, float]:
    release_free_memory()
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    start = time.perf_counter()
    step()
    seconds = time.perf_counter() - start
    peak = rss_kib("VmHWM") - baseline_kib
    return {"seconds": seconds, "peak_x": peak * 1024 / size}


# -- the steps, each run in a child ------------------------------------------------------------


def child(case: str, megabytes: int, entries: int, folder: str) -> dict[str, float]:
    import anyio
    import orjson

    from llm_worker.blobs import FsBlobStore, OutputPolicy, StoredOutput, externalize

    if case.startswith("s3-inspect"):
        return s3_inspect_case(case, folder)
    if case.startswith("inspect"):
        return inspect_case(case, folder)
    s3 = case.startswith("s3-")
    case = case.removeprefix("s3-")
    store = s3_store(folder) if s3 else FsBlobStore(folder)
    # Warm up (imports, the worker thread) so that the figures are the step's own.
    warm = make_text(1) if case.startswith("text") else make_array(10_000)
    warm_store = s3_store(folder + "-warm-up") if s3 else FsBlobStore(Path(folder) / "warm-up")
    anyio.run(externalize, warm, warm_store, OutputPolicy())
    del warm
    release_free_memory()
    baseline = rss_kib("VmRSS")
    content = make_text(megabytes) if case.startswith("text") else make_array(entries)
    size = len(content.encode())

    def ours() -> None:
        out = anyio.run(externalize, content, store, OutputPolicy())
        assert isinstance(out, StoredOutput)
        assert len(out.summary.encode()) <= 400

    def raw() -> None:
        if case == "array-raw":
            orjson.loads(content)
        with open(Path(folder) / "raw.out", "wb") as file:
            file.write(content.encode())
            file.flush()
            os.fsync(file.fileno())

    result = measure(raw if case.endswith("-raw") else ours, size, baseline)
    result["size_mb"] = size / 1e6
    return result


def inspect_case(case: str, folder: str) -> dict[str, float]:
    import itertools

    import anyio
    import orjson

    from llm_worker.blobs import FsBlobStore, InspectTool

    text = case.startswith("inspect-lines")
    blob = next(p for p in Path(folder).iterdir() if p.suffix == (".txt" if text else ".json"))

    def raw() -> None:
        if text:
            with blob.open(encoding="utf-8", newline="") as file:
                rows = list(itertools.islice(file, 499_999, 500_050))
            assert rows[0] == LINE.format(499_999)
        else:
            rows = orjson.loads(blob.read_bytes())[500_000:500_050]
        assert len(rows) == 50 + text

    tool = InspectTool(FsBlobStore(folder))
    selector = "lines:500000-500050" if text else "slice:500000..500050"
    args = json.dumps({"blob_id": blob.stem, "selector": selector})

    def ours() -> None:
        out = anyio.run(tool.execute, args)
        first, last = (
            (LINE.format(499_999), LINE.format(500_049))
            if text
            else ('"id":500000,', '"id":500049,')
        )
        assert first in out + "\n"
        assert last in out + "\n"

    step = raw if case.endswith("-raw") else ours
    step()  # warm up: imports, the page cache
    release_free_memory()
    size = blob.stat().st_size
    result = measure(step, size, rss_kib("VmRSS"))
    result["size_mb"] = size / 1e6
    return result


# -- S3 (moto) ---------------------------------------------------------------------------------

BUCKET = "bench-blobs"


def s3_store(where: str) -> Any:
    """An `ObjectBlobStore` on moto; `where` is `endpoint|prefix`."""
    from llm_worker.blobs import ObjectBlobStore

    endpoint, prefix = where.split("|")
    return ObjectBlobStore.from_url(
        f"s3://{BUCKET}/{prefix}",
        endpoint=endpoint,
        region="us-east-1",
        access_key_id="bench",
        secret_access_key="bench",
        client_options={"allow_http": True, "timeout": "120s"},
    )


def s3_inspect_case(case: str, where: str) -> dict[str, float]:
    import anyio
    import obstore

    from llm_worker.blobs import InspectTool

    text = case == "s3-inspect-lines"
    store = s3_store(where)
    fetched = [0]
    read_range, blob_index = store.read_range, store.blob_index

    async def counted_range(*args: Any) -> Any:
        async for chunk in read_range(*args):
            fetched[0] += len(chunk)
            yield chunk

    async def counted_index(blob_id: str) -> Any:
        index = await blob_index(blob_id)
        fetched[0] += len(index.to_json()) if index is not None else 0
        return index

    store.read_range, store.blob_index = counted_range, counted_index
    suffix = ".txt" if text else ".json"
    names = [m["path"] for batch in obstore.list(store._store) for m in batch]
    blob_id = next(n for n in names if n.endswith(suffix)).removesuffix(suffix)
    selector = "lines:500000-500050" if text else "slice:500000..500050"
    args = json.dumps({"blob_id": blob_id, "selector": selector})
    tool = InspectTool(store)

    def ours() -> None:
        fetched[0] = 0
        out = anyio.run(tool.execute, args)
        first, last = (
            (LINE.format(499_999), LINE.format(500_049))
            if text
            else ('"id":500000,', '"id":500049,')
        )
        assert first in out + "\n"
        assert last in out + "\n"

    ours()  # warm up: imports, the connection
    # The first call also counts the index's tail against its count; a later one of the
    # same tool (a model paging through the output) does not.
    first = fetched[0] / 1024
    release_free_memory()
    result = measure(ours, 1 << 20, rss_kib("VmRSS"))
    result["fetched_kib"] = fetched[0] / 1024
    result["first_fetched_kib"] = first
    del result["peak_x"]
    return result


class Moto:
    """moto's S3 server in its own process on 127.0.0.1, with the benchmark's bucket."""

    def __init__(self) -> None:
        import re
        import urllib.request

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", "0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:  # its first lines say where it listens
            found = re.search(rb"Running on (http://127\.0\.0\.1:\d+)", raw)
            if found:
                self.endpoint = found.group(1).decode()
                break
        # Its request log goes nowhere: a full pipe would block the server.
        self.proc.stderr.close()
        request = urllib.request.Request(f"{self.endpoint}/{BUCKET}", method="PUT")
        urllib.request.urlopen(request, timeout=30).close()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def s3_report(name: str, ours: dict[str, float]) -> None:
    line = f"{name:36} {ours['seconds']:6.3f} s"
    if "peak_x" in ours:
        line += f"  peak {ours['peak_x']:.2f}x of {ours['size_mb']:.0f} MB"
    if "fetched_kib" in ours:
        line += f"  fetched {ours['fetched_kib']:.0f} KiB"
    if "first_fetched_kib" in ours:
        line += f" (first call {ours['first_fetched_kib']:.0f} KiB)"
    print(line, flush=True)


def run_s3(args: argparse.Namespace) -> None:
    moto = Moto()
    try:
        text, array = f"{moto.endpoint}|text", f"{moto.endpoint}|array"
        s3_report(f"S3 text {args.mb} MB: externalize", best("s3-text", args, text))
        s3_report(f"S3 json array {args.entries:,}", best("s3-array", args, array))
        s3_report("S3 inspect lines:500000-500050", best("s3-inspect-lines", args, text))
        s3_report("S3 inspect slice:500000..500050", best("s3-inspect-slice", args, array))
    finally:
        moto.stop()


# -- the parent --------------------------------------------------------------------------------


def run_child(case: str, args: argparse.Namespace, folder: str) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", case, "--mb", str(args.mb)]
    command += ["--entries", str(args.entries), "--dir", folder]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{case} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def best(case: str, args: argparse.Namespace, folder: str) -> dict[str, float]:
    runs = [run_child(case, args, folder) for _ in range(args.runs)]
    result = dict(runs[0])
    result["seconds"] = min(r["seconds"] for r in runs)
    if "peak_x" in result:
        result["peak_x"] = max(r["peak_x"] for r in runs)
    return result


def report(name: str, ours: dict[str, float], raw: dict[str, float]) -> None:
    ratio = ours["seconds"] / raw["seconds"]
    line = f"{name:36} {ours['seconds']:6.3f} s (baseline {raw['seconds']:.3f} s, x{ratio:.2f})"
    if "peak_x" in ours:
        line += f"  peak {ours['peak_x']:.2f}x of {ours['size_mb']:.0f} MB"
        line += f" (baseline {raw['peak_x']:.2f}x)"
    print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--child")
    parser.add_argument("--dir")
    parser.add_argument("--only", choices=["fs", "s3"])
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.mb, args.entries, args.dir)))
        return
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus")
    if args.only != "fs":
        run_s3(args)
    if args.only == "s3":
        return
    with tempfile.TemporaryDirectory() as folder:
        text = Path(folder) / "text"
        array = Path(folder) / "array"
        report(
            f"text {args.mb} MB: promote+summary+store",
            best("text", args, str(text)),
            best("text-raw", args, str(text)),
        )
        report(
            f"json array {args.entries:,} entries",
            best("array", args, str(array)),
            best("array-raw", args, str(array)),
        )
        report(
            "inspect lines:500000-500050 (text)",
            best("inspect-lines", args, str(text)),
            best("inspect-lines-raw", args, str(text)),
        )
        report(
            "inspect slice:500000..500050 (array)",
            best("inspect-slice", args, str(array)),
            best("inspect-slice-raw", args, str(array)),
        )


if __name__ == "__main__":
    main()
