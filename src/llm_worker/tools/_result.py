"""A tool call's result: what the model reads, the output it came from, and its media."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from llm_worker._json import sendable_text
from llm_worker.messages import DocumentPart, MediaPart, ToolResultPart

if TYPE_CHECKING:
    from llm_worker.blobs import ToolOutput

__all__ = ("ToolResult", "sendable_text")


@dataclass(slots=True)
class ToolResult:
    """The result of one tool call.

    Attributes:
        tool_use_id: The id of the call it answers.
        name: The tool's name.
        content: What the model reads: the tool's text, or a stored output's summary, or the
            error message.
        is_error: True when the call failed, timed out, was refused or skipped.
        output: The `ToolOutput` when the tool returned one (or the Worker stored the output
            as a blob); `None` for plain text.
        input: The arguments the call ran with (after any before_tool_call hook rewrote
            them); `None` when unknown. Not part of equality.
        exception: The exception the tool raised, traceback included, for the application
            (hooks, `ToolResultReady`); the model reads only `content`. Never serialized.
        media: Images and documents the tool returned (a screenshot), sent to the model as
            such after `content`, never as text.
    """

    tool_use_id: str
    name: str
    content: str
    is_error: bool = False
    output: ToolOutput | None = None
    input: dict[str, Any] | None = field(default=None, compare=False)
    exception: BaseException | None = field(default=None, compare=False)
    media: list[MediaPart] = field(default_factory=lambda: [])

    def to_part(self) -> ToolResultPart:
        """The history's part of this result: what the model reads, and its media.

        Text no wire can carry is made valid here, where a result enters the history: a
        lone surrogate (a file name `os.fsdecode` escaped, a cut UTF-16 string) becomes
        U+FFFD and a surrogate pair its character, so one odd byte in a tool's output does
        not fail every later request of the run — its media's names and URLs too (a
        document named by `os.fsdecode`: Anthropic's `title`, OpenAI's `filename`).
        """
        return ToolResultPart(
            self.tool_use_id,
            sendable_text(self.content),
            is_error=self.is_error,
            name=self.name,
            media=[_sendable_media(m) for m in self.media],
        )

    @classmethod
    def success(
        cls,
        tool_use_id: str,
        content: str,
        *,
        name: str = "",
        media: Sequence[MediaPart] = (),
    ) -> ToolResult:
        """A result answering call `tool_use_id` (`name` left empty: the Worker fills it in).

        `media`: images and documents the model should see with the text.
        """
        return cls(tool_use_id, name, content, media=list(media))

    @classmethod
    def error(cls, tool_use_id: str, content: str, *, name: str = "") -> ToolResult:
        """An `is_error` result answering call `tool_use_id`; `content` says what went wrong."""
        return cls(tool_use_id, name, content, is_error=True)


def _sendable_media(media: MediaPart) -> MediaPart:
    """`media` with its name and URL valid Unicode (the same part when they are already)."""
    url = None if media.url is None else sendable_text(media.url)
    if isinstance(media, DocumentPart) and media.name is not None:
        name = sendable_text(media.name)
        if name is not media.name or url is not media.url:
            return replace(media, url=url, name=name)
    elif url is not media.url:
        return replace(media, url=url)
    return media
