"""Large tool outputs: Inline / Stored outputs, their content, and the blob stores.

A tool's result is a `ToolOutput`: `ToolOutput.Inline(text)`, which goes into the history as
it is, or `ToolOutput.Stored(summary=..., content=...)`, whose content is kept in a
`BlobStore` while the history carries only the summary (see SPEC §9 and seed 004). A plain
string is promoted automatically (`ToolOutput.from_string`): up to 800 UTF-8 bytes it stays
inline; above that it is stored, as `Content.Structured` when it parses as a JSON array or
object, else as `Content.Text`. `externalize` does the whole step for the Worker: promote,
store, summarize.

```
ToolOutput ──┬── Inline(text)                       text: what the model reads
             └── Stored(summary, content, blob_id)  text: the summary
Content    ──┬── Text(text)
             └── Structured(value)                  any JSON value
```

`Content.Text` / `ToolOutput.Inline` etc. are the classes `TextContent`, `InlineOutput`, …;
`isinstance` and `match` tell them apart (annotate with the class names: a class attribute is
not a type). Blob ids are UUID version 7 strings (time-ordered); `parse_blob_id` is the one
gate every id from outside passes, so no id ever names a file outside a store.

Text is stored and read as UTF-8 with lone surrogates passed through (`surrogatepass`), so any
Python string a tool returns comes back equal.
"""

from __future__ import annotations

import contextlib
import os
import re
import reprlib
import tempfile
import threading
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Final,
    NewType,
    Protocol,
    TypeAlias,
    runtime_checkable,
)

import anyio
import anyio.lowlevel
import anyio.to_thread
import uuid6

from llm_worker.errors import BlobError, BlobNotFoundError, ConfigurationError, InvalidBlobIdError

if TYPE_CHECKING:
    from llm_worker._inspect import InspectTool
    from llm_worker._json_scan import JsonShape
    from llm_worker._summaries import summarize

__all__ = (
    "BlobId",
    "BlobStore",
    "Content",
    "FsBlobStore",
    "InlineOutput",
    "InspectTool",
    "JsonValue",
    "MemoryBlobStore",
    "OutputPolicy",
    "StoredOutput",
    "StructuredContent",
    "TextContent",
    "TextStreamStore",
    "ToolOutput",
    "externalize",
    "new_blob_id",
    "parse_blob_id",
    "summarize",
)

# -- ids ---------------------------------------------------------------------------------------

BlobId = NewType("BlobId", str)
"""A blob's id: a UUID version 7 in canonical lowercase form, as in `[blob:<id>]`."""

# ASCII only (no \d: it matches other scripts' digits), the whole string, no trailing newline.
_UUID = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE | re.ASCII
)
_id_lock = threading.Lock()


def new_blob_id() -> BlobId:
    """A fresh UUID version 7: ids made later sort after ids made earlier."""
    # uuid6 keeps them increasing within a process through a module global: guard it so
    # stores running in several threads still get strictly increasing ids.
    with _id_lock:
        return BlobId(str(uuid6.uuid7()))


def parse_blob_id(text: object) -> BlobId:
    """Check that `text` is a blob id and return it in canonical (lowercase) form.

    Raises:
        InvalidBlobIdError: `text` is not a UUID (`../../etc/passwd`, `x.txt`, a path, …).
    """
    if isinstance(text, str) and _UUID.fullmatch(text):
        return BlobId(text.lower())
    shown = reprlib.repr(text)
    raise InvalidBlobIdError(
        f"{shown} is not a blob id: ids are UUIDs such as "
        "0192f0c4-5a1e-7c3d-9b2a-3f4e5d6c7b8a, as in a summary's [blob:<id>] header"
    )


# -- content -----------------------------------------------------------------------------------

JsonValue: TypeAlias = Any
"""A JSON value (dict, list, str, int, float, bool or None). `Any`: JSON is shaped at run time."""

_UNSET: Final[Any] = object()


def _short(text: str, limit: int = 60) -> str:
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text)} chars)"


class Content:
    """The full content of a stored output: `Content.Text(str)` or `Content.Structured(value)`."""

    __slots__ = ()
    Text: ClassVar[type[TextContent]]
    Structured: ClassVar[type[StructuredContent]]


@dataclass(frozen=True, slots=True, repr=False)
class TextContent(Content):
    """Text content, stored as `{id}.txt`.

    Attributes:
        text: The text.
    """

    text: str

    def __repr__(self) -> str:
        return f"Content.Text({_short(self.text)})"


class StructuredContent(Content):
    """A JSON value, stored as `{id}.json`.

    Made from a value (`Content.Structured([...])`), or by promotion and by the stores from
    JSON text, which is then kept as it is (stored byte for byte) and parsed only when
    `value` is first read: a million-entry array need not exist as Python objects to be
    stored, summarized or inspected. The value is not copied; do not change it afterwards.
    Stores write it with orjson, which writes NaN and infinities as `null` (JSON has no such
    numbers).
    """

    __slots__ = ("_json", "_shape", "_value")
    __match_args__ = ("value",)

    def __init__(self, value: JsonValue) -> None:
        self._value: JsonValue = value
        self._json: str | None = None
        self._shape: JsonShape | None = None

    @classmethod
    def _from_json(cls, text: str, shape: JsonShape | None = None) -> StructuredContent:
        # `text` is known to be JSON (validated by promotion, or written by a store).
        content = cls(_UNSET)
        content._json = text
        content._shape = shape
        return content

    @property
    def value(self) -> JsonValue:
        """The JSON value (parsed from the JSON text on first use)."""
        if self._value is _UNSET:
            from llm_worker._json_scan import loads_json

            self._value = loads_json(self.json_text)
        return self._value

    @property
    def json_text(self) -> str:
        """The JSON text: as received when it came as text, else compact JSON of the value.

        Raises:
            TypeError: The value cannot be written as JSON.
        """
        if self._json is None:
            from llm_worker._json_scan import dumps_json

            self._json = dumps_json(self._value)
        return self._json

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StructuredContent):
            return NotImplemented
        if self._json is not None and self._json == other._json:
            return True
        return bool(self.value == other.value)

    __hash__: ClassVar[None] = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if self._value is _UNSET:
            return f"Content.Structured(<JSON {_short(self.json_text)}>)"
        return f"Content.Structured({reprlib.repr(self._value)})"


Content.Text = TextContent
Content.Structured = StructuredContent


# -- tool outputs ------------------------------------------------------------------------------


class ToolOutput:
    """What a tool call produced: `ToolOutput.Inline(text)` or `ToolOutput.Stored(...)`.

    A tool may return one itself (a tool that knows its output is big, or that writes its own
    summary); a plain string is promoted by `from_string`.
    """

    __slots__ = ()
    Inline: ClassVar[type[InlineOutput]]
    Stored: ClassVar[type[StoredOutput]]

    @property
    def text(self) -> str:
        """What the model reads: the inline text, or the stored output's summary."""
        raise NotImplementedError

    @staticmethod
    def from_string(s: str, *, threshold: int = 800) -> InlineOutput | StoredOutput:
        """Promote a tool's string result by its size.

        Args:
            s: The result.
            threshold: The most UTF-8 bytes that stay inline.

        Returns:
            `Inline(s)` when `s` has at most `threshold` UTF-8 bytes; else `Stored` with an
            empty summary (the store's id and the summary come with `externalize`) and
            `Content.Structured` when `s` is a JSON array or object, else `Content.Text`.
            JSON the standard library would not read back the same way (NaN, nesting deeper
            than the parser's recursion limit) is stored as text, unchanged.
        """
        return _promote(s, threshold, _DEFAULT_POLICY.array_head)


class InlineOutput(ToolOutput):
    """A small result: its text goes into the history as it is.

    Attributes:
        text: The result.
    """

    __slots__ = ("_text",)
    __match_args__ = ("text",)

    def __init__(self, text: str) -> None:
        self._text = text

    @property
    def text(self) -> str:
        """The result."""
        return self._text

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, InlineOutput):
            return NotImplemented
        return self._text == other._text

    def __hash__(self) -> int:
        return hash(self._text)

    def __repr__(self) -> str:
        return f"ToolOutput.Inline({_short(self._text)})"


@dataclass(frozen=True, slots=True)
class StoredOutput(ToolOutput):
    """A large result: the history carries `summary`, the store keeps `content`.

    Attributes:
        summary: What the model reads; `[blob:<id>] …` once stored (empty before).
        content: The full result.
        blob_id: The id in the store, `None` until stored.
    """

    summary: str
    content: Content
    blob_id: BlobId | None = None

    @property
    def text(self) -> str:
        """The summary."""
        return self.summary


ToolOutput.Inline = InlineOutput
ToolOutput.Stored = StoredOutput


def _fits(s: str, threshold: int) -> bool:
    # Encode only short strings: a char is 1 to 4 UTF-8 bytes (3 for a lone surrogate).
    if len(s) > threshold:
        return False
    return len(s) * 4 <= threshold or len(s.encode("utf-8", "surrogatepass")) <= threshold


def _promote(s: str, threshold: int, array_head: int) -> InlineOutput | StoredOutput:
    if _fits(s, threshold):
        return InlineOutput(s)
    from llm_worker._json_scan import json_shape

    shape = json_shape(s, array_head)
    if shape is None:
        return StoredOutput("", TextContent(s))
    return StoredOutput("", StructuredContent._from_json(s, shape))  # pyright: ignore[reportPrivateUsage]


# -- policy ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OutputPolicy:
    """Thresholds and caps for large outputs; the defaults are the design's (seed 004).

    Attributes:
        inline_threshold: The most UTF-8 bytes a string result keeps inline.
        summary_max_bytes: The most UTF-8 bytes of a summary (at least 100: the header with
            the id must fit).
        head_lines: Lines from the start of a text in its summary.
        tail_lines: Lines from the end of a text in its summary.
        array_head: Entries from the start of a JSON array in its summary.
        inspect_max_chars: The most characters one `inspect` call returns (at least 2,000:
            about 1,000 go to its header and notes).

    Raises:
        ConfigurationError: A value out of range.
    """

    inline_threshold: int = 800
    summary_max_bytes: int = 400
    head_lines: int = 5
    tail_lines: int = 3
    array_head: int = 2
    inspect_max_chars: int = 16_000

    def __post_init__(self) -> None:
        minimums = {
            "inline_threshold": 0,
            "summary_max_bytes": 100,
            "head_lines": 0,
            "tail_lines": 0,
            "array_head": 0,
            "inspect_max_chars": 2_000,
        }
        for name, least in minimums.items():
            value: object = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ConfigurationError(f"OutputPolicy.{name} must be an int >= {least}")


_DEFAULT_POLICY = OutputPolicy()


# -- stores ------------------------------------------------------------------------------------


@runtime_checkable
class BlobStore(Protocol):
    """Where stored outputs are kept. Implementations validate ids with `parse_blob_id`."""

    async def store(self, content: Content) -> BlobId:
        """Keep `content`; return its new id.

        Raises:
            BlobError: It could not be stored.
        """
        ...

    async def load(self, blob_id: str) -> Content:
        """The content stored under `blob_id`.

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id.
            BlobNotFoundError: No blob has this id.
            BlobError: It could not be read.
        """
        ...

    async def exists(self, blob_id: str) -> bool:
        """Whether a blob has this id.

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id.
        """
        ...


@runtime_checkable
class TextStreamStore(Protocol):
    """Optional for a store: stream a text blob's bytes.

    `inspect` then reads line ranges without loading the whole text.
    """

    async def stream_text(self, blob_id: str) -> AsyncGenerator[bytes, None] | None:
        """The UTF-8 bytes of the text blob `blob_id` in chunks.

        Returns `None` when it is not a text blob (a JSON blob, or none).

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id.
        """
        ...


_CHUNK_CHARS = 1 << 20  # characters encoded per write
_CHUNK_BYTES = 1 << 20  # bytes per read


def _encoded(text: str) -> Iterator[bytes]:
    # Chunks keep the peak at the text plus one chunk, not twice the text.
    for start in range(0, len(text), _CHUNK_CHARS):
        yield text[start : start + _CHUNK_CHARS].encode("utf-8", "surrogatepass")


def _decoded(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


def _snapshot(content: Content) -> TextContent | StructuredContent:
    if isinstance(content, TextContent):
        return content
    if isinstance(content, StructuredContent):
        try:
            # Keep the JSON text, not the value: later changes to the value do not reach the
            # blob. The promotion's scan (the shape) is still valid for that text.
            text, shape = content.json_text, content._shape  # pyright: ignore[reportPrivateUsage]
            return StructuredContent._from_json(text, shape)  # pyright: ignore[reportPrivateUsage]
        except (TypeError, ValueError) as exc:
            raise BlobError(f"the structured content is not JSON: {exc}") from exc
    raise TypeError(f"not a Content.Text or Content.Structured: {content!r}")


class MemoryBlobStore:
    """A blob store in memory, for tests and short-lived programs.

    Structured content is kept as its JSON text, so changing a value after storing it does
    not change the blob, and `load` behaves as with `FsBlobStore`.
    """

    def __init__(self) -> None:
        self._blobs: dict[BlobId, TextContent | StructuredContent] = {}

    def __len__(self) -> int:
        return len(self._blobs)

    def __repr__(self) -> str:
        return f"MemoryBlobStore(<{len(self._blobs)} blobs>)"

    async def store(self, content: Content) -> BlobId:
        """Keep `content`; return its new id."""
        await anyio.lowlevel.checkpoint()
        blob_id = new_blob_id()
        self._blobs[blob_id] = _snapshot(content)
        return blob_id

    async def load(self, blob_id: str) -> Content:
        """The content stored under `blob_id`."""
        key = parse_blob_id(blob_id)
        await anyio.lowlevel.checkpoint()
        try:
            return self._blobs[key]
        except KeyError:
            raise BlobNotFoundError(f"no blob {key}") from None

    async def exists(self, blob_id: str) -> bool:
        """Whether a blob has this id."""
        key = parse_blob_id(blob_id)
        await anyio.lowlevel.checkpoint()
        return key in self._blobs


class FsBlobStore:
    """Blobs as files in one flat folder: `root/{id}.txt` for text, `root/{id}.json` for JSON.

    Independent of sessions: a summary's `[blob:<id>]` is the link. A write goes to a
    temporary file in the same folder (`.{id}.….tmp`), is flushed and fsynced, then renamed
    into place (and the folder fsynced), so a reader never sees a partial blob and a writer
    that dies leaves at most a `.tmp` file, never a partial file under a blob's name. Several
    tasks and several processes may store into one folder at once. All file I/O runs in
    worker threads, off the event loop. The folder is created on the first store.

    Args:
        root: The folder.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._root = Path(root)

    @property
    def root(self) -> Path:
        """The folder."""
        return self._root

    def __repr__(self) -> str:
        return f"FsBlobStore({str(self._root)!r})"

    def _path(self, blob_id: BlobId, suffix: str) -> Path:
        return self._root / f"{blob_id}{suffix}"

    async def store(self, content: Content) -> BlobId:
        """Write `content` atomically; return its new id.

        Raises:
            BlobError: The folder or the file could not be written, or the structured
                content is not JSON.
        """
        if not isinstance(content, TextContent | StructuredContent):
            raise TypeError(f"not a Content.Text or Content.Structured: {content!r}")
        blob_id = new_blob_id()
        await anyio.to_thread.run_sync(self._write, blob_id, content)
        return blob_id

    def _write(self, blob_id: BlobId, content: TextContent | StructuredContent) -> None:
        try:
            text = content.text if isinstance(content, TextContent) else content.json_text
        except (TypeError, ValueError) as exc:
            raise BlobError(f"the structured content is not JSON: {exc}") from exc
        suffix = ".txt" if isinstance(content, TextContent) else ".json"
        try:
            self._root.mkdir(parents=True, exist_ok=True)
            _write_atomically(self._path(blob_id, suffix), _encoded(text))
        except OSError as exc:
            raise BlobError(f"could not store blob {blob_id} in {self._root}: {exc}") from exc

    async def load(self, blob_id: str) -> Content:
        """Read the blob `blob_id`.

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id (nothing is read).
            BlobNotFoundError: No blob has this id.
            BlobError: It could not be read.
        """
        key = parse_blob_id(blob_id)
        return await anyio.to_thread.run_sync(self._read, key)

    def _read(self, blob_id: BlobId) -> Content:
        for suffix in (".txt", ".json"):
            try:
                data = self._path(blob_id, suffix).read_bytes()
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise BlobError(f"could not read blob {blob_id}: {exc}") from exc
            try:
                text = _decoded(data)
            except UnicodeDecodeError as exc:
                raise BlobError(f"blob {blob_id} is not UTF-8 text: {exc}") from exc
            del data
            if suffix == ".txt":
                return TextContent(text)
            return StructuredContent._from_json(text)  # pyright: ignore[reportPrivateUsage]
        raise BlobNotFoundError(f"no blob {blob_id} in {self._root}")

    async def exists(self, blob_id: str) -> bool:
        """Whether a blob has this id.

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id.
        """
        key = parse_blob_id(blob_id)
        return await anyio.to_thread.run_sync(self._exists, key)

    def _exists(self, blob_id: BlobId) -> bool:
        return any(self._path(blob_id, suffix).is_file() for suffix in (".txt", ".json"))

    async def stream_text(self, blob_id: str) -> AsyncGenerator[bytes, None] | None:
        """The UTF-8 bytes of a text blob in chunks of 1 MiB, or `None` if it is not text.

        The file opens on the first iteration; close the generator when done early
        (`contextlib.aclosing`) and it closes the file.

        Raises:
            InvalidBlobIdError: `blob_id` is not a blob id.
            BlobError: The file could not be read (raised by the iteration).
        """
        key = parse_blob_id(blob_id)
        path = self._path(key, ".txt")
        if not await anyio.to_thread.run_sync(path.is_file):
            return None
        return _read_chunks(path, key)


async def _read_chunks(path: Path, blob_id: BlobId) -> AsyncGenerator[bytes, None]:
    # The file opens on the first read, so a generator never started holds no file.
    try:
        file = await anyio.to_thread.run_sync(path.open, "rb")
    except FileNotFoundError:
        raise BlobNotFoundError(f"no blob {blob_id}") from None
    except OSError as exc:
        raise BlobError(f"could not read blob {blob_id}: {exc}") from exc
    try:
        while True:
            try:
                chunk: bytes = await anyio.to_thread.run_sync(file.read, _CHUNK_BYTES)
            except OSError as exc:
                raise BlobError(f"could not read blob {blob_id}: {exc}") from exc
            if not chunk:
                return
            yield chunk
    finally:
        file.close()  # sync: closing a read-only file does not block, and survives cancellation


def _write_atomically(path: Path, chunks: Iterator[bytes]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            for chunk in chunks:
                file.write(chunk)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    # Makes the rename itself durable (POSIX); Windows cannot open a folder this way.
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- the Worker's step -------------------------------------------------------------------------

# Above this many characters, promotion and summaries run in a worker thread: scanning a
# large JSON text takes long enough to stall the event loop.
_THREAD_MIN_CHARS = 1 << 16


async def externalize(
    output: str | ToolOutput, store: BlobStore | None, policy: OutputPolicy | None = None
) -> InlineOutput | StoredOutput:
    """Turn a tool's result into what the history carries.

    Without a store everything stays inline, as if there were no blobs: a string or an
    `Inline` as it is, a `Stored` as its content's text (a `Content.Text`'s text, or a
    `Content.Structured`'s JSON text). With a store, a string is promoted by
    `policy.inline_threshold` (an `Inline` a tool returned stays inline, whatever its size:
    the tool chose); a `Stored` is stored (unless it has a `blob_id` already) and gets the
    automatic summary. A summary the tool wrote is kept, prefixed with `[blob:<id>] ` unless it
    already holds that tag, and cut to `policy.summary_max_bytes`.

    Args:
        output: The tool's result.
        store: The blob store, if any.
        policy: Thresholds and caps (the defaults when `None`).

    Returns:
        An `Inline`, or a `Stored` with its `blob_id` and summary.

    Raises:
        BlobError: The content could not be stored.
    """
    policy = policy or _DEFAULT_POLICY
    if store is None:
        return _inline(output)
    if isinstance(output, str):
        promoted = await _off_loop(len(output), _promote_with, output, policy)
    elif isinstance(output, InlineOutput | StoredOutput):
        promoted = output
    else:
        raise TypeError(f"not a str or a ToolOutput: {output!r}")
    if isinstance(promoted, InlineOutput):
        return promoted
    blob_id = promoted.blob_id or await store.store(promoted.content)
    summary = await _off_loop(_THREAD_MIN_CHARS, _summary, promoted, blob_id, policy)
    return StoredOutput(summary, promoted.content, blob_id)


async def _off_loop(size: int, func: Any, *args: Any) -> Any:
    if size < _THREAD_MIN_CHARS:
        return func(*args)
    return await anyio.to_thread.run_sync(func, *args)


def _inline(output: str | ToolOutput) -> InlineOutput:
    if isinstance(output, str):
        return InlineOutput(output)
    if isinstance(output, InlineOutput):
        return output
    if isinstance(output, StoredOutput):
        content = output.content
        if isinstance(content, TextContent):
            return InlineOutput(content.text)
        if isinstance(content, StructuredContent):
            return InlineOutput(content.json_text)
    raise TypeError(f"not a str or a ToolOutput: {output!r}")


def _summary(output: StoredOutput, blob_id: BlobId, policy: OutputPolicy) -> str:
    from llm_worker._summaries import cut_summary, summarize

    if not output.summary:
        return summarize(blob_id, output.content, policy)
    tag = f"[blob:{blob_id}]"
    summary = output.summary if tag in output.summary else f"{tag} {output.summary}"
    return cut_summary(summary, policy.summary_max_bytes)


def _promote_with(output: str, policy: OutputPolicy) -> InlineOutput | StoredOutput:
    return _promote(output, policy.inline_threshold, policy.array_head)


def __getattr__(name: str) -> Any:
    # The summaries and the inspect tool live in _summaries and _inspect, which import this
    # module.
    if name == "InspectTool":
        from llm_worker._inspect import InspectTool

        return InspectTool
    if name == "summarize":
        from llm_worker._summaries import summarize

        return summarize
    raise AttributeError(f"module 'llm_worker.blobs' has no attribute {name!r}")
