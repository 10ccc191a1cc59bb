"""Review of the tool record (issue 39's web path, `ui/_record.py`): a result reaches only the
very call it belongs to, whatever the browser sends."""

from __future__ import annotations

from typing import Any

from llm_worker.ui._parts import KEY, result_mac
from llm_worker.ui._record import NO_RECORD, reconcile
from llm_worker.ui._sign import MAC
from llm_worker.ui._vercel_messages import read_ui


def chat(city: str, mac: str) -> list[dict[str, Any]]:
    """A chat whose `book` call (`call_0`, for `city`) shows a signed 'booked Kyoto'."""
    part = {
        "type": "tool-book",
        "toolCallId": "call_0",
        "state": "output-available",
        "input": {"city": city},
        "output": "booked Kyoto",
        "resultProviderMetadata": {KEY: {MAC: mac}},
    }
    return [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": f"Book {city}"}]},
        {"id": "a1", "role": "assistant", "parts": [part]},
        {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "So?"}]},
    ]


def test_a_signed_result_proves_the_call_it_came_with() -> None:
    mac = result_mac("call_0", "book", "booked Kyoto", False, arguments={"city": "Kyoto"})
    assert mac is not None
    history, proven = read_ui(chat("Kyoto", mac))
    out = reconcile(history, {}, proven, lambda name: name == "book")
    assert out[2].tool_results[0].content == "booked Kyoto"


def test_a_signed_result_moved_to_another_call_of_its_id_proves_nothing() -> None:
    # The server signed it for book(Kyoto); the browser shows it on a book(Paris) call
    # reusing the id (call_0; Gemini's gemini_call_0 after a regenerate).
    mac = result_mac("call_0", "book", "booked Kyoto", False, arguments={"city": "Kyoto"})
    assert mac is not None
    history, proven = read_ui(chat("Paris", mac))
    out = reconcile(history, {}, proven, lambda name: name == "book")
    assert out[2].tool_results[0].content == NO_RECORD
