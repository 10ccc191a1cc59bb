"""Review probes of issue 28 item 8: which Claude model names take the sampling parameters.

Model ids come bare, dated, with Bedrock's and Vertex's decorations, from proxies with dots
for the version, or in another case; the parse must not read a newer model as an older one
(the API then refuses the request with HTTP 400) nor an older one as newer (the library
refuses a request the API takes).
"""

from __future__ import annotations

import pytest

from llm_worker.errors import ConfigurationError
from llm_worker.messages import Message, Request
from llm_worker.providers._anthropic_request import build_body
from llm_worker.providers._anthropic_thinking import claude, takes_sampling

NEWER = (
    "claude-opus-4-7",
    "claude-opus-4-7-20260416",
    "anthropic.claude-opus-4-7",
    "anthropic.claude-opus-4-7-v1:0",
    "us.anthropic.claude-opus-4-7-v1:0",
    "claude-opus-4-7@20260416",
    "publishers/anthropic/models/claude-opus-4-7",
    "anthropic/claude-opus-4.7",  # a proxy's dotted version
    "claude-opus-4.8",
    "Claude-Opus-4-7",
    "claude-sonnet-5",
    "claude-sonnet-5-5",
    "claude-opus-4-10",  # a two-digit minor is a version, not a date
)
OLDER = (
    "claude-sonnet-4-5-20250929",
    "claude-opus-4-6",
    "claude-opus-4.6",
    "anthropic/claude-3.5-sonnet",
    "us.anthropic.claude-3-7-sonnet-20250219-v1:0",
    "claude-3-5-haiku@20241022",
    "claude-opus-4-1-20250805",
    "claude-opus-4-20250514",  # a date after the major: Opus 4.0
    "claude-2.1",
    "claude-instant-1.2",
)
UNKNOWN = ("claude-opus-latest", "my-proxy-alias", "claude")


@pytest.mark.parametrize("model", NEWER)
def test_newer_models_take_no_sampling(model: str) -> None:
    assert not takes_sampling(model)
    with pytest.raises(ConfigurationError, match="temperature"):
        build_body(Request([Message.user("hi")], temperature=0.2), model=model)
    body = build_body(Request([Message.user("hi")], temperature=1), model=model)
    assert "temperature" not in body


@pytest.mark.parametrize("model", OLDER + UNKNOWN)
def test_older_and_unknown_models_get_the_temperature(model: str) -> None:
    assert takes_sampling(model)
    body = build_body(Request([Message.user("hi")], temperature=0.2), model=model)
    assert body["temperature"] == 0.2


def test_a_date_is_never_read_as_a_minor_version() -> None:
    caps = claude("claude-opus-4-20250514")
    assert caps is not None and caps.sampling and not caps.adaptive


def test_the_default_temperature_from_options_is_not_refused() -> None:
    # temperature=1 is the default the newer models run at: left out, from either place.
    request = Request([Message.user("hi")], options={"temperature": 1})
    assert "temperature" not in build_body(request, model="claude-opus-4-7")
