"""Gemini function calls whose arguments stream as `partialArgs` (`streamFunctionCallArguments`).

The wire shape (Vertex AI's `FunctionCall.partialArgs` / `willContinue`, `PartialArg` with
`jsonPath` and one of `stringValue` / `numberValue` / `boolValue` / `nullValue`): the first
part names the function with `willContinue: true`, the next ones carry only `partialArgs`, and
a part without `willContinue` ends the call.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from test_gemini_support import KEY, check_invariants, replay

from llm_worker import Worker, tool
from llm_worker.errors import MalformedStreamError
from llm_worker.events import (
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    InputJsonDelta,
    SignatureDelta,
    StopReason,
    ToolUseMetadata,
)
from llm_worker.messages import Message, Request
from llm_worker.providers import GeminiClient
from llm_worker.providers._http import RetryPolicy
from llm_worker.testing import Chunking, WireResponse, WireServer

OPT_IN = {"toolConfig": {"functionCallingConfig": {"streamFunctionCallArguments": True}}}


def chunk(*parts: dict[str, Any], finish: str | None = None) -> str:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return f"data: {json.dumps({'candidates': [candidate]})}\r\n\r\n"


def call(**fields: Any) -> dict[str, Any]:
    return {"functionCall": fields}


def piece(path: str, **value: Any) -> dict[str, Any]:
    return {"jsonPath": path, **value}


STREAMED = (
    chunk({**call(name="lookup", willContinue=True), "thoughtSignature": "c2ln"})
    + chunk(
        call(partialArgs=[piece("$.city", stringValue="Os", willContinue=True)], willContinue=True)
    )
    + chunk(
        call(
            partialArgs=[
                piece("$.city", stringValue="lo"),
                piece("$.days", numberValue=3),
                piece("$.opts.metric", boolValue=True),
                piece("$.tags[1]", stringValue="b"),
                piece("$.tags[0]", stringValue="a"),
                piece("$['odd key']", nullValue="NULL_VALUE"),
            ],
            willContinue=True,
        )
    )
    + chunk(call(), finish="STOP")
)
ARGS = {"city": "Oslo", "days": 3, "opts": {"metric": True}, "tags": ["a", "b"], "odd key": None}


@pytest.mark.anyio
@pytest.mark.parametrize(
    "chunking", [Chunking.whole(), Chunking.bytewise()], ids=["whole", "bytes"]
)
async def test_streamed_arguments_make_one_call(chunking: Chunking) -> None:
    request = Request([Message.user("Weather?")], options=OPT_IN)
    events, error, server = await replay(WireResponse(STREAMED, chunking=chunking), request=request)
    assert error is None
    check_invariants(events, error)
    assert server.requests[0].json()["toolConfig"] == OPT_IN["toolConfig"]
    blocks = [e for e in events if isinstance(e, BlockStart | BlockDelta | BlockStop)]
    assert blocks[0] == BlockStart(
        0, BlockType.TOOL_USE, ToolUseMetadata("gemini_call_0", "lookup")
    )
    assert blocks[1] == BlockDelta(0, SignatureDelta("c2ln"))
    assert isinstance(blocks[2], BlockDelta) and isinstance(blocks[2].delta, InputJsonDelta)
    assert json.loads(blocks[2].delta.partial_json) == ARGS
    assert blocks[3] == BlockStop(0, BlockType.TOOL_USE, StopReason.TOOL_USE, "STOP")
    assert len(blocks) == 4


@pytest.mark.anyio
async def test_a_call_still_open_at_the_finish_keeps_what_arrived() -> None:
    body = chunk(call(name="lookup", willContinue=True)) + chunk(
        call(partialArgs=[piece("$.city", stringValue="Oslo")], willContinue=True),
        finish="STOP",
    )
    events, error, _ = await replay(WireResponse(body))
    assert error is None
    check_invariants(events, error)
    [args] = [e.delta for e in events if isinstance(e, BlockDelta)]
    assert isinstance(args, InputJsonDelta) and json.loads(args.partial_json) == {"city": "Oslo"}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("pieces", "detail"),
    [
        ([piece("city", stringValue="x")], "jsonPath 'city'"),
        ([piece("$.a", stringValue="x"), piece("$.a.b", stringValue="y")], "another kind"),
        ([piece("$.a", numberValue="3")], "`partialArgs[].numberValue` is a string"),
        ([piece("$.a[99999]", boolValue=True)], "an index above"),
        (["$.a"], "`functionCall.partialArgs[]` is a string"),
    ],
    ids=["no-root", "crossing", "wrong-type", "huge-index", "not-an-object"],
)
async def test_pieces_that_make_no_object_are_a_malformed_stream(
    pieces: list[Any], detail: str
) -> None:
    body = chunk(call(name="lookup", willContinue=True)) + chunk(
        call(partialArgs=pieces, willContinue=True)
    )
    events, error, _ = await replay(WireResponse(body))
    check_invariants(events, error)
    assert isinstance(error, MalformedStreamError)
    assert detail in error.message


@pytest.mark.anyio
async def test_text_inside_a_streaming_call_is_a_malformed_stream() -> None:
    body = (
        chunk(call(name="lookup", willContinue=True))
        + chunk({"text": "meanwhile"})
        + chunk(call(partialArgs=[piece("$.city", stringValue="Oslo")]))
    )
    events, error, _ = await replay(WireResponse(body))
    check_invariants(events, error)
    assert isinstance(error, MalformedStreamError)
    assert "streaming" in error.message


@pytest.mark.anyio
async def test_the_worker_runs_a_call_whose_arguments_streamed() -> None:
    ran: list[dict[str, Any]] = []

    @tool
    async def lookup(city: str, days: int, opts: dict[str, bool], tags: list[str]) -> str:
        """Look up the weather."""
        ran.append({"city": city, "days": days, "opts": opts, "tags": tags})
        return "21 C"

    streamed = STREAMED.replace(""", {"jsonPath": "$['odd key']", "nullValue": "NULL_VALUE"}""", "")
    final = chunk({"text": "21 C in Oslo."}, finish="STOP")
    async with WireServer([WireResponse(streamed), WireResponse(final)]) as server:
        client = GeminiClient(
            model="gemini-3-pro-preview",
            api_key=KEY,
            base_url=server.base_url + "/v1beta",
            retry=RetryPolicy.disabled(),
        )
        worker = Worker(client, tools=[lookup], options=OPT_IN)
        with anyio.fail_after(10):
            result = await worker.run("Weather?")
        await client.aclose()
    assert ran == [{"city": "Oslo", "days": 3, "opts": {"metric": True}, "tags": ["a", "b"]}]
    assert result.text == "21 C in Oslo."
    sent = server.requests[1].json()["contents"][1]["parts"][0]
    assert sent["functionCall"]["args"] == {k: v for k, v in ARGS.items() if k != "odd key"}
    assert sent["thoughtSignature"] == "c2ln"


# --- hostile pieces: bounded memory, linear time ----------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("pieces", "detail"),
    [
        # 2,000 short pieces each asking for a 10,000-slot array: 80 KB of JSON made 170 MB.
        ([piece(f"$.a{n}[9999]", nullValue=None) for n in range(2_000)], "an index above"),
        # 100,000 levels of nesting from a 200 KB path.
        ([piece("$" + ".a" * 100_000, nullValue=None)], "deeper than 64 levels"),
    ],
    ids=["many-huge-arrays", "deep-path"],
)
async def test_short_pieces_cannot_build_a_huge_tree(pieces: list[Any], detail: str) -> None:
    body = chunk(call(name="lookup", willContinue=True)) + chunk(
        call(partialArgs=pieces, willContinue=True)
    )
    events, error, _ = await replay(WireResponse(body))
    check_invariants(events, error)
    assert isinstance(error, MalformedStreamError)
    assert detail in error.message


@pytest.mark.anyio
async def test_a_long_string_in_many_pieces_is_rebuilt_in_linear_time() -> None:
    # 4 MB of one string argument in 400,000 pieces: appending to a growing string copied
    # ~800 GB (hours); the pieces are kept as a list and joined once.
    pieces = [piece("$.content", stringValue=f"{n:09d}\n") for n in range(400_000)]
    body = chunk(call(name="write", willContinue=True))
    body += "".join(
        chunk(call(partialArgs=pieces[n : n + 10_000], willContinue=True))
        for n in range(0, len(pieces), 10_000)
    )
    body += chunk(call(), finish="STOP")
    with anyio.fail_after(20):
        events, error, _ = await replay(WireResponse(body))
    assert error is None
    [args] = [e.delta for e in events if isinstance(e, BlockDelta)]
    assert isinstance(args, InputJsonDelta)
    content = json.loads(args.partial_json)["content"]
    assert content == "".join(f"{n:09d}\n" for n in range(400_000))
