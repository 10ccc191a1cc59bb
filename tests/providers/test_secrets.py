"""No API key in any message, repr or log line: the scrubber, then a scan of every error path.

The key is recognisable, and echoed back the ways a hostile or careless server does: whole,
upper-cased, lower-cased, as a long prefix, inside the error type or the request id, in a
mid-stream error event. It is also placed in `base_url` (a proxy path, Gemini's `?key=`) and
in a credential header. Every text the library writes is scanned: `str`, `repr` and `args` of
the error, its attributes, every event, the client's and transport's `repr`, and every log
record captured from every logger (httpx logs each request URL at INFO).
"""

from __future__ import annotations

import base64
import logging
import socket
import traceback
from typing import Any
from urllib.parse import quote, quote_plus

import anyio
import httpx
import orjson
import pytest

from llm_worker.errors import ConfigurationError, LLMWorkerError, ProviderError
from llm_worker.events import Event
from llm_worker.messages import Message, Request
from llm_worker.providers import (
    AnthropicClient,
    GeminiClient,
    HttpClient,
    OpenAIChatClient,
    OpenAIResponsesClient,
)
from llm_worker.providers._http import RetryPolicy, Transport
from llm_worker.providers._secrets import Scrubber, header_secrets, url_secrets
from llm_worker.testing import WireResponse, WireServer

# Every test runs over both transports (httpx and aiohttp).
pytestmark = pytest.mark.usefixtures("http_transport")

KEY = "sk-proj-Sc4nK3y0123456789abcdefGHIJKLmnopqrstuvWXYZ"
PROVIDERS = ("anthropic", "openai_chat", "openai_responses", "gemini")
_CLIENTS: dict[str, tuple[type[HttpClient], str]] = {
    "anthropic": (AnthropicClient, ""),
    "openai_chat": (OpenAIChatClient, "/v1"),
    "openai_responses": (OpenAIResponsesClient, "/v1"),
    "gemini": (GeminiClient, "/v1beta"),
}


def leaks(text: str, key: str = KEY) -> list[str]:
    """Every run of 12 characters of `key` found in `text`, case ignored."""
    lowered, secret = text.lower(), key.lower()
    return [secret[i : i + 12] for i in range(len(key) - 11) if secret[i : i + 12] in lowered]


def assert_clean(*texts: object) -> None:
    for text in texts:
        found = leaks(str(text))
        assert not found, f"key material {found[:3]} in {str(text)[:300]!r}"


def assert_error_clean(error: BaseException) -> None:
    assert_clean(str(error), repr(error), *error.args)
    if isinstance(error, ProviderError):
        assert_clean(error.message, error.error_type, error.request_id)


# --- the scrubber -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "echo",
    [KEY, KEY.upper(), KEY.lower(), KEY.swapcase(), KEY[:12], KEY[:30], KEY[-14:], KEY[9:25]],
    ids=["whole", "upper", "lower", "swapped", "prefix-12", "prefix-30", "suffix", "middle"],
)
def test_the_key_and_every_long_run_of_it_are_masked(echo: str) -> None:
    scrubbed = Scrubber([KEY]).scrub(f"Incorrect API key provided: {echo}. See docs.")
    assert scrubbed == "Incorrect API key provided: ***. See docs."


def test_short_runs_and_short_keys_are_left_alone() -> None:
    scrubber = Scrubber([KEY, "ollama", None])
    assert scrubber.scrub(f"prefix {KEY[:11]} and ollama") == f"prefix {KEY[:11]} and ollama"
    # A key of 8 to 11 characters is matched whole, case ignored.
    assert Scrubber(["k3y-ABCD9"]).scrub("got K3Y-abcd9 and k3y-ABC") == "got *** and k3y-ABC"
    assert not Scrubber(["short"])


def test_two_overlapping_echoes_make_one_mask() -> None:
    text = f"{KEY[:20]}{KEY[15:]}|{KEY.upper()}"
    assert Scrubber([KEY]).scrub(text) == "***|***"


def test_credentials_are_found_in_urls_and_headers() -> None:
    url = "https://user:pa55word-xyz@proxy.test/v1?key=AIzaSyA-0123456789&alt=sse&sig=s1gnature99"
    assert url_secrets(url) == ["user", "pa55word-xyz", "AIzaSyA-0123456789", "s1gnature99"]
    headers = {"Authorization": "Bearer tok-0123456789", "api-key": "azure-0123456789", "x": "y"}
    assert header_secrets(headers) == [
        "Bearer tok-0123456789",
        "tok-0123456789",
        "azure-0123456789",
    ]


# --- every error path ---------------------------------------------------------------------------


def make(provider: str, base_url: str, *, api_key: str | None = KEY, **options: Any) -> HttpClient:
    cls, suffix = _CLIENTS[provider]
    options.setdefault("retry", RetryPolicy.disabled())
    return cls(model="m", api_key=api_key, base_url=base_url + suffix, **options)


def json_error(status: int, body: object, **options: Any) -> WireResponse:
    return WireResponse(
        orjson.dumps(body), status=status, content_type="application/json", **options
    )


ECHOES = {
    "upper-in-message": json_error(401, {"error": {"message": f"bad key {KEY.upper()}"}}),
    "prefix-in-message": json_error(400, {"error": {"message": f"key {KEY[:24]}... invalid"}}),
    "in-error-type": json_error(403, {"error": {"type": KEY, "message": "denied"}}),
    "in-request-id-header": json_error(
        500, {"error": {"message": "boom"}}, headers={"x-request-id": f"req_{KEY}"}
    ),
    "in-request-id-body": json_error(
        529,
        {"type": "error", "error": {"type": "overloaded_error", "message": "x"}, "request_id": KEY},
    ),
    "html-title": WireResponse(f"<html><title>{KEY.lower()}</title></html>", status=502),
    "plain-text": WireResponse(f"no: {KEY[3:40]}", status=500, content_type="text/plain"),
    "html-as-stream": WireResponse(f"<html><title>{KEY}</title></html>"),
}

MID_STREAM = {
    "anthropic": "event: error\ndata: "
    + orjson.dumps(
        {"type": "error", "error": {"type": KEY, "message": f"{KEY.upper()}"}, "request_id": KEY}
    ).decode()
    + "\n\n",
    "openai_chat": "data: "
    + orjson.dumps({"error": {"message": f"key {KEY}", "type": KEY[:20], "code": 500}}).decode()
    + "\n\n",
    "openai_responses": "data: "
    + orjson.dumps({"type": "error", "code": KEY, "message": KEY.lower()}).decode()
    + "\n\n",
    "gemini": "data: "
    + orjson.dumps({"error": {"code": 500, "message": KEY, "status": KEY.upper()}}).decode()
    + "\n\n",
}


async def failing_run(client: HttpClient) -> tuple[list[Event], LLMWorkerError]:
    events: list[Event] = []
    with pytest.raises(LLMWorkerError) as info:
        await drain(client, events)
    await client.aclose()
    return events, info.value


async def drain(client: HttpClient, into: list[Event]) -> None:
    with anyio.fail_after(10):
        async for event in client.stream(Request([Message.user("hi")])):
            into.append(event)


def scan(client: HttpClient, events: list[Event], error: BaseException, caplog: Any) -> None:
    assert_error_clean(error)
    assert_clean("".join(traceback.format_exception(error)))  # the chained causes too
    assert_clean(repr(client), repr(client.transport), *map(repr, events))
    records = caplog.records
    assert records, "httpx's request line was captured"
    for record in records:
        assert_clean(record.getMessage())


@pytest.fixture
def everything(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    return caplog


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("echo", ECHOES, ids=list(ECHOES))
async def test_no_echo_of_the_key_reaches_any_text(
    provider: str, echo: str, everything: pytest.LogCaptureFixture
) -> None:
    async with WireServer([ECHOES[echo]]) as server:
        client = make(provider, server.base_url)
        events, error = await failing_run(client)
    scan(client, events, error, everything)


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_mid_stream_error_event_echoing_the_key(
    provider: str, everything: pytest.LogCaptureFixture
) -> None:
    async with WireServer([WireResponse(MID_STREAM[provider])]) as server:
        client = make(provider, server.base_url)
        events, error = await failing_run(client)
    assert isinstance(error, ProviderError)
    scan(client, events, error, everything)


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("where", ["query", "path", "userinfo", "header"])
async def test_a_key_in_the_url_or_a_header_never_shows(
    provider: str, where: str, everything: pytest.LogCaptureFixture
) -> None:
    # The key reaches the server only as the client was told to send it; the server echoes
    # it back in its error, and httpx logs the request URL.
    echo = json_error(401, {"error": {"message": f"unknown key {KEY}", "type": KEY.upper()}})
    async with WireServer([echo]) as server:
        client = _placed(provider, server.base_url, where)
        events, error = await failing_run(client)
    scan(client, events, error, everything)


def _placed(provider: str, base: str, where: str) -> HttpClient:
    cls, suffix = _CLIENTS[provider]
    retry = RetryPolicy.disabled()
    if where == "query":
        return cls(model="m", base_url=f"{base}{suffix}?key={KEY}", retry=retry)
    if where == "path":
        return cls(model="m", api_key=KEY, base_url=f"{base}/{KEY}{suffix}", retry=retry)
    if where == "userinfo":
        host = base.removeprefix("http://")
        return cls(model="m", base_url=f"http://proxy:{KEY}@{host}{suffix}", retry=retry)
    return cls(model="m", base_url=base + suffix, headers={"api-key": KEY}, retry=retry)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_connection_error_to_a_url_with_the_key(
    provider: str, everything: pytest.LogCaptureFixture
) -> None:
    cls, suffix = _CLIENTS[provider]
    client = cls(
        model="m",
        base_url=f"http://127.0.0.1:{closed_port()}{suffix}?key={KEY}",
        retry=RetryPolicy.disabled(),
    )
    events, error = await failing_run(client)
    assert_error_clean(error)
    assert_clean(repr(client), *map(repr, events))
    for record in everything.records:
        assert_clean(record.getMessage())


@pytest.mark.anyio
async def test_a_timeout_names_the_url_without_the_key() -> None:
    async with WireServer([WireResponse("data: x\n\n", first_byte_delay=2.0)]) as server:
        client = OpenAIChatClient(
            model="m",
            base_url=f"{server.base_url}/v1?api_key={KEY}",
            timeout=0.2,
            retry=RetryPolicy.disabled(),
        )
        _, error = await failing_run(client)
    assert "in time" in str(error)
    assert_error_clean(error)


def test_a_bad_base_url_with_the_key_does_not_show_it() -> None:
    for url in (f"ftp://h/?key={KEY}", f"http://[::1/?key={KEY}"):
        with pytest.raises(ConfigurationError) as info:
            Transport(provider="p", base_url=url, headers={}, secret=KEY)
        assert_error_clean(info.value)
        assert info.value.__cause__ is None


def test_the_transport_repr_keeps_the_url_readable() -> None:
    t = Transport(provider="p", base_url=f"https://x.test/v1/?key={KEY}", headers={}, secret=None)
    assert repr(t) == "Transport(provider='p', base_url='https://x.test/v1?key=***')"


# --- the key as it is echoed: encoded, malformed, in a chained exception ----------------------

# Every 12 characters of it hold a character that URL encoding changes.
ODD_KEY = "sk-Odd+Key/9=abc+def/ghi=jkl+mno/pqr"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    "echo",
    [
        quote(ODD_KEY, safe=""),
        quote(ODD_KEY),
        quote_plus(ODD_KEY),
        ODD_KEY.replace("/", "\\/"),
        quote(ODD_KEY, safe="").lower(),
    ],
    ids=["url-encoded", "path-encoded", "form-encoded", "json-escaped", "encoded-lowered"],
)
def test_an_encoded_echo_of_the_key_is_masked(echo: str) -> None:
    assert Scrubber([ODD_KEY]).scrub(f"GET /v1?key={echo} failed") == "GET /v1?key=*** failed"


@pytest.mark.parametrize("user", ["", "u", "us", "user"])
def test_the_key_in_base64_is_masked_whatever_precedes_it(user: str) -> None:
    # A Basic Authorization header echoed back: base64 of `user:key`.
    encoded = _b64(f"{user}:{ODD_KEY}" if user else ODD_KEY)
    scrubbed = Scrubber([ODD_KEY]).scrub(f"Basic {encoded}")
    assert "***" in scrubbed
    # Left unmasked: the groups that mix in the user's bytes, and the last partial group.
    assert len(scrubbed) <= len("Basic ") + 2 * 4 + len("***") + 4, scrubbed


def test_a_token_alone_in_the_user_info_is_a_credential() -> None:
    encoded = quote(ODD_KEY, safe="")
    assert url_secrets(f"https://{encoded}@proxy.test/v1") == [encoded, ODD_KEY]


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("where", ["query", "userinfo-token"])
async def test_an_encoded_key_in_the_url_never_shows(
    provider: str, where: str, everything: pytest.LogCaptureFixture
) -> None:
    cls, suffix = _CLIENTS[provider]
    echo = json_error(401, {"error": {"message": f"unknown key {quote(ODD_KEY, safe='')}"}})
    async with WireServer([echo]) as server:
        host = server.base_url.removeprefix("http://")
        url = (
            f"{server.base_url}{suffix}?key={quote(ODD_KEY, safe='')}"
            if where == "query"
            else f"http://{quote(ODD_KEY, safe='')}@{host}{suffix}"
        )
        client = cls(model="m", base_url=url, retry=RetryPolicy.disabled())
        _, error = await failing_run(client)
    for text in (repr(client), str(error), *(r.getMessage() for r in everything.records)):
        for form in (ODD_KEY, quote(ODD_KEY, safe="")):
            assert not leaks(text, form), text


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    "key",
    [KEY + "\n", " " + KEY, KEY + "\x00", KEY + "\u00e9", "\u043a\u043b\u044e\u0447-" + KEY],
    ids=["newline", "leading-space", "nul", "latin-1", "cyrillic"],
)
def test_a_key_no_header_can_carry_is_a_configuration_error(provider: str, key: str) -> None:
    # It used to fail each attempt as a retried connection error, or as a "malformed
    # stream", and h11's message in the traceback quoted the whole key.
    cls, suffix = _CLIENTS[provider]
    with pytest.raises(ConfigurationError, match="not a valid HTTP header value") as info:
        cls(model="m", api_key=key, base_url="http://127.0.0.1:9" + suffix)
    assert_error_clean(info.value)
    assert_clean("".join(traceback.format_exception(info.value)))


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_http_error_quoting_the_key_is_not_chained(provider: str) -> None:
    # A proxy or transport whose error text quotes the request URL, key included.
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"proxy refused {request.url}", request=request)

    cls, suffix = _CLIENTS[provider]
    async with httpx.AsyncClient(transport=httpx.MockTransport(refuse)) as http:
        client = cls(
            model="m",
            base_url=f"http://proxy.test{suffix}?api_key={KEY}",
            http_client=http,
            retry=RetryPolicy.disabled(),
        )
        _, error = await failing_run(client)
    assert_error_clean(error)
    assert_clean("".join(traceback.format_exception(error)))
