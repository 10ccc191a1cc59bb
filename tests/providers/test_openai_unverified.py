"""An unverified organization's refusals become a ConfigurationError saying how to fix them.

OpenAI answers HTTP 400 to an organization that is not verified when it asks to stream some
models (o3 and later), on both APIs. Retrying cannot help; the caller must verify or choose
another model, so the error says so, with OpenAI's own words kept and the HTTP error chained.
"""

from __future__ import annotations

import anyio
import orjson
import pytest

from llm_worker.errors import APIStatusError, ConfigurationError, LLMWorkerError
from llm_worker.messages import Message, Request
from llm_worker.providers import HttpClient, OpenAIChatClient, OpenAIResponsesClient
from llm_worker.providers._http import RetryPolicy
from llm_worker.testing import WireResponse, WireServer

pytestmark = pytest.mark.anyio

STREAM = (
    "Your organization must be verified to stream this model. Please go to: "
    "https://platform.openai.com/settings/organization/general and click on Verify "
    "Organization. If you just verified, it can take up to 15 minutes for access to propagate."
)
OTHER = "Invalid value for 'temperature': must be at most 2."


def refusal(message: str) -> WireResponse:
    error = {"message": message, "type": "invalid_request_error", "param": "stream", "code": None}
    body = orjson.dumps({"error": error})
    return WireResponse(body, status=400, content_type="application/json")


async def first_error(cls: type[HttpClient], answer: WireResponse) -> BaseException:
    async with WireServer([answer]) as server:
        client = cls(
            model="o3",
            api_key="sk-test-0123456789",
            base_url=server.base_url + "/v1",
            retry=RetryPolicy.disabled(),
        )
        try:
            with anyio.fail_after(10), pytest.raises(LLMWorkerError) as raised:
                async for _ in client.stream(Request([Message.user("hi")])):
                    pass
        finally:
            await client.aclose()
    return raised.value


@pytest.mark.parametrize("cls", [OpenAIChatClient, OpenAIResponsesClient])
async def test_an_unverified_organization_streaming_a_model_is_told_how_to_fix_it(
    cls: type[HttpClient],
) -> None:
    error = await first_error(cls, refusal(STREAM))
    assert isinstance(error, ConfigurationError)
    assert "Verify the organization" in str(error) and STREAM in str(error)
    assert isinstance(error.__cause__, APIStatusError)


@pytest.mark.parametrize("cls", [OpenAIChatClient, OpenAIResponsesClient])
async def test_another_400_stays_an_api_status_error(cls: type[HttpClient]) -> None:
    error = await first_error(cls, refusal(OTHER))
    assert isinstance(error, APIStatusError) and OTHER in str(error)
