"""examples/web_chat in headless Chromium, served by `llm-worker serve --resumable`: an
approval, a failed request, a stale approval, a phone, a reload, Stop and safe Markdown.

A failing test leaves a screenshot of its page in .cache/artifacts/web_chat/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from .conftest import ROOT
from .serving import llm_worker_serve

pytestmark = pytest.mark.anyio

EXAMPLE = ROOT / "examples" / "web_chat"
ARTIFACTS = ROOT / ".cache" / "artifacts" / "web_chat"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
DONE = "document.body.dataset.status === 'ready' && document.body.innerText.includes(%s)"
BOOKED = "→ Trip to Kyoto booked, confirmation KY-2041."


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
    """`llm-worker serve app:make_worker --static . --resumable` in the example's folder."""
    with llm_worker_serve(EXAMPLE, "app:make_worker", "--static", ".", "--resumable") as (url, _):
        yield url


@asynccontextmanager
async def chat_page(chromium: str, name: str, **options: Any) -> AsyncIterator[Any]:
    """A page of a fresh headless Chromium; a screenshot of it is kept if the block fails."""
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        try:
            page = await browser.new_page(**options)
            try:
                yield page
            except BaseException:
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
                raise
        finally:
            with anyio.CancelScope(shield=True):
                await browser.close()


async def say(page: Any, text: str) -> None:
    await page.get_by_test_id("prompt").fill(text)
    await page.get_by_test_id("send").click()


async def until_ready(page: Any, text: str) -> None:
    await page.wait_for_function(DONE % json.dumps(text), timeout=20_000)


async def texts(page: Any, test_id: str) -> list[str]:
    return list(await page.get_by_test_id(test_id).all_inner_texts())


async def states(page: Any) -> list[str]:
    return list(
        await page.eval_on_selector_all("[data-testid=tool]", "e => e.map(x => x.dataset.state)")
    )


async def test_the_page_streams_a_run_and_resumes_it_after_an_approval(
    chromium: str, served: str
) -> None:
    async with chat_page(chromium, "approval") as page:
        failed: list[str] = []
        page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
        page.on("pageerror", lambda e: failed.append(str(e)))
        posted: list[dict[str, Any]] = []
        page.on(
            "request", lambda r: posted.append(r.post_data_json) if r.method == "POST" else None
        )
        with anyio.fail_after(60):
            await page.goto(served)
            await say(page, "Book me a trip to Kyoto")
            approve = page.get_by_test_id("approve")
            await approve.wait_for(timeout=20_000)
            reasoning = page.get_by_test_id("reasoning")
            assert not await reasoning.get_attribute("open")  # folded until the reader opens it
            await reasoning.locator("summary").click()
            thought = await reasoning.inner_text()
            waiting = await texts(page, "tool-state")
            waiting_states = await states(page)
            status = await page.get_by_test_id("status").inner_text()
            await approve.click()
            await until_ready(page, "Here is what happened")
            outputs = await texts(page, "tool-output")
            done = await texts(page, "tool-state")
            answer = await page.get_by_test_id("assistant").inner_text()
            error = await page.get_by_test_id("error").inner_text()
            final = await page.get_by_test_id("status").inner_text()
            chat_id = await page.evaluate("chatId")
    assert "Check the weather, then book." in thought
    assert waiting_states == ["input-available", "approval-requested"]  # the batch waits
    assert waiting == ["runs once you answer the approval", "waiting for your approval"]
    assert status == "waiting for your approval"
    assert outputs == ["→ Kyoto: sunny, 24°C", BOOKED]
    assert done == ["done", "done"]
    assert final == "done"
    assert "Let me check the weather in Kyoto and book your trip." in answer
    assert "Here is what happened: Kyoto: sunny, 24°C Trip to Kyoto booked" in answer
    assert error == ""
    assert failed == []  # the favicon and every request answered
    assert UUID.match(chat_id)  # crypto.randomUUID()
    assert [p["id"] for p in posted] == [chat_id, chat_id]


async def test_a_failed_request_shows_its_error_and_send_works_again(
    chromium: str, served: str
) -> None:
    refusal = json.dumps({"error": "the request holds 9 messages, over the limit of 8"})
    async with chat_page(chromium, "failure") as page:
        with anyio.fail_after(60):
            await page.goto(served)
            await page.route(
                "**/api/chat",
                lambda route: route.fulfill(
                    status=400, body=refusal, content_type="application/json"
                ),
            )
            await say(page, "Book me a trip to Kyoto")
            await page.wait_for_function("document.getElementById('error').innerText !== ''")
            refused = await page.get_by_test_id("error").inner_text()
            kept = await page.get_by_test_id("prompt").input_value()
            after_400 = await page.evaluate("[document.body.dataset.status, messages.length]")
            await page.unroute("**/api/chat")
            await page.route("**/api/chat", lambda route: route.abort("internetdisconnected"))
            await page.get_by_test_id("send").click()
            await page.wait_for_function(
                "document.getElementById('error').innerText.includes('reach the server')"
            )
            after_network = await page.evaluate("[document.body.dataset.status, messages.length]")
            await page.unroute("**/api/chat")
            await page.get_by_test_id("send").click()  # the text is still in the input
            await page.get_by_test_id("approve").wait_for(timeout=20_000)
            error = await page.get_by_test_id("error").inner_text()
            users = await texts(page, "user")
    assert refused == (
        "The server refused the request (400: the request holds 9 messages, over the limit of 8)."
    )
    assert kept == "Book me a trip to Kyoto"
    assert after_400 == ["ready", 0]  # no empty bubble; Send works again
    assert after_network == ["ready", 0]
    assert error == ""
    assert users == ["Book me a trip to Kyoto"]


async def test_a_new_message_retires_the_waiting_approval(chromium: str, served: str) -> None:
    async with chat_page(chromium, "stale-approval") as page:
        posts: list[str] = []
        page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
        with anyio.fail_after(60):
            await page.goto(served)
            await say(page, "Book me a trip to Kyoto")
            await page.get_by_test_id("approve").wait_for(timeout=20_000)
            await say(page, "Actually, book it for next week")
            await page.wait_for_function(
                "document.body.dataset.status === 'ready' && messages.length === 4"
            )
            first = page.get_by_test_id("assistant").first
            first_buttons = await first.get_by_test_id("approve").count()
            first_states = await first.get_by_test_id("tool-state").all_inner_texts()
            buttons = await page.get_by_test_id("approve").count()
            sent = len(posts)
            # The stale card's handler, called anyway, starts nothing.
            await page.evaluate(
                "decide(messages[1], messages[1].parts.find(p => p.toolCallId && "
                "p.state === 'approval-requested'), true)"
            )
            after_stale = len(posts)
            await page.get_by_test_id("approve").click()
            await until_ready(page, "Here is what happened")
            final_first = await first.get_by_test_id("tool-state").all_inner_texts()
    assert first_buttons == 0
    assert first_states == ["not run", "not answered: you sent a new message"]
    assert buttons == 1  # only the new answer's approval
    assert after_stale == sent
    assert final_first == first_states


async def test_the_page_fits_a_phone(chromium: str, served: str) -> None:
    phone = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
    async with chat_page(chromium, "phone", **phone) as page:
        with anyio.fail_after(60):
            await page.goto(served)
            await say(page, "Book me a trip to Kyoto")
            await page.get_by_test_id("approve").wait_for(timeout=20_000)
            widths = await page.evaluate(
                "[document.documentElement.scrollWidth, document.documentElement.clientWidth,"
                " document.getElementById('send').getBoundingClientRect().right]"
            )
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(ARTIFACTS / "phone-latest.png"), full_page=True)
    scroll, client, send_right = widths
    assert client == 390  # laid out at the phone's width (no 980 px desktop viewport)
    assert scroll <= client  # nothing wider than the screen
    assert send_right <= client


async def test_a_reload_resumes_the_conversation_and_the_running_answer(
    chromium: str, served: str
) -> None:
    async with chat_page(chromium, "reload") as page:
        with anyio.fail_after(90):
            await page.goto(served)
            await say(page, "Book me a trip to Kyoto")
            await page.get_by_test_id("approve").wait_for(timeout=20_000)
            chat_id = await page.evaluate("chatId")
            await page.reload()
            await page.get_by_test_id("approve").click(timeout=20_000)  # back, and it works
            await until_ready(page, "Here is what happened")
            await say(page, "Tell me a story")
            await page.wait_for_function("document.body.innerText.includes('Once upon a time')")
            await page.reload()  # mid-answer: the server's run goes on and is read again
            await page.wait_for_function(
                "document.body.dataset.status === 'ready' && "
                "document.body.innerText.split('had hoped.').length === 13",
                timeout=20_000,
            )
            reloaded = await page.evaluate("chatId")
            users = await texts(page, "user")
            outputs = await texts(page, "tool-output")
            story = page.get_by_test_id("assistant").last
            heading = await story.locator("h4").inner_text()
            bold = await story.locator("strong").all_inner_texts()
            items = await story.locator("li").all_inner_texts()
            answer = await story.inner_text()
    assert reloaded == chat_id
    assert users == ["Book me a trip to Kyoto", "Tell me a story"]
    assert outputs[-1] == BOOKED
    assert heading == "The traveller of Kyoto"
    assert bold == ["Kyoto"]
    assert items == [
        "the temples at dawn,",
        "the bamboo grove at noon,",
        "and tea by the river at dusk.",
    ]
    assert answer.count("better than she had hoped.") == 12  # whole, and not twice


async def test_stop_sends_the_explicit_stop_and_the_run_ends(chromium: str, served: str) -> None:
    async with chat_page(chromium, "stop") as page:
        deletes: list[tuple[str, int]] = []

        async def on_response(response: Any) -> None:
            if response.request.method == "DELETE":
                deletes.append((response.url, response.status))

        page.on("response", on_response)
        with anyio.fail_after(60):
            await page.goto(served)
            await say(page, "Tell me a story")
            await page.wait_for_function("document.body.innerText.includes('Once upon a time')")
            await page.get_by_test_id("stop").click()
            await page.wait_for_function("document.body.dataset.status === 'ready'")
            chat_id = await page.evaluate("chatId")
            status = await page.get_by_test_id("status").inner_text()
            answer = await page.get_by_test_id("assistant").inner_text()
            # The server's record of the run: it was stopped, not left to finish.
            log = await page.evaluate(
                "fetch('/api/chat/' + chatId + '/stream').then(r => r.text())"
            )
            await say(page, "Book me a trip to Kyoto")
            await page.get_by_test_id("approve").wait_for(timeout=20_000)
    assert deletes == [(f"{served}/api/chat/{chat_id}/stream", 200)]
    assert status == "stopped"
    assert "Stopped." in answer
    assert answer.count("better than she had hoped.") < 12
    assert '"type":"abort"' in log


SSE = (
    "".join(
        f"data: {json.dumps(chunk)}\n\n"
        for chunk in [
            {"type": "start", "messageId": "m1"},
            {"type": "text-start", "id": "t1"},
            {
                "type": "text-delta",
                "id": "t1",
                "delta": '**Bold** and `code` <img src=x onerror="window.pwned=1">\n\n'
                "[a trap](javascript:window.pwned=2) and [docs](https://example.com/docs)\n\n"
                "```\n<script>window.pwned=3</script>\n```\n\n- one\n- two",
            },
            {"type": "text-end", "id": "t1"},
            {"type": "finish"},
        ]
    )
    + "data: [DONE]\n\n"
)


async def test_markdown_renders_without_running_the_model_s_html(
    chromium: str, served: str
) -> None:
    async with chat_page(chromium, "markdown") as page:
        with anyio.fail_after(60):
            await page.goto(served)
            await page.route(
                "**/api/chat",
                lambda route: route.fulfill(status=200, body=SSE, content_type="text/event-stream"),
            )
            await say(page, "Format something")
            await until_ready(page, "two")
            answer = page.get_by_test_id("assistant")
            found = await answer.evaluate(
                """e => ({
                    images: e.querySelectorAll('img, script').length,
                    strong: [...e.querySelectorAll('strong')].map(x => x.textContent),
                    code: [...e.querySelectorAll('code')].map(x => x.textContent),
                    links: [...e.querySelectorAll('a')].map(a => [a.textContent, a.href, a.rel]),
                    items: [...e.querySelectorAll('li')].map(x => x.textContent),
                    pwned: window.pwned ?? null,
                })"""
            )
            text = await answer.inner_text()
    assert found == {
        "images": 0,
        "strong": ["Bold"],
        "code": ["code", "<script>window.pwned=3</script>"],
        "links": [["docs", "https://example.com/docs", "noopener noreferrer"]],
        "items": ["one", "two"],
        "pwned": None,
    }
    assert '<img src=x onerror="window.pwned=1">' in text  # shown as the text it is
    assert "a trap (javascript:window.pwned=2)" in text
