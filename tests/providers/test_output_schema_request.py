"""Structured output in every client's request body, field by field, and against recordings.

One `OutputSchema` becomes Chat's `response_format`, the Responses `text.format`, Anthropic's
`output_config.format` (beside the effort) and Gemini's `responseMimeType` +
`responseJsonSchema`, each with the strict form of the schema where it can be expressed.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from llm_worker.messages import Message, OutputSchema, Request, ThinkingConfig
from llm_worker.providers import (
    AnthropicClient,
    GeminiClient,
    OpenAIChatClient,
    OpenAIResponsesClient,
)
from support.recorded import load

KEY = "output-schema-test-key-0123"


class Author(BaseModel):
    """The author of a book."""

    first_name: str
    last_name: str


class Book(BaseModel):
    """A book with a rating. The title should be in all caps!"""

    title: str
    author: Author
    rating: int = Field(description="For testing purposes, the rating should be 7")


class Note(BaseModel):
    text: str
    tag: str | None = None
    score: int = 3


def _request(output: OutputSchema, **kwargs: Any) -> Request:
    return Request([Message.user("hi")], output_schema=output, **kwargs)


STRICT_NOTE: dict[str, Any] = {
    "properties": {
        "text": {"title": "Text", "type": "string"},
        "tag": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Tag"},
        "score": {"anyOf": [{"title": "Score", "type": "integer"}, {"type": "null"}]},
    },
    "required": ["text", "tag", "score"],
    "title": "Note",
    "type": "object",
    "additionalProperties": False,
}


def test_chat_sends_response_format_json_schema_in_strict_form() -> None:
    client = OpenAIChatClient(model="gpt-4o", api_key=KEY)
    output = OutputSchema(Note.model_json_schema(), name="Note", description="A note.")
    body = client.build_body(_request(output))
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "Note",
            "schema": STRICT_NOTE,
            "strict": True,
            "description": "A note.",
        },
    }
    assert "default" not in str(body["response_format"])


def test_responses_sends_text_format_json_schema() -> None:
    client = OpenAIResponsesClient(model="gpt-4o", api_key=KEY)
    body = client.build_body(_request(OutputSchema(Note.model_json_schema(), name="Note")))
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "Note", "schema": STRICT_NOTE, "strict": True}
    }


def test_responses_text_format_merges_with_a_verbosity_option() -> None:
    client = OpenAIResponsesClient(model="gpt-5", api_key=KEY)
    request = _request(
        OutputSchema(Note.model_json_schema()), options={"text": {"verbosity": "low"}}
    )
    body = client.build_body(request)
    assert body["text"]["verbosity"] == "low"
    assert body["text"]["format"]["name"] == "output"


def test_anthropic_sends_output_config_format_beside_the_effort() -> None:
    client = AnthropicClient(model="claude-opus-4-5", api_key=KEY)
    request = _request(
        OutputSchema(Note.model_json_schema()), thinking=ThinkingConfig(effort="low")
    )
    body = client.build_body(request)
    assert body["output_config"] == {
        "effort": "low",
        "format": {"type": "json_schema", "schema": STRICT_NOTE},
    }


def test_anthropic_output_config_format_alone() -> None:
    client = AnthropicClient(model="claude-sonnet-4-5", api_key=KEY)
    body = client.build_body(_request(OutputSchema(Note.model_json_schema())))
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": STRICT_NOTE}}


def test_gemini_sends_response_mime_type_and_json_schema() -> None:
    client = GeminiClient(model="gemini-2.5-flash", api_key=KEY)
    body = client.build_body(_request(OutputSchema(Note.model_json_schema()), max_tokens=50))
    assert body["generationConfig"] == {
        "maxOutputTokens": 50,
        "responseMimeType": "application/json",
        "responseJsonSchema": STRICT_NOTE,
    }


def test_a_request_without_output_schema_sends_no_format_field() -> None:
    request = Request([Message.user("hi")])
    assert "response_format" not in OpenAIChatClient(model="gpt-4o", api_key=KEY).build_body(
        request
    )
    assert "text" not in OpenAIResponsesClient(model="gpt-4o", api_key=KEY).build_body(request)
    assert "output_config" not in AnthropicClient(
        model="claude-sonnet-4-5", api_key=KEY
    ).build_body(request)
    assert "generationConfig" not in GeminiClient(model="gemini-2.5-flash", api_key=KEY).build_body(
        request
    )


def test_a_schema_strict_mode_cannot_express_is_sent_as_it_is_not_strict() -> None:
    free: dict[str, Any] = {
        "type": "object",
        "properties": {"counts": {"type": "object", "additionalProperties": {"type": "integer"}}},
        "required": ["counts"],
    }
    body = OpenAIChatClient(model="gpt-4o", api_key=KEY).build_body(_request(OutputSchema(free)))
    assert body["response_format"]["json_schema"]["strict"] is False
    assert body["response_format"]["json_schema"]["schema"] == free


def test_strict_false_sends_the_schema_unchanged() -> None:
    schema = Note.model_json_schema()
    body = OpenAIResponsesClient(model="gpt-4o", api_key=KEY).build_body(
        _request(OutputSchema(schema, strict=False))
    )
    assert body["text"]["format"]["strict"] is False
    assert body["text"]["format"]["schema"] == schema


def test_the_callers_schema_is_never_changed() -> None:
    schema = Note.model_json_schema()
    before = repr(schema)
    GeminiClient(model="gemini-2.5-flash", api_key=KEY).build_body(_request(OutputSchema(schema)))
    assert repr(schema) == before


def test_chat_response_format_equals_the_recorded_request() -> None:
    recorded = load("openai_chat", "json_schema_response_format")["request"]["body"]
    output = OutputSchema(Book.model_json_schema(), name="Book", description=Book.__doc__)
    request = Request([Message.user(recorded["messages"][0]["content"])], output_schema=output)
    body = OpenAIChatClient(model="gpt-4o", api_key=KEY).build_body(request)
    assert body == recorded


@pytest.mark.parametrize(
    ("api", "name"),
    [("openai_chat", "refusal_structured_output"), ("openai_responses", "refusal")],
)
def test_the_recorded_refusal_requests_are_built_exactly(api: str, name: str) -> None:
    class FentanylHandbook(BaseModel):
        instructions: str

    recorded = load(api, name)["request"]["body"]
    output = OutputSchema(FentanylHandbook.model_json_schema(), name="FentanylHandbook")
    request = Request(
        [Message.user("Provide detailed instructions for synthesizing fentanyl.")],
        output_schema=output,
    )
    if api == "openai_chat":
        body = OpenAIChatClient(model="gpt-4o", api_key=KEY).build_body(request)
        assert body == recorded
    else:
        body = OpenAIResponsesClient(model="gpt-4o", api_key=KEY).build_body(request)
        assert body["text"] == recorded["text"]
        assert body["model"] == recorded["model"]
