"""A paused batch's tool outputs through the pause state's JSON, and back from the blob store.

A call that ran before its batch paused (early start) holds its `ToolOutput`, which the
after_tool_call hooks see on resume (`ctx.result.output`, `ctx.stored`). The JSON keeps it:
an inline output as such, a stored one as its blob reference (id and summary), never its
content — a state stays small however big the output. Loaded from JSON, a stored output's
content is `NOT_LOADED` until the resuming Worker reads it back from its blob store
(`loaded_outputs`), so the hooks see the same `StoredOutput` as in the run that paused.

Kept apart from `llm_worker.state`, which imports it only when a state holds an output:
`import llm_worker` does not load the blob modules.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Final, cast

from llm_worker.blobs._output import Content, InlineOutput, StoredOutput, ToolOutput, parse_blob_id
from llm_worker.errors import BlobNotFoundError, PauseStateError

if TYPE_CHECKING:
    from llm_worker.blobs import BlobStore
    from llm_worker.state import PendingCall

__all__ = ("NOT_LOADED", "loaded_outputs", "output_from_dict", "output_to_dict")


class _NotLoaded(Content):
    """The content of a stored output read from JSON: still only in the blob store."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Content(<in the blob store; read when the run resumes>)"


NOT_LOADED: Final[Content] = _NotLoaded()
"""The one placeholder (so that two loads of one state compare equal)."""


def output_to_dict(output: ToolOutput, content: str) -> dict[str, Any] | None:
    """`output` as JSON data; its text only where it differs from the result's `content`."""
    if isinstance(output, StoredOutput):
        if output.blob_id is None:  # not stored: a result never carries one (externalize)
            return None
        out: dict[str, Any] = {"kind": "stored", "blob_id": output.blob_id}
        if output.summary != content:
            out["summary"] = output.summary
        return out
    if isinstance(output, InlineOutput):
        return (
            {"kind": "inline"}
            if output.text == content
            else {"kind": "inline", "text": output.text}
        )
    return None


def output_from_dict(data: object, content: str) -> ToolOutput | None:
    """What `output_to_dict` wrote, a stored output's content `NOT_LOADED`.

    Raises:
        ValueError: Not such data (an unknown kind, a text that is not a string, a blob id
            that is not one: `parse_blob_id` is the gate every id from outside passes).
    """
    if data is None:  # a result without one, or a state saved before the field existed
        return None
    if not isinstance(data, dict):
        raise ValueError(f"a result's output is {type(data).__name__}, not an object")
    body = cast("dict[str, Any]", data)  # JSON: its values are checked below
    text = body.get("summary" if body.get("kind") == "stored" else "text", content)
    if not isinstance(text, str):
        raise ValueError("a result's output text is not a string")
    if body.get("kind") == "inline":
        return InlineOutput(text)
    if body.get("kind") == "stored":
        return StoredOutput(text, NOT_LOADED, parse_blob_id(body.get("blob_id")))
    raise ValueError(f"a result's output has an unknown kind {body.get('kind')!r}")


async def loaded_outputs(pending: list[PendingCall], store: BlobStore | None) -> list[PendingCall]:
    """`pending`, with each stored output read from JSON given its content from `store`.

    The calls and results given are not changed: those with such an output are copies.

    Raises:
        PauseStateError: An output names a blob `store` does not have, or there is no store.
        BlobError: The store could not be read (its own error: a retry may succeed).
    """
    out: list[PendingCall] = []
    for p in pending:
        result = p.result
        output = None if result is None else result.output
        if (
            result is None
            or not isinstance(output, StoredOutput)
            or output.content is not NOT_LOADED
        ):
            out.append(p)
            continue
        content = await _load(store, output, p.call.id)
        loaded = StoredOutput(output.summary, content, output.blob_id)
        out.append(dataclasses.replace(p, result=dataclasses.replace(result, output=loaded)))
    return out


async def _load(store: BlobStore | None, output: StoredOutput, call_id: str) -> Content:
    blob = output.blob_id
    if store is None:
        raise PauseStateError(
            f"cannot resume: call {call_id}'s output is stored as blob {blob}, and this Worker "
            "has no blob store; give it the store of the Worker that paused"
        )
    assert blob is not None  # read from JSON with its id
    try:
        return await store.load(blob)
    except BlobNotFoundError as exc:
        raise PauseStateError(
            f"cannot resume: call {call_id}'s output is stored as blob {blob}, which this "
            "Worker's blob store does not have; a saved pause state needs the blobs its "
            "results name until it is resumed or discarded"
        ) from exc
