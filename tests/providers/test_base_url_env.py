"""Base URLs from the environment, read as each official SDK reads them.

`OPENAI_BASE_URL` (the OpenAI SDK: the root with `/v1`), `ANTHROPIC_BASE_URL` (the Anthropic
SDK: the root without `/v1`), `GOOGLE_GEMINI_BASE_URL` (google-genai: the root without the API
version, which the SDK appends). An explicit `base_url` wins over the variable.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio
import pytest

from llm_worker import Message, Request
from llm_worker.errors import ConfigurationError, ProviderError
from llm_worker.events import BlockDelta, TextDelta
from llm_worker.providers import HttpClient, RetryPolicy, from_string
from llm_worker.testing import ScriptedModelServer, ScriptedResponse

pytestmark = pytest.mark.anyio

VARIABLES = ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL")
KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


@dataclass(frozen=True)
class Case:
    """A model string, its wire format and variable, and the request path it leads to."""

    model: str
    wire: str
    variable: str
    tail: str  # what the variable holds beyond the server's root, as the SDK documents it
    path: str
    root: str  # what an explicit base_url holds beyond the server's root


CASES = [
    Case("openai:m", "openai_chat", "OPENAI_BASE_URL", "/v1", "/v1/chat/completions", "/v1"),
    Case(
        "openai-responses:m", "openai_responses", "OPENAI_BASE_URL", "/v1", "/v1/responses", "/v1"
    ),
    Case("anthropic:m", "anthropic", "ANTHROPIC_BASE_URL", "", "/v1/messages", ""),
    Case(
        "gemini:m",
        "gemini",
        "GOOGLE_GEMINI_BASE_URL",
        "/",
        "/v1beta/models/m:streamGenerateContent",
        "/v1beta",
    ),
]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*VARIABLES, *KEYS):
        monkeypatch.delenv(name, raising=False)


async def answer(client: HttpClient) -> str:
    texts: list[str] = []
    with anyio.fail_after(10):
        async with client:
            async for event in client.stream(Request([Message.user("hi")])):
                if isinstance(event, BlockDelta) and isinstance(event.delta, TextDelta):
                    texts.append(event.delta.text)
    return "".join(texts)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.wire)
async def test_a_model_string_goes_where_the_variable_says(
    monkeypatch: pytest.MonkeyPatch, case: Case
) -> None:
    script = [ScriptedResponse.text("from env")]
    async with ScriptedModelServer(case.wire, script, model="m") as server:
        monkeypatch.setenv(case.variable, server.base_url + case.tail)
        # No key: a base URL of one's own may need none, as with base_url=.
        assert await answer(from_string(case.model)) == "from env"
    [request] = server.requests
    assert request.path == case.path
    assert not any(h in request.headers for h in ("authorization", "x-api-key", "x-goog-api-key"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.wire)
async def test_an_explicit_base_url_wins_over_the_variable(
    monkeypatch: pytest.MonkeyPatch, case: Case
) -> None:
    script = [ScriptedResponse.text("explicit")]
    async with (
        ScriptedModelServer(case.wire, script, model="m") as chosen,
        ScriptedModelServer(case.wire, [], model="m") as ignored,
    ):
        monkeypatch.setenv(case.variable, ignored.base_url + case.tail)
        client = from_string(case.model, base_url=chosen.base_url + case.root)
        assert await answer(client) == "explicit"
    assert [r.path for r in chosen.requests] == [case.path]
    assert ignored.requests == []


def test_an_empty_variable_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "")
    client = from_string("anthropic:m", api_key="k")
    assert client.transport.base_url == "https://api.anthropic.com"


def test_the_variable_of_another_provider_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    assert from_string("anthropic:m", api_key="k").transport.base_url == "https://api.anthropic.com"
    gemini = from_string("gemini:m", api_key="k").transport.base_url
    assert gemini == "https://generativelanguage.googleapis.com/v1beta"


def test_a_variable_that_is_no_url_names_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "localhost:8000/v1")
    with pytest.raises(ConfigurationError, match=r"^OPENAI_BASE_URL is not a usable base URL"):
        from_string("openai:m", api_key="k")


SECRET = "sk-live-0123456789abcdef"  # what must never show


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.wire)
@pytest.mark.parametrize(
    "padding", ["  {}  ", "{}\n", "{}//"], ids=["spaces", "newline", "slashes"]
)
async def test_a_variable_with_padding_still_reaches_the_server(
    monkeypatch: pytest.MonkeyPatch, case: Case, padding: str
) -> None:
    script = [ScriptedResponse.text("padded")]
    async with ScriptedModelServer(case.wire, script, model="m") as server:
        monkeypatch.setenv(case.variable, padding.format(server.base_url + case.tail))
        assert await answer(from_string(case.model)) == "padded"
    assert [r.path for r in server.requests] == [case.path]


def test_a_blank_variable_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", " \n")
    client = from_string("anthropic:m", api_key="k")
    assert client.transport.base_url == "https://api.anthropic.com"


@pytest.mark.parametrize(
    "value",
    [
        f"http://127.0.0.1:1/v1 {SECRET}",
        SECRET,  # the key pasted into the wrong variable
        f"http://[::1/{SECRET}",
    ],
    ids=["whitespace", "a key", "unparsable"],
)
def test_a_rejected_variable_is_named_and_its_secret_never_shown(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    # The error names the variable, and never repeats what may be a key. (A query string is
    # kept, with the request path joined before it: tests/providers/test_hostile_input.py.)
    monkeypatch.setenv("OPENAI_BASE_URL", value)
    with pytest.raises(ConfigurationError, match=r"^OPENAI_BASE_URL is not a usable") as raised:
        from_string("openai:m", api_key="k")
    assert SECRET not in str(raised.value)
    assert SECRET not in str(raised.value.__cause__)


async def test_credentials_in_a_base_url_never_show_in_a_repr_or_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://proxy-user:{SECRET}@127.0.0.1:1")
    client = from_string("anthropic:m", api_key="k", retry=RetryPolicy.disabled())
    assert client.transport.base_url == f"http://proxy-user:{SECRET}@127.0.0.1:1"  # still sent
    assert SECRET not in repr(client)
    assert "127.0.0.1:1" in repr(client)
    assert SECRET not in repr(client.transport)
    with pytest.raises(ProviderError) as raised:  # nothing listens on port 1
        await answer(client)
    assert "127.0.0.1:1" in str(raised.value)
    assert SECRET not in str(raised.value)
