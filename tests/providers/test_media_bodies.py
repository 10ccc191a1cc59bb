"""Images and documents in each provider's request body, field by field, and the refusals.

No recorded stream under tests/fixtures/recorded carries an image or a document (none
has `image_url`, `input_image`, `inlineData`, `input_file` or a `document` block), so these
bodies are checked against each API's documented shapes, and Anthropic's also against its
SDK's request types.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from llm_worker import DocumentPart, ImagePart, MediaError, Message, Request, ToolResultPart
from llm_worker.errors import InvalidMessagesError
from llm_worker.messages import ToolUsePart
from llm_worker.providers._anthropic_request import build_body as anthropic_body
from llm_worker.providers._gemini_request import build_body as gemini_body
from llm_worker.providers._openai_chat_request import build_chat_body
from llm_worker.providers._openai_responses_request import build_body as responses_body
from support.media import GIF, HEIC, JPEG, PDF, png
from support.sdk_types import mismatches

PNG = png(2, 2)
PNG64 = base64.b64encode(PNG).decode()
PDF64 = base64.b64encode(PDF).decode()
IMAGE = ImagePart.from_bytes(PNG)
REMOTE = ImagePart.from_url("https://example.com/cat.jpg")
PAPER = DocumentPart.from_bytes(PDF, name="paper.pdf")
NOTES = DocumentPart.from_text("line one\nline two", name="notes.txt")
CALL = ToolUsePart("call_1", "screenshot", {})
RESULT = ToolResultPart("call_1", "the page", name="screenshot", media=[IMAGE])


def ask(*content: str | ImagePart | DocumentPart) -> Request:
    return Request([Message.user(*content)])


def tool_round() -> Request:
    return Request([Message.user("look"), Message("assistant", [CALL]), Message("user", [RESULT])])


# -- Anthropic ---------------------------------------------------------------------------------


def test_anthropic_blocks_for_images_and_documents() -> None:
    body = anthropic_body(ask("What is this?", IMAGE, REMOTE, PAPER, NOTES), model="claude-x")
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG64},
                },
                {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": PDF64},
                    "title": "paper.pdf",
                },
                {
                    "type": "document",
                    "source": {
                        "type": "text",
                        "media_type": "text/plain",
                        "data": "line one\nline two",
                    },
                    "title": "notes.txt",
                },
            ],
        }
    ]


def test_anthropic_tool_result_holds_its_text_then_its_image() -> None:
    body = anthropic_body(tool_round(), model="claude-x")
    assert body["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "call_1",
            "content": [
                {"type": "text", "text": "the page"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG64},
                },
            ],
        }
    ]


def test_anthropic_media_bodies_fit_the_sdk_request_types() -> None:
    from anthropic.types.message_create_params import MessageCreateParamsStreaming

    url_pdf = DocumentPart.from_url("https://example.com/a.pdf")
    history = [
        *tool_round().messages,
        Message.user("and these", IMAGE, REMOTE, PAPER, NOTES, url_pdf),
    ]
    body = anthropic_body(Request(history), model="claude-x")
    assert mismatches(body, MessageCreateParamsStreaming) == []


# -- OpenAI Chat Completions ---------------------------------------------------------------------


def test_chat_parts_for_images_and_documents() -> None:
    detailed = ImagePart.from_bytes(JPEG, detail="high")
    body = build_chat_body(ask("Compare", IMAGE, detailed, REMOTE, PAPER, NOTES), "gpt-x")
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Compare"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG64}"}},
                {
                    "type": "image_url",
                    "image_url": {
                        "url": f"data:image/jpeg;base64,{base64.b64encode(JPEG).decode()}",
                        "detail": "high",
                    },
                },
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
                {
                    "type": "file",
                    "file": {
                        "filename": "paper.pdf",
                        "file_data": f"data:application/pdf;base64,{PDF64}",
                    },
                },
                {
                    "type": "text",
                    "text": '<document name="notes.txt">\nline one\nline two\n</document>',
                },
            ],
        }
    ]


def test_chat_tool_images_follow_the_tool_messages_in_a_user_message() -> None:
    two = ToolResultPart("call_2", "", name="camera", media=[IMAGE, PAPER])
    history = [
        Message.user("look"),
        Message("assistant", [CALL, ToolUsePart("call_2", "camera", {})]),
        Message("user", [RESULT, two]),
    ]
    messages = build_chat_body(Request(history), "gpt-x")["messages"]
    assert messages[2:] == [
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "the page\n[1 image in the next user message]",
        },
        {
            "role": "tool",
            "tool_call_id": "call_2",
            "content": "[1 image and 1 document in the next user message]",
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "The 1 image returned by the screenshot tool call call_1:",
                },
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG64}"}},
                {
                    "type": "text",
                    "text": "The 1 image and 1 document returned by the camera tool call call_2:",
                },
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG64}"}},
                {
                    "type": "file",
                    "file": {
                        "filename": "paper.pdf",
                        "file_data": f"data:application/pdf;base64,{PDF64}",
                    },
                },
            ],
        },
    ]


def test_a_plain_text_user_message_is_still_a_string_on_chat() -> None:
    assert build_chat_body(ask("hi"), "gpt-x")["messages"] == [{"role": "user", "content": "hi"}]


# -- OpenAI Responses ----------------------------------------------------------------------------


def test_responses_input_parts_for_images_and_documents() -> None:
    url_pdf = DocumentPart.from_url("https://example.com/a.pdf")
    low = ImagePart.from_url("https://example.com/cat.jpg", detail="low")
    body = responses_body(ask("Read", IMAGE, low, PAPER, url_pdf, NOTES), model="gpt-x")
    assert body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Read"},
                {
                    "type": "input_image",
                    "image_url": f"data:image/png;base64,{PNG64}",
                    "detail": "auto",
                },
                {
                    "type": "input_image",
                    "image_url": "https://example.com/cat.jpg",
                    "detail": "low",
                },
                {
                    "type": "input_file",
                    "filename": "paper.pdf",
                    "file_data": f"data:application/pdf;base64,{PDF64}",
                },
                {"type": "input_file", "file_url": "https://example.com/a.pdf"},
                {
                    "type": "input_text",
                    "text": '<document name="notes.txt">\nline one\nline two\n</document>',
                },
            ],
        }
    ]


def test_responses_function_call_output_holds_text_and_image() -> None:
    body = responses_body(tool_round(), model="gpt-x")
    assert body["input"][-1] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": [
            {"type": "input_text", "text": "the page"},
            {
                "type": "input_image",
                "image_url": f"data:image/png;base64,{PNG64}",
                "detail": "auto",
            },
        ],
    }


# -- Gemini --------------------------------------------------------------------------------------


def test_gemini_inline_data_and_file_data() -> None:
    remote = ImagePart.from_url("https://example.com/cat.png")
    body = gemini_body(ask("What?", IMAGE, remote, PAPER, NOTES), "gemini-2.5-flash")
    assert body["contents"] == [
        {
            "role": "user",
            "parts": [
                {"text": "What?"},
                {"inlineData": {"mimeType": "image/png", "data": PNG64}},
                {"fileData": {"mimeType": "image/png", "fileUri": "https://example.com/cat.png"}},
                {"inlineData": {"mimeType": "application/pdf", "data": PDF64}},
                {
                    "inlineData": {
                        "mimeType": "text/plain",
                        "data": base64.b64encode(b"line one\nline two").decode(),
                    }
                },
            ],
        }
    ]


def test_gemini_3_nests_a_result_image_in_the_function_response() -> None:
    parts = gemini_body(tool_round(), "gemini-3-pro-preview")["contents"][2]["parts"]
    assert parts == [
        {
            "functionResponse": {
                "name": "screenshot",
                "response": {"output": "the page"},
                "parts": [{"inlineData": {"mimeType": "image/png", "data": PNG64}}],
            }
        }
    ]


def test_gemini_2_sends_a_result_image_after_the_function_response() -> None:
    parts = gemini_body(tool_round(), "gemini-2.5-flash")["contents"][2]["parts"]
    assert parts == [
        {"functionResponse": {"name": "screenshot", "response": {"output": "the page"}}},
        {"inlineData": {"mimeType": "image/png", "data": PNG64}},
    ]


# -- refusals before sending ---------------------------------------------------------------------

BUILDERS: dict[str, Any] = {
    "anthropic": lambda r: anthropic_body(r, model="claude-x"),
    "openai_chat": lambda r: build_chat_body(r, "gpt-x"),
    "openai_responses": lambda r: responses_body(r, model="gpt-x"),
    "gemini": lambda r: gemini_body(r, "gemini-2.5-flash"),
}


@pytest.mark.parametrize(
    ("provider", "part", "message"),
    [
        (
            "anthropic",
            ImagePart.from_bytes(HEIC),
            "Anthropic does not accept image/heic images as data; it accepts image/gif, "
            "image/jpeg, image/png, image/webp",
        ),
        (
            "openai_chat",
            ImagePart.from_bytes(HEIC),
            "OpenAI Chat Completions does not accept image/heic images as data; it accepts "
            "image/gif, image/jpeg, image/png, image/webp",
        ),
        (
            "gemini",
            ImagePart.from_bytes(GIF),
            "Gemini does not accept image/gif images as data; it accepts image/heic, "
            "image/heif, image/jpeg, image/png, image/webp",
        ),
        (
            "openai_chat",
            DocumentPart.from_url("https://example.com/a.pdf"),
            "OpenAI Chat Completions does not accept application/pdf documents by URL; it "
            "accepts none",
        ),
        (
            "anthropic",
            DocumentPart.from_url("https://example.com/a.txt"),
            "Anthropic does not accept text/plain documents by URL; it accepts application/pdf",
        ),
        (
            "gemini",
            ImagePart.from_url("https://example.com/render"),
            "Gemini needs the media type of the image at 'https://example.com/render': pass "
            "media_type= to ImagePart.from_url",
        ),
    ],
)
def test_a_type_the_provider_does_not_take_is_refused_naming_what_it_takes(
    provider: str, part: ImagePart | DocumentPart, message: str
) -> None:
    with pytest.raises(MediaError) as info:
        BUILDERS[provider](ask("x", part))
    assert str(info.value).startswith(message)


@pytest.mark.parametrize("provider", sorted(BUILDERS))
def test_content_that_is_not_its_media_type_is_refused_on_every_provider(provider: str) -> None:
    liar = ImagePart(PNG, "image/jpeg")  # built directly: nothing checked it yet
    with pytest.raises(MediaError, match="says image/jpeg, but its content is image/png data"):
        BUILDERS[provider](ask("x", liar))
    in_result = ToolResultPart("call_1", "", name="screenshot", media=[liar])
    history = [Message.user("go"), Message("assistant", [CALL]), Message("user", [in_result])]
    with pytest.raises(MediaError, match="says image/jpeg"):
        BUILDERS[provider](Request(history))


@pytest.mark.parametrize(
    ("provider", "limit_mb"),
    [("anthropic", 5), ("openai_chat", 50), ("openai_responses", 50), ("gemini", 20)],
)
def test_an_image_over_the_documented_limit_is_refused(provider: str, limit_mb: int) -> None:
    # base64 makes 3 bytes 4: the largest image that fits is 3/4 of the limit.
    largest = limit_mb * 1024 * 1024 * 3 // 4
    fits = ImagePart(png() + b"\x00" * (largest - len(png())), "image/png")
    BUILDERS[provider](ask("x", fits))
    over = ImagePart(fits.data + b"\x00" * 3, "image/png")  # type: ignore[operator]
    with pytest.raises(MediaError, match=rf"at most {limit_mb} MB \(base64\).*make it smaller"):
        BUILDERS[provider](ask("x", over))


@pytest.mark.parametrize("provider", ["anthropic", "openai_chat", "openai_responses"])
def test_an_image_in_an_assistant_message_is_refused(provider: str) -> None:
    history = [Message.user("hi"), Message("assistant", [IMAGE])]
    with pytest.raises(InvalidMessagesError, match="images and documents go in user messages"):
        BUILDERS[provider](Request(history))
