"""Mistral's chat request types, for `support.sdk_types.mismatches` (no Mistral SDK here).

Transcribed from the TypedDicts of mistralai/client-python (`src/mistralai/models/`:
`assistantmessage.py`, `thinkchunk.py`, `textchunk.py`, `referencechunk.py`, `toolcall.py`,
`functioncall.py`, `toolmessage.py`, `usermessage.py`, `systemmessage.py`), the subset a
Chat Completions body of this library can hold. Mistral's API refuses fields it does not
declare, so an unknown key here is a refused request there.
"""

from __future__ import annotations

from typing import Literal, NotRequired, Required, TypedDict

__all__ = ("Messages",)


class TextChunk(TypedDict):
    """`TextChunkTypedDict`."""

    text: Required[str]
    type: NotRequired[Literal["text"]]


class ReferenceChunk(TypedDict):
    """`ReferenceChunkTypedDict`."""

    reference_ids: Required[list[int]]
    type: NotRequired[Literal["reference"]]


class ThinkChunk(TypedDict):
    """`ThinkChunkTypedDict`: `closed` is only used for prefixing."""

    thinking: Required[list[ReferenceChunk | TextChunk]]
    type: Required[Literal["thinking"]]
    closed: NotRequired[bool]


class FunctionCall(TypedDict):
    """`FunctionCallTypedDict`: arguments as an object or as JSON text."""

    name: Required[str]
    arguments: Required[str]


class ToolCall(TypedDict):
    """`ToolCallTypedDict`."""

    function: Required[FunctionCall]
    id: NotRequired[str]
    type: NotRequired[Literal["function"]]
    index: NotRequired[int]


class AssistantMessage(TypedDict):
    """`AssistantMessageTypedDict` (content: text or a list of content chunks)."""

    role: Required[Literal["assistant"]]
    content: NotRequired[str | list[TextChunk | ThinkChunk | ReferenceChunk] | None]
    tool_calls: NotRequired[list[ToolCall] | None]
    prefix: NotRequired[bool]


class UserMessage(TypedDict):
    """`UserMessageTypedDict` (text content only, as the tests send)."""

    role: Required[Literal["user"]]
    content: Required[str | list[TextChunk]]


class SystemMessage(TypedDict):
    """`SystemMessageTypedDict`."""

    role: Required[Literal["system"]]
    content: Required[str | list[TextChunk]]


class ToolMessage(TypedDict):
    """`ToolMessageTypedDict`."""

    role: Required[Literal["tool"]]
    content: Required[str | list[TextChunk] | None]
    tool_call_id: NotRequired[str | None]
    name: NotRequired[str | None]


class Messages(TypedDict):
    """A body's `messages`, alone (the other request fields are OpenAI's and Mistral's alike)."""

    messages: Required[list[SystemMessage | UserMessage | AssistantMessage | ToolMessage]]
