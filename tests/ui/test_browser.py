"""examples/web_chat in headless Chromium, served by `llm-worker serve`: one approval."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator

import anyio
import pytest

from .conftest import ROOT

pytestmark = pytest.mark.anyio

EXAMPLE = ROOT / "examples" / "web_chat"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
API_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's chromium (installed with apt-get when missing and root; else skipped)."""
    path = shutil.which("chromium")
    if path is None and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(
            ["apt-get", "install", "-y", "-q", "chromium"],
            capture_output=True,
            timeout=600,
            check=False,
        )
        path = shutil.which("chromium")
    if path is None:
        pytest.skip("the browser test needs Debian's chromium package (apt-get install chromium)")
    pytest.importorskip("playwright", reason="the browser test needs playwright (dev group)")
    return path


@pytest.fixture
def served() -> Iterator[str]:
    """`llm-worker serve app:make_worker --static .` in the example's folder, on a free port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in API_KEYS and k != "LLM_WORKER_MODEL"}
    command = [sys.executable, "-m", "llm_worker.cli", "serve", "app:make_worker", "--static", "."]
    process = subprocess.Popen(
        [*command, "--port", str(port)],
        cwd=EXAMPLE,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        seen: list[str] = []
        for line in process.stderr:  # uvicorn says when it listens; bounded by the timeout
            seen.append(line)
            if "Uvicorn running on" in line:
                break
        else:
            raise AssertionError("llm-worker serve exited: " + "".join(seen))
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()


async def test_the_page_streams_a_run_and_resumes_it_after_an_approval(
    chromium: str, served: str
) -> None:
    from playwright.async_api import async_playwright

    with anyio.fail_after(60):
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
            try:
                page = await browser.new_page()
                await page.goto(served)
                await page.get_by_test_id("prompt").fill("Book me a trip to Kyoto")
                await page.get_by_test_id("send").click()
                approve = page.get_by_test_id("approve")
                await approve.wait_for(timeout=20_000)
                reasoning = await page.get_by_test_id("reasoning").inner_text()
                assert "Check the weather, then book." in reasoning
                states = await page.get_by_test_id("tool-state").all_inner_texts()
                assert states == ["input-available", "approval-requested"]  # the batch waits
                await approve.click()
                await page.wait_for_function(
                    "document.body.dataset.status === 'ready' && "
                    "document.body.innerText.includes('Here is what happened')",
                    timeout=20_000,
                )
                outputs = await page.get_by_test_id("tool-output").all_inner_texts()
                text = await page.get_by_test_id("assistant").inner_text()
                error = await page.get_by_test_id("error").inner_text()
            finally:
                await browser.close()
    assert outputs == ["→ Kyoto: sunny, 24°C", "→ Trip to Kyoto booked, confirmation KY-2041."]
    assert "Let me check the weather in Kyoto and book your trip." in text
    assert "Here is what happened: Kyoto: sunny, 24°C Trip to Kyoto booked" in text
    assert error == ""
