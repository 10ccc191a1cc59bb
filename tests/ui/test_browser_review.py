"""Review probes of examples/web_chat in headless Chromium: Markdown a model (or an attacker
it quotes) can make slow or nest, a stream cut before its end, and Stop during a tool call
followed by a reload and a new message (the tool must not run again)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from .serving import llm_worker_serve
from .test_browser import EXAMPLE, chat_page, chromium, say, served, texts, until_ready

pytestmark = pytest.mark.anyio

__all__ = ("chromium", "served")  # the fixtures, imported to be found here


async def test_markdown_of_unclosed_marks_takes_linear_time(chromium: str, served: str) -> None:
    # Each emphasis was read lazily to the end of its line from every mark: 80 KB of "**a "
    # took 7.6 s a call, and the page renders for every read of the stream (frozen).
    cases = ["**a " * 30_000, "*a " * 40_000, "_a " * 40_000, "[a " * 40_000]
    async with chat_page(chromium, "markdown-linear") as page:
        with anyio.fail_after(120):
            await page.goto(served)
            took = await page.evaluate(
                """cases => cases.map(t => {
                    const start = performance.now(); markdown(t);
                    return performance.now() - start; })""",
                cases,
            )
    assert max(took) < 1_500, took  # quadratic: tens of seconds; linear: milliseconds


NESTED = {
    "**bold *em* and _under_**": "<p><strong>bold <em>em</em> and <em>under</em></strong></p>",
    # Emphasis stops at the next `*`: around a strong it stays stars (the price of linear).
    "*em with **x** inside*": "<p>*em with <strong>x</strong> inside*</p>",
    "snake_case_name and 2 * 3 * 4": "<p>snake_case_name and 2 * 3 * 4</p>",
    "[**docs**](https://example.com/a_b)": (
        '<p><a href="https://example.com/a_b" rel="noopener noreferrer" target="_blank">'
        "<strong>docs</strong></a></p>"
    ),
    "[x](javascript:alert%281%29) [y](data:text/html,hi) [z](vbscript:x)": (
        "<p>x (javascript:alert%281%29) y (data:text/html,hi) z (vbscript:x)</p>"
    ),
    "[a [b](https://e.com)": '<p>[a <a href="https://e.com/" rel="noopener noreferrer" '
    'target="_blank">b</a></p>',
    "<b>not bold</b> `<i>code</i>`": (
        "<p>&lt;b&gt;not bold&lt;/b&gt; <code>&lt;i&gt;code&lt;/i&gt;</code></p>"
    ),
    "```html\n<img src=x onerror=alert(1)>\n```": (
        "<pre><code>&lt;img src=x onerror=alert(1)&gt;</code></pre>"
    ),
}


async def test_markdown_nests_emphasis_and_keeps_links_and_html_safe(
    chromium: str, served: str
) -> None:
    async with chat_page(chromium, "markdown-nested") as page:
        with anyio.fail_after(60):
            await page.goto(served)
            html = await page.evaluate(
                "cases => cases.map(t => markdown(t).innerHTML)", list(NESTED)
            )
            pwned = await page.evaluate("window.pwned ?? null")
    assert dict(zip(NESTED, html, strict=True)) == NESTED
    assert pwned is None


def cut_stream() -> str:
    chunks = [
        {"type": "start", "messageId": "m1"},
        {"type": "text-start", "id": "t1"},
        {"type": "text-delta", "id": "t1", "delta": "Half an ans"},
    ]
    return "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks)


async def test_a_stream_cut_before_its_finish_is_shown_and_send_works_again(
    chromium: str, served: str
) -> None:
    # A proxy (or a server that died) ending the body cleanly: the page said "done".
    async with chat_page(chromium, "cut-stream") as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        with anyio.fail_after(60):
            await page.goto(served)
            await page.route(
                "**/api/chat",
                lambda route: route.fulfill(
                    status=200, body=cut_stream(), content_type="text/event-stream"
                ),
            )
            await say(page, "Book me a trip to Kyoto")
            await page.wait_for_function("document.getElementById('error').innerText !== ''")
            error = await page.get_by_test_id("error").inner_text()
            status = await page.evaluate("document.body.dataset.status")
            await page.unroute("**/api/chat")
            await say(page, "Book me a trip to Kyoto")
            await page.get_by_test_id("approve").wait_for(timeout=20_000)
            after = await page.get_by_test_id("error").inner_text()
    assert error == "The connection broke before the answer ended. Send again to go on."
    assert status == "ready"
    assert after == ""
    assert errors == []


SLOW_APP = '''
"""A Worker whose side-effecting tool takes long and writes down each start and end."""
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from llm_worker import TextPart, ToolUsePart, Worker, tool
from llm_worker.testing import ScriptedModelServer, ScriptedRequest, ScriptedResponse

RUNS = Path(__file__).with_name("runs.txt")


@tool
async def pay(amount: int) -> str:
    """Pay an amount (slowly)."""
    with RUNS.open("a") as f:
        f.write("start\\n")
    await anyio.sleep(60)  # the payment provider is slow
    with RUNS.open("a") as f:
        f.write("end\\n")
    return "paid"


def answer(call: ScriptedRequest) -> ScriptedResponse:
    asked = call.request.messages[-1].text.lower() if call.request.messages else ""
    if "pay" in asked:
        return ScriptedResponse([TextPart("Paying."), ToolUsePart("", "pay", {"amount": 5})])
    return ScriptedResponse.text("Noted.")


@asynccontextmanager
async def make_worker():
    async with ScriptedModelServer("anthropic", answer) as server, server.client() as client:
        yield lambda: Worker(client, tools=[pay])
'''


@pytest.fixture
def slow_app(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The slow-tool app served with the example page, resumable (its factory a lifespan)."""
    (tmp_path / "slow_app.py").write_text(SLOW_APP)
    args = ("slow_app:make_worker", "--static", str(EXAMPLE), "--resumable")
    with llm_worker_serve(tmp_path, *args) as (url, _):
        yield url, tmp_path / "runs.txt"


def wait_for_note(path: Path, text: str, seconds: float = 30) -> None:
    """Wait (bounded) until the tool, in the server's process, has written `text`."""
    deadline = time.monotonic() + seconds
    while not (path.exists() and text in path.read_text()):
        assert time.monotonic() < deadline, f"the tool never wrote {text!r}"
        time.sleep(0.05)  # polling another process's file


async def test_stop_during_a_tool_call_then_a_reload_does_not_run_it_again(
    chromium: str, slow_app: tuple[str, Path]
) -> None:
    url, runs = slow_app
    async with chat_page(chromium, "stop-mid-tool") as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        with anyio.fail_after(90):
            await page.goto(url)
            await say(page, "Please pay the bill")
            await anyio.to_thread.run_sync(wait_for_note, runs, "start")
            await page.get_by_test_id("stop").click()
            await page.wait_for_function("document.body.dataset.status === 'ready'")
            stopped = await texts(page, "tool-state")
            await page.reload()
            await page.wait_for_function(
                "document.body.dataset.status === 'ready' && messages.length === 2"
            )
            reloaded = await texts(page, "tool-state")
            await say(page, "Anything else?")
            await until_ready(page, "Noted.")
            final: list[Any] = await texts(page, "tool-state")
            status = await page.get_by_test_id("status").inner_text()
    assert runs.read_text() == "start\n"  # started once, cancelled, never run again
    assert stopped == reloaded == final == ["stopped"]
    assert status == "done"
    assert errors == []


async def test_stop_whose_request_never_arrives_still_ends_the_page_s_stream(
    chromium: str, slow_app: tuple[str, Path]
) -> None:
    # The explicit stop hung with the network: the page stayed "stopping…" (Stop disabled)
    # for as long as the run went on.
    url, runs = slow_app
    held: list[Any] = []

    def hold(route: Any) -> None:
        held.append(route)  # never answered: the network is gone

    async with chat_page(chromium, "stop-unreachable") as page:
        with anyio.fail_after(40):
            await page.goto(url)
            await say(page, "Please pay the bill")
            await anyio.to_thread.run_sync(wait_for_note, runs, "start")
            await page.route("**/api/chat/*/stream", hold)
            await page.get_by_test_id("stop").click()
            await page.wait_for_function("document.body.dataset.status === 'ready'", timeout=20_000)
            status = await page.get_by_test_id("status").inner_text()
            for route in held:
                await route.abort()
    assert [route.request.method for route in held] == ["DELETE"]
    assert status == "stopped"


APPROVED_APP = '''
"""A tool that asks approval and then takes a while, writing down each run."""
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from llm_worker import TextPart, ToolUsePart, Worker, tool
from llm_worker.testing import ScriptedModelServer, ScriptedRequest, ScriptedResponse

RUNS = Path(__file__).with_name("runs.txt")
GATE = Path(__file__).with_name("gate.txt")


@tool(requires_approval=True)
async def transfer(amount: int) -> str:
    """Transfer an amount (a person approves it)."""
    with RUNS.open("a") as f:
        f.write("start\\n")
    while not GATE.exists():  # the test opens the gate once the page has reloaded
        await anyio.sleep(0.05)
    return f"transferred {amount}"


def answer(call: ScriptedRequest) -> ScriptedResponse:
    if call.tool_results:
        return ScriptedResponse.text("All " + call.tool_results[0].content + ".")
    return ScriptedResponse([TextPart("Transferring."), ToolUsePart("", "transfer", {"amount": 7})])


@asynccontextmanager
async def make_worker():
    async with ScriptedModelServer("anthropic", answer) as server, server.client() as client:
        yield lambda: Worker(client, tools=[transfer])
'''


async def test_a_reload_while_an_approved_tool_runs_reads_it_once_and_runs_it_once(
    chromium: str, tmp_path: Path
) -> None:
    (tmp_path / "approved_app.py").write_text(APPROVED_APP)
    runs, gate = tmp_path / "runs.txt", tmp_path / "gate.txt"
    args = ("approved_app:make_worker", "--static", str(EXAMPLE), "--resumable")
    with llm_worker_serve(tmp_path, *args) as (url, _):
        async with chat_page(chromium, "reload-approved") as page:
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            with anyio.fail_after(60):
                await page.goto(url)
                await say(page, "Send 7 to Ann")
                await page.get_by_test_id("approve").click(timeout=20_000)
                await anyio.to_thread.run_sync(wait_for_note, runs, "start")
                await page.reload()  # the approved tool is running on the server
                await page.wait_for_function("document.body.dataset.status === 'streaming'")
                gate.write_text("open")
                await until_ready(page, "All transferred 7.")
                answer = await page.get_by_test_id("assistant").inner_text()
                outputs = await texts(page, "tool-output")
                status = await page.get_by_test_id("status").inner_text()
    assert runs.read_text() == "start\n"
    assert answer.count("Transferring.") == 1
    assert answer.count("All transferred 7.") == 1
    assert outputs == ["→ transferred 7"]
    assert status == "done"
    assert errors == []
