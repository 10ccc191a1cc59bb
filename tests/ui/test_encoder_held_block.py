"""The encoders' stream loop holds the block its deltas go to in locals (issue 39): it must
write the bytes the general path writes whatever comes between two deltas — another index
(a negative one too), a sub-agent's delta, a block closed and reopened, a run that fails."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_worker.errors import ProviderError
from llm_worker.events import (
    BlockAbort,
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    ResponseStatus,
    StatusEvent,
    TextDelta,
    TextMetadata,
    ThinkingDelta,
    ThinkingMetadata,
)
from llm_worker.messages import Origin
from llm_worker.ui._agui import AGUIEncoder
from llm_worker.ui._encoder import BlockEncoder
from llm_worker.ui._vercel import VercelEncoder

ORIGIN = Origin("anthropic", "claude")


class _VercelGeneral(VercelEncoder):
    _FAST_PATH = False  # every event through `encode`


class _AGUIGeneral(AGUIEncoder):
    _FAST_PATH = False


def _pair(protocol: str) -> tuple[BlockEncoder, BlockEncoder]:
    if protocol == "vercel":
        fast, general = VercelEncoder("m1", ORIGIN), _VercelGeneral("m1", ORIGIN)
    else:
        fast, general = AGUIEncoder("t1", "r1", ORIGIN), _AGUIGeneral("t1", "r1", ORIGIN)
    general._token = fast._token  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
    return fast, general


class _Failed(ProviderError):
    """The run's failure, raised by the source after its events."""


async def _lines(encoder: BlockEncoder, events: list[object], fail: bool) -> list[str]:
    async def source() -> AsyncIterator[object]:
        for event in events:
            yield event
        if fail:
            raise _Failed("the model went away")

    with anyio.fail_after(10):
        return [line async for line in encoder.sse_stream(source())]


def _start(index: int, kind: BlockType) -> BlockStart:
    meta = TextMetadata() if kind is BlockType.TEXT else ThinkingMetadata()
    return BlockStart(index, kind, meta)


_INDEX = st.integers(-1, 1)
_KIND = st.sampled_from([BlockType.TEXT, BlockType.THINKING])
_TEXT = st.sampled_from(["", "a", "é", '"\\', "x" * 60, "\n\x00", "\u2028\xa0", "😀"])
_EVENT = st.one_of(
    st.builds(_start, _INDEX, _KIND),
    st.builds(BlockDelta, _INDEX, st.builds(TextDelta, _TEXT)),
    st.builds(BlockDelta, _INDEX, st.builds(ThinkingDelta, _TEXT)),
    # A sub-agent's delta at the held index: its progress, never the parent's text.
    st.builds(lambda i, t: BlockDelta(i, TextDelta(t), path=("sub",)), _INDEX, _TEXT),
    st.builds(BlockStop, _INDEX, _KIND),
    st.builds(BlockAbort, _INDEX, _KIND, st.just("cut")),
    st.just(StatusEvent(ResponseStatus.STARTED)),
)


@pytest.mark.parametrize("protocol", ["vercel", "ag-ui"])
@settings(max_examples=300, deadline=None)
@given(events=st.lists(_EVENT, max_size=30), fail=st.booleans())
def test_the_held_block_writes_what_the_general_path_writes(
    protocol: str, events: list[object], fail: bool
) -> None:
    fast, general = _pair(protocol)
    assert anyio.run(_lines, fast, events, fail) == anyio.run(_lines, general, events, fail)


@pytest.mark.parametrize("protocol", ["vercel", "ag-ui"])
def test_a_delta_at_index_minus_one_after_a_closed_block_is_not_written_into_it(
    protocol: str,
) -> None:
    # The loop forgets the block it held when another event comes: a delta at an index no
    # block is open at (here -1) goes the general way (a text of its own), not into the
    # closed block's.
    fast, general = _pair(protocol)
    events: list[object] = [
        StatusEvent(ResponseStatus.STARTED),
        _start(0, BlockType.TEXT),
        BlockDelta(0, TextDelta("kept")),
        BlockStop(0, BlockType.TEXT),
        BlockDelta(-1, TextDelta("stray")),
        StatusEvent(ResponseStatus.COMPLETED, model="m"),
    ]
    lines = anyio.run(_lines, fast, events, False)
    assert lines == anyio.run(_lines, general, events, False)
    (kept,) = [line for line in lines if '"kept"' in line]
    (stray,) = [line for line in lines if '"stray"' in line]
    ident = kept.split('"id":"' if protocol == "vercel" else '"messageId":"')[1].split('"')[0]
    assert f'"{ident}"' not in stray
