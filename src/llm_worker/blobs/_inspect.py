"""The built-in `inspect(blob_id, selector?)` tool that reads part of a stored output.

`InspectTool` checks its arguments and the blob id, then hands the blob to the reader of its
kind: `_inspect_text` (read as a stream of bytes when the store can, `TextStreamStore`) or
`_inspect_json`; through the blob's index when the store keeps one (`_inspect_window`,
ranged reads of a window). Every bad input becomes a `ToolError`, which the model receives as
an error result.
"""

from __future__ import annotations

from typing import Any, Literal

import anyio.to_thread
import orjson

from llm_worker.blobs._index import IndexedBlobStore
from llm_worker.blobs._inspect_json import inspect_json
from llm_worker.blobs._inspect_text import inspect_text, str_chunks
from llm_worker.blobs._inspect_window import (
    CountedIndexes,
    inspect_array_stream,
    inspect_window,
)
from llm_worker.blobs._json_scan import dict_or_none
from llm_worker.blobs._output import OutputPolicy, StructuredContent, TextContent, parse_blob_id
from llm_worker.blobs._selectors import Selector, parse_selector
from llm_worker.blobs._store import BlobStore, JsonStreamStore, TextStreamStore
from llm_worker.blobs._summaries import clean
from llm_worker.errors import BlobError, BlobNotFoundError, InvalidBlobIdError, ToolError

__all__ = ("InspectTool",)


_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "blob_id": {
            "type": "string",
            "description": "The id from the stored output's summary: [blob:<id>].",
        },
        "selector": {
            "type": "string",
            "description": (
                "What to read; leave out for an overview and the beginning. lines:20-50 "
                "(text, 1-based, inclusive), slice:3..8 (JSON array entries 3 to 7), "
                "key:results (JSON object; key:results.0.name goes deeper), grep:PATTERN "
                "(the text lines, array entries or object keys whose text matches a regular "
                "expression, with their numbers and a count of matches; (?i) ignores case). "
                "A trailing @N skips N characters of the selection (given when an output is "
                "cut)."
            ),
        },
    },
    "required": ["blob_id"],
    "additionalProperties": False,
}


def _read_input(input_json: str) -> tuple[str, str | None]:
    try:
        data: Any = orjson.loads(input_json)
    except orjson.JSONDecodeError as exc:
        raise ToolError(f"the arguments are not JSON: {exc}") from exc
    args = dict_or_none(data)
    if args is None:
        raise ToolError('the arguments must be an object: {"blob_id": "…", "selector": "…"}')
    blob_id, selector = args.get("blob_id"), args.get("selector")
    if not isinstance(blob_id, str):
        raise ToolError("blob_id is required: the id in the summary's [blob:<id>] header")
    if selector is not None and not isinstance(selector, str):
        raise ToolError(
            "selector must be a string such as lines:20-50, slice:3..8, key:results or grep:error"
        )
    return blob_id, selector


class InspectTool:
    """The built-in `inspect(blob_id, selector?)` tool: reads part of a stored output.

    The Worker registers it when it has a blob store. What it returns is at most
    `policy.inspect_max_chars` characters and is never stored as a blob; every bad input (bad
    JSON, a malformed selector, a selector of the wrong kind, an unknown or malformed id)
    raises `ToolError`, which the model receives as an error result. Ids pass
    `parse_blob_id` before the store sees them, so no input names a file outside the store.

    Its metadata is that of any tool (`tool_meta`, `Worker.tools.meta(name)`): read-only,
    not exclusive, no timeout, not strict, no approval needed.

    Args:
        store: The blob store to read.
        policy: The caps (the defaults when `None`).
        name: The name the model calls it by (`Worker(inspect_tool_name=...)`).
    """

    effect: Literal["read_only"] = "read_only"
    exclusive: bool = False
    timeout: float | None = None
    strict: bool = False
    requires_approval: bool = False

    def __init__(
        self, store: BlobStore, policy: OutputPolicy | None = None, *, name: str = "inspect"
    ) -> None:
        self._store = store
        self._policy = policy or OutputPolicy()
        self._name = name
        self._counted = CountedIndexes()  # blob indexes whose count their blob bore out

    def __repr__(self) -> str:
        return f"InspectTool({self._store!r}, name={self._name!r})"

    @property
    def name(self) -> str:
        """The name the model calls it by (`inspect` unless renamed)."""
        return self._name

    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        return (
            "Read part of a large tool output that was stored as a blob; the history holds "
            "only its summary, which starts with [blob:<id>]. Without a selector: the overview "
            "and the beginning. Selectors: lines:20-50 (text), slice:3..8 (JSON array), "
            "key:results (JSON object), grep:PATTERN (find the lines or entries that match a "
            "regular expression, instead of paging through them). At most "
            f"{self._policy.inspect_max_chars} characters come back; when an output is cut, a "
            "note gives the selector for the next part."
        )

    @property
    def input_schema(self) -> dict[str, Any]:
        """`{blob_id: string, selector?: string}`."""
        return dict(_SCHEMA)

    async def execute(self, input_json: str) -> str:
        """Read what the arguments select.

        Raises:
            ToolError: Any bad input, an unknown blob, or a blob that cannot be read.
        """
        blob_text, selector_text = _read_input(input_json)
        selector = parse_selector(selector_text)
        try:
            blob_id = parse_blob_id(blob_text)
        except InvalidBlobIdError as exc:
            raise ToolError(str(exc)) from None
        try:
            out = await self._inspect(blob_id, selector)
        except BlobNotFoundError:
            raise ToolError(
                f"no blob {blob_id}: use the id of a summary's [blob:<id>] header"
            ) from None
        except BlobError as exc:
            raise ToolError(f"could not read blob {blob_id}: {exc}") from exc
        return clean(out)

    async def _inspect(self, blob_id: str, selector: Selector) -> str:
        tag = f"[blob:{blob_id}]"
        cap = self._policy.inspect_max_chars
        if isinstance(self._store, IndexedBlobStore):
            out = await inspect_window(
                self._store, blob_id, tag, selector, cap, counted=self._counted
            )
            if out is not None:
                return out
        if isinstance(self._store, JsonStreamStore):
            out = await inspect_array_stream(self._store, blob_id, tag, selector, cap)
            if out is not None:
                return out
        if isinstance(self._store, TextStreamStore):
            stream = await self._store.stream_text(blob_id)
            if stream is not None:
                try:
                    return await inspect_text(tag, stream, selector, cap)
                finally:
                    await stream.aclose()
        content = await self._store.load(blob_id)
        if isinstance(content, TextContent):
            return await inspect_text(tag, str_chunks(content.text), selector, cap)
        if isinstance(content, StructuredContent):
            return await anyio.to_thread.run_sync(
                inspect_json, tag, content.json_text, selector, cap
            )
        raise ToolError(f"{tag} holds content of an unknown kind")
