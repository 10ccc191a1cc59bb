"""The message converters both ways, every opaque field included."""

from __future__ import annotations

import pytest

from llm_worker import Message
from llm_worker.errors import InvalidMessagesError
from llm_worker.messages import (
    Citation,
    DocumentPart,
    ImagePart,
    Origin,
    ProviderPart,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    ToolUsePart,
)
from llm_worker.ui import messages_from_agui, messages_from_ui, messages_to_agui, messages_to_ui

ORIGIN = Origin("anthropic", "claude")
HISTORY = [
    Message.user("Plan my day"),
    Message(
        "assistant",
        [
            ThinkingPart("hmm", signature="sig-1", origin=ORIGIN),
            ThinkingPart("", redacted="opaque-blob", origin=ORIGIN),
            TextPart(
                "Looking",
                item_id="msg_1",
                phase="commentary",
                origin=ORIGIN,
                citations=[Citation({"type": "url"}, url="https://example.com", title="Ex")],
            ),
            ProviderPart({"type": "server_tool_use", "id": "srv_1"}, origin=ORIGIN),
            ToolUsePart("c1", "calendar", {"day": "Mon"}, signature="ts", origin=ORIGIN),
            ThinkingPart("then more", signature="sig-2", origin=ORIGIN),
            TextPart(" and booking."),
            ToolUsePart("c2", "book", {"slot": 9}, caller={"type": "direct"}, origin=ORIGIN),
            ToolUsePart("c3", "email", {}),
        ],
    ),
    Message(
        "user",
        [
            ToolResultPart("c1", "free at 9", name="calendar"),
            ToolResultPart("c2", "Denied: not now", is_error=True, name="book"),
            ToolResultPart("c3", "TypeError: boom", is_error=True, name="email"),
        ],
    ),
    Message("assistant", [TextPart("Monday 9 is free; I did not book.")]),
    Message.user("Thanks"),
]


def test_ui_messages_round_trip_the_history_exactly() -> None:
    ui = messages_to_ui(HISTORY)
    assert [m["role"] for m in ui] == ["user", "assistant", "user"]
    assert messages_from_ui(ui) == HISTORY
    states = [p.get("state") for p in ui[1]["parts"] if p["type"].startswith("tool-")]
    assert states == ["output-available", "output-denied", "output-error"]
    shown = " ".join(str(p.get("text", "")) for p in ui[1]["parts"])
    assert "sig-1" not in shown
    assert "opaque-blob" not in shown


def test_agui_messages_round_trip_the_history_exactly() -> None:
    agui = messages_to_agui(HISTORY)
    roles = [m["role"] for m in agui]
    assert roles == [
        "user", "reasoning", "reasoning", "reasoning", "assistant", "tool", "tool", "tool",
        "assistant", "user",
    ]  # fmt: skip
    assert messages_from_agui(agui) == HISTORY
    tools = [m for m in agui if m["role"] == "tool"]
    assert [("error" in m) for m in tools] == [False, True, True]


def test_agui_messages_without_llm_worker_data_still_make_a_history() -> None:
    plain = [
        {"id": "1", "role": "user", "content": "hi"},
        {"id": "2", "role": "reasoning", "content": "thinking"},
        {
            "id": "3",
            "role": "assistant",
            "content": "calling",
            "toolCalls": [
                {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"id": "4", "role": "tool", "toolCallId": "t1", "content": "ok"},
        {"id": "5", "role": "activity", "activityType": "progress", "content": {}},
    ]
    assert messages_from_agui(plain) == [
        Message.user("hi"),
        Message(
            "assistant", [ThinkingPart("thinking"), TextPart("calling"), ToolUsePart("t1", "f", {})]
        ),
        Message("user", [ToolResultPart("t1", "ok", name="f")]),
    ]


@pytest.mark.parametrize(
    ("convert", "messages", "needle"),
    [
        (messages_from_ui, [{"role": "system", "parts": []}], "system"),
        (messages_from_ui, ["not a message"], "None"),
        (messages_from_agui, [{"id": "1", "role": "developer", "content": "x"}], "developer"),
        (messages_from_agui, [{"id": "1", "role": "tool", "content": "x"}], "toolCallId"),
    ],
)
def test_messages_that_are_not_valid_get_a_typed_error(
    convert: object, messages: list[object], needle: str
) -> None:
    with pytest.raises(InvalidMessagesError, match=needle):
        convert(messages)  # type: ignore[operator]


PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)
WITH_MEDIA = [
    Message(
        "user",
        [
            TextPart("What is in these?"),
            ImagePart.from_bytes(PNG, detail="low"),
            ImagePart.from_url("https://example.com/cat.png"),
            DocumentPart.from_text("meeting notes", name="notes.txt"),
        ],
    ),
    Message.assistant("A pixel, a cat and your notes."),
]


def test_user_images_and_documents_round_trip_through_both_protocols() -> None:
    ui = messages_to_ui(WITH_MEDIA)
    files = [p for p in ui[0]["parts"] if p["type"] == "file"]
    assert [f["mediaType"] for f in files] == ["image/png", "image/png", "text/plain"]
    assert files[0]["url"].startswith("data:image/png;base64,")
    assert messages_from_ui(ui) == WITH_MEDIA
    agui = messages_to_agui(WITH_MEDIA)
    assert [c["type"] for c in agui[0]["content"]] == ["text", "image", "image", "document"]
    assert messages_from_agui(agui) == WITH_MEDIA


def test_a_file_that_is_not_its_media_type_is_refused() -> None:
    part = {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,aGVsbG8="}
    with pytest.raises(InvalidMessagesError):
        messages_from_ui([{"role": "user", "parts": [part]}])


def test_images_a_tool_returned_stay_with_its_result() -> None:
    history = [
        Message.user("Screenshot it"),
        Message("assistant", [ToolUsePart("s1", "screenshot", {})]),
        Message(
            "user",
            [ToolResultPart("s1", "done", name="screenshot", media=[ImagePart.from_bytes(PNG)])],
        ),
        Message.assistant("A single pixel."),
    ]
    assert messages_from_ui(messages_to_ui(history)) == history
    assert messages_from_agui(messages_to_agui(history)) == history


def test_the_stream_carries_a_tool_results_images_to_the_browser() -> None:
    from llm_worker.state import ToolResultReady
    from llm_worker.tools import ToolResult
    from llm_worker.ui._vercel import VercelEncoder

    encoder = VercelEncoder("m1", ORIGIN)
    result = ToolResult("s1", "screenshot", "done", media=[ImagePart.from_bytes(PNG)])
    [chunk] = encoder.encode(ToolResultReady(result))
    assert chunk["type"] == "tool-output-available"
    [media] = chunk["providerMetadata"]["llmWorker"]["media"]
    assert media["type"] == "image"
    assert media["media_type"] == "image/png"
