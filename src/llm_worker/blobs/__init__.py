"""The blob layer: large tool outputs, where they are kept, and how a model reads them back.

Owns `ToolOutput` and `Content` (`_output`), the `BlobStore` protocol, the memory and folder
stores and `externalize` (`_store`), the summaries a model reads in place of a stored output
(`_summaries`), JSON scanned entry by entry (`_json_scan`) and an array paged from a stream
in bounded memory however large its entries (`_json_pager`), and the `inspect` tool
(`_inspect`) with its selectors (`_selectors`) and its readers of text and JSON
(`_inspect_text`, `_inspect_json`, and `_inspect_window` through a blob's index, `_index`);
`ObjectBlobStore` (`_object_store`) keeps blobs in an object store through obstore, imported
only when one is made (`llm-worker[obstore]`). Every store names a blob by a keyed hash of its
content (`_addressing`); `delete`, the retention sweep (`_retention`, `_fs_retention`,
`_object_retention`) and `referenced_blob_ids` keep a store from growing forever.

May import: the model layer (`llm_worker.errors`, `llm_worker._json`, `events`, `messages`).
Never the timeline, tools, the Worker, providers or the CLI. Modules inside import each other
directly, never through this package.
"""

from llm_worker.blobs._index import BlobIndex, IndexedBlobStore
from llm_worker.blobs._inspect import InspectTool
from llm_worker.blobs._object_store import ObjectBlobStore
from llm_worker.blobs._output import (
    BlobId,
    Content,
    InlineOutput,
    JsonValue,
    OutputPolicy,
    StoredOutput,
    StructuredContent,
    TextContent,
    ToolOutput,
    new_blob_id,
    parse_blob_id,
)
from llm_worker.blobs._retention import SweepableBlobStore, SweepReport, referenced_blob_ids
from llm_worker.blobs._store import (
    BlobStore,
    FsBlobStore,
    JsonStreamStore,
    MemoryBlobStore,
    TextStreamStore,
    externalize,
)
from llm_worker.blobs._summaries import summarize

__all__ = (
    "BlobId",
    "BlobIndex",
    "BlobStore",
    "Content",
    "FsBlobStore",
    "IndexedBlobStore",
    "InlineOutput",
    "InspectTool",
    "JsonStreamStore",
    "JsonValue",
    "MemoryBlobStore",
    "ObjectBlobStore",
    "OutputPolicy",
    "StoredOutput",
    "StructuredContent",
    "SweepReport",
    "SweepableBlobStore",
    "TextContent",
    "TextStreamStore",
    "ToolOutput",
    "externalize",
    "new_blob_id",
    "parse_blob_id",
    "referenced_blob_ids",
    "summarize",
)
