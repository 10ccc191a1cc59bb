"""Review probes: the AG-UI converter under a layout that no longer fits the message."""

from __future__ import annotations

import pytest

from llm_worker import Message, TextPart
from llm_worker.errors import InvalidMessagesError
from llm_worker.ui import messages_from_agui
from llm_worker.ui._agui_messages import encrypted

USER = {"id": "u", "role": "user", "content": "x"}


def assistant(content: str, *lengths: int) -> dict[str, object]:
    layout = [{"type": "text", "length": n} for n in lengths]
    return {
        "id": "a",
        "role": "assistant",
        "content": content,
        "encryptedValue": encrypted({"layout": layout}),
    }


@pytest.mark.parametrize(
    ("lengths", "texts"),
    [
        ((-3, 5), ["Hello", " world"]),  # a tampered length: no text twice
        ((10**9, 5), ["Hello world"]),  # the front end shortened the text
        ((0, 5), ["Hello", " world"]),
    ],
)
def test_a_layout_that_does_not_fit_keeps_the_text_once_and_no_empty_part(
    lengths: tuple[int, ...], texts: list[str]
) -> None:
    history = messages_from_agui([USER, assistant("Hello world", *lengths)])
    assert history[1] == Message("assistant", [TextPart(t) for t in texts])


@pytest.mark.parametrize("content", [5, {"text": "hi"}, True, None])
def test_a_user_message_of_no_contents_shape_is_refused_not_read_as_empty(content: object) -> None:
    # An empty user turn would reach the model in place of what the browser meant.
    with pytest.raises(InvalidMessagesError, match="must be a string or a list"):
        messages_from_agui([{"id": "u", "role": "user", "content": content}])
