"""A UI message whose `parts` is no list is refused typed (review, R43).

Read as no parts, the message was dropped without a word: a user's turn sent as
`"parts": "Book Kyoto"` (or an object) left the model without it, and the run answered
whatever came before. AG-UI's reader refuses such content already.
"""

from __future__ import annotations

from typing import Any

import pytest

from llm_worker import Message
from llm_worker.errors import InvalidMessagesError
from llm_worker.ui import messages_from_ui


@pytest.mark.parametrize("parts", ["Book Kyoto", {"type": "text", "text": "hi"}, 3, True])
@pytest.mark.parametrize("role", ["user", "assistant"])
def test_parts_that_are_no_list_are_refused_typed(parts: Any, role: str) -> None:
    first = {"id": "u0", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    with pytest.raises(InvalidMessagesError, match=r"^UI message 1 is not valid: its parts must"):
        messages_from_ui([first, {"id": "m", "role": role, "parts": parts}])


def test_a_message_without_parts_reads_as_before() -> None:
    # No `parts` at all (or null): nothing to read, as before.
    given = [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]
    given += [{"id": "a", "role": "assistant"}, {"id": "b", "role": "assistant", "parts": None}]
    assert messages_from_ui(given) == [Message.user("hi")]
