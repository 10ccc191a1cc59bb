"""Review: a ContextPolicy on a FallbackClient of several providers, with images and PDFs.

With the provider mixed, images count by the largest provider's figure (the safe side for a
first estimate): a 100 px crop is 258 tokens, where Anthropic bills 14. The policy learned
its characters-per-token ratio from such requests: ~40 characters a token after a run of
button crops, so text was then estimated ~10 times under and the compaction trigger would
fire only far past the window. The ratio learned there is now never above the default.
Its media stage fitted requests to the first client's per-request limit, not to the
smallest of the clients' it may fall back to.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from llm_worker import ContextPolicy, MemoryBlobStore, RunStatus, Worker, tool
from llm_worker._tokens import leaf_clients, media_provider
from llm_worker.messages import DocumentPart, ImagePart, ToolUsePart
from llm_worker.providers import FallbackClient
from llm_worker.providers._media import inline_size
from llm_worker.testing import ScriptedClient, ScriptedRequest, ScriptedResponse
from llm_worker.worker._context_media import media_limit
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


# -- the media stage on a FallbackClient of several providers ---------------------------------

BIG = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n" + b"%" * 2_000_000  # ~2.7 MB as base64
GEMINI_LIMIT = 20 * 1024 * 1024


@tool
async def report(n: int) -> list[Any]:
    """Fetch a large report."""
    return [f"report {n}", DocumentPart(BIG, "application/pdf")]


def reader(ask: ScriptedRequest) -> ScriptedResponse:
    if ask.index >= 12:
        return ScriptedResponse.text("done")
    return ScriptedResponse([ToolUsePart("", "report", {"n": ask.index})])


async def test_a_mixed_fallbacks_media_stage_fits_the_smallest_limit() -> None:
    # Anthropic first (32 MB a request), Gemini behind it (20 MB): a request the fallback
    # may send to Gemini must fit Gemini's limit. The stage took the first client's limit:
    # requests of ~30 MB, which Gemini would refuse were Anthropic down.
    first = ScriptedClient(reader, provider="anthropic")
    second = ScriptedClient(reader, provider="gemini")
    worker = Worker(
        FallbackClient([first, second]),
        tools=[report],
        max_requests=50,
        context=ContextPolicy(window_tokens=1_000_000, keep_recent_turns=2),
    )
    with anyio.fail_after(60):
        result = await worker.run("Read the reports.")
    assert result.status is RunStatus.FINISHED
    assert max(inline_size(r.messages) for r in first.requests) <= GEMINI_LIMIT


async def test_a_nested_fallbacks_clients_count_too() -> None:
    # Fallback(Fallback(Anthropic, Gemini), Anthropic): Gemini is reachable, so its limit
    # holds and the media count as the largest figure (a nested fallback's own provider is
    # its first client's: Gemini was missed).
    inner = FallbackClient(
        [ScriptedClient(reader, provider="anthropic"), ScriptedClient(reader, provider="gemini")]
    )
    client = FallbackClient([inner, ScriptedClient(reader, provider="anthropic")])
    assert media_provider(client) is None and media_limit(client) == GEMINI_LIMIT
    assert media_provider(FallbackClient([ScriptedClient(reader, provider="gemini")])) == "gemini"
    assert media_limit(ScriptedClient(reader, provider="scripted")) is None


def test_a_client_listing_itself_ends() -> None:
    class Loop:
        provider = "gemini"

        @property
        def clients(self) -> tuple[object, ...]:
            return (self, self)

    assert leaf_clients(Loop()) == []
