"""Review: a ContextPolicy's calibration on a FallbackClient of several providers, with images.

With the provider mixed, images count by the largest provider's figure (the safe side for a
first estimate): a 100 px crop is 258 tokens, where Anthropic bills 14. The policy learned
its characters-per-token ratio from such requests: ~40 characters a token after a run of
button crops, so text was then estimated ~10 times under and the compaction trigger would
fire only far past the window. The ratio learned there is now never above the default.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from llm_worker import ContextPolicy, MemoryBlobStore, RunStatus, Worker, tool
from llm_worker.messages import ImagePart, ToolUsePart
from llm_worker.providers import FallbackClient
from llm_worker.testing import ScriptedClient, ScriptedRequest, ScriptedResponse
from support.media import png

pytestmark = pytest.mark.anyio

ICON = png(100, 100)
TURNS = 16


@tool
async def crops(n: int) -> list[Any]:
    """Crops of the page's buttons."""
    return [f"crops {n} " + "label text " * 200, *[ImagePart.from_bytes(ICON)] * 10]


def step(ask: ScriptedRequest) -> ScriptedResponse:
    if ask.index >= TURNS:
        return ScriptedResponse.text("done")
    return ScriptedResponse([ToolUsePart("", "crops", {"n": ask.index})])


@pytest.mark.parametrize("providers", [("anthropic", "gemini"), ("anthropic", "openai_chat")])
async def test_a_mixed_fallbacks_calibration_on_small_images_keeps_text_counted(
    providers: tuple[str, str],
) -> None:
    first, second = (ScriptedClient(step, provider=p) for p in providers)
    worker = Worker(
        FallbackClient([first, second]),
        tools=[crops],
        blob_store=MemoryBlobStore(),
        context=ContextPolicy(window_tokens=200_000),
    )
    with anyio.fail_after(60):
        result = await worker.run("Find the submit button.")
    assert result.status is RunStatus.FINISHED and len(first.requests) == TURNS + 1
    compactor: Any = worker._cfg.context  # pyright: ignore[reportPrivateUsage]
    # Text at 4 characters a token (the scripted usage's) is estimated at 4, not at ~40.
    assert compactor._estimator.calibrated
    assert 3.0 <= compactor._estimator.chars_per_token <= 4.0


async def test_one_providers_calibration_is_left_as_it_learns() -> None:
    # A single provider counts its own images: its ratio is learned as before.
    client = ScriptedClient(step, provider="anthropic")
    worker = Worker(
        client,
        tools=[crops],
        blob_store=MemoryBlobStore(),
        context=ContextPolicy(window_tokens=200_000),
    )
    with anyio.fail_after(60):
        await worker.run("Find the submit button.")
    compactor: Any = worker._cfg.context  # pyright: ignore[reportPrivateUsage]
    assert 3.5 <= compactor._estimator.chars_per_token <= 4.5
