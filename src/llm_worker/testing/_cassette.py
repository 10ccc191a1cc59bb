"""Cassettes: a test's exchanges with a real model recorded once, then replayed byte for byte.

A `Cassette` runs a local `WireServer` and points real provider clients at it. Recording,
the server passes each request on to the real API and keeps the answer exactly as it
arrived; replaying, it answers from the file, so the real client parses the recorded bytes
(in their recorded chunks, or under any `Chunking`) over real HTTP, on either transport.
Each client gets a route of its own on the server (`/cassette-<n>/…`), which says which
provider (and, recording, which API host) its requests are for.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import AsyncGenerator, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, Self, TypeVar, get_args
from urllib.parse import urlsplit

import anyio

from llm_worker._json import as_dict, as_str
from llm_worker.errors import ConfigurationError
from llm_worker.testing._cassette_file import (
    CassetteError,
    CassetteFileError,
    Exchange,
    loads,
    write,
)
from llm_worker.testing._cassette_match import CassetteMissError, Matcher, normalize, unused_lines
from llm_worker.testing._cassette_scrub import Secrets
from llm_worker.testing._cassette_upstream import Relay, Upstream
from llm_worker.testing._model_server import WIRE_PROVIDERS
from llm_worker.testing._server import Chunking, RecordedRequest, WireResponse, WireServer

if TYPE_CHECKING:
    import os

    from llm_worker.providers._base import HttpClient
    from llm_worker.providers._http import Transport

__all__ = ("Cassette", "CassetteMode", "CassetteUnusedError")

CassetteMode = Literal["record", "replay", "auto"]
"""`"record"`: every request goes to the real API and the file is written anew; `"replay"`:
every request is answered from the file, a request it has no recording of fails; `"auto"`:
replayed when recorded, else recorded (and added to the file)."""

T = TypeVar("T")

_ROUTE: Final = "cassette-"
_GEMINI_MODEL: Final = re.compile(r"/models/(.+):streamGenerateContent$")
_REPLAY_KEY: Final = "cassette-replay-key"  # a replay needs no key; a client wants one
_FRAMING: Final = frozenset(
    {
        "content-type",
        "content-length",
        "transfer-encoding",
        "content-encoding",
        "connection",
        "keep-alive",
    }
)
# A miss is answered with a status no client retries: a retry would miss again.
_MISS_STATUS: Final = 424


class CassetteUnusedError(CassetteError):
    """A strict cassette holds recordings no request replayed (the test asked less)."""


@dataclass(slots=True, frozen=True)
class _Route:
    """A client of the cassette: its provider, model and (recording) the real API's origin."""

    provider: str
    model: str
    origin: str | None


class Cassette:
    """A test's exchanges with a real model, recorded once and replayed byte for byte.

    Use `async with cassette.client("anthropic:claude-sonnet-4-5") as client:` for a new
    client, or `async with cassette.wrap(worker):` for a client or Worker you built (its
    HTTP provider client is pointed at the cassette inside the block). Leaving the last
    block writes the file (recording) and raises the first miss (`CassetteMissError`, its
    diff in the message) and, when `strict`, `CassetteUnusedError` for recordings no
    request replayed. Enter the cassette itself (`async with cassette:`) around several
    blocks so the check runs once, at its end.

    Attributes:
        path: The cassette's file.
        mode: `"replay"`, `"record"` or `"auto"`.
        requests: Every request the cassette's clients sent, as its server received it.

    Example:
        ```python
        cassette = Cassette("tests/cassettes/weather.jsonl", mode="auto")
        async with cassette.client("anthropic:claude-sonnet-4-5") as client:
            result = await Worker(client, tools=[weather]).run("Weather in Paris?")
        ```
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        mode: CassetteMode = "replay",
        ignore: Iterable[str] = (),
        ignore_patterns: Iterable[str | re.Pattern[str]] = (),
        secrets: Iterable[str] = (),
        secret_patterns: Iterable[str | re.Pattern[str]] = (),
        strict: bool = True,
        chunking: Chunking | None = None,
        timing: bool = False,
        record_timeout: float = 600.0,
    ) -> None:
        """Open a cassette file (read at the first block, written when recording ends).

        Args:
            path: The file (JSON lines; its folder is made when recording).
            mode: `"replay"` (the default), `"record"` or `"auto"` (see `CassetteMode`).
            ignore: Request fields left out of matching, as dotted paths of the neutral
                request (`"temperature"`, `"system"`, `"messages.*.content.*.citations"`).
            ignore_patterns: Regexes whose matches in any text of a request are left out
                of matching (a date in the system prompt).
            secrets: More values to mask in the file (the API key, credential headers and
                credential URL parameters always are).
            secret_patterns: Regexes whose matches are masked in the file.
            strict: Fail at the end if some recordings were never replayed.
            chunking: How replays split each body; by default where the provider's
                answer was split when it was recorded.
            timing: Record each chunk's time and replay with the same delays.
            record_timeout: Seconds each read from the real API may take, recording.

        Raises:
            ConfigurationError: An unknown mode, or a regex that does not compile.
        """
        if mode not in get_args(CassetteMode):
            raise ConfigurationError(
                f"unknown cassette mode {mode!r}: 'record', 'replay' or 'auto'"
            )
        self.path = Path(path)
        self.mode: CassetteMode = mode
        self.strict = strict
        self.chunking = chunking
        self.timing = timing
        try:
            self._matcher = Matcher.of(ignore, ignore_patterns)
            self._secrets = Secrets(secrets, secret_patterns)
        except re.error as exc:
            raise ConfigurationError(f"a cassette pattern does not compile: {exc}") from exc
        self._upstream = Upstream(record_timeout)
        self._recorded: list[Exchange] | None = None
        self._keys: list[bytes] = []
        self._new: list[Exchange] = []
        self._used: set[int] = set()
        self._misses: list[CassetteMissError] = []
        self._routes: list[_Route] = []
        self._server: WireServer | None = None
        self._users = 0
        self._relays: list[anyio.Event] = []
        self.requests: list[RecordedRequest] = []  # every request, as the server received it

    def __repr__(self) -> str:
        return f"Cassette({str(self.path)!r}, mode={self.mode!r})"

    @property
    def exchanges(self) -> list[Exchange]:
        """The exchanges of the file and those recorded since, in order."""
        return [*(self._recorded or []), *self._new]

    @property
    def unused(self) -> list[int]:
        """The numbers (from 0) of the file's recordings no request has replayed yet."""
        return [i for i in range(len(self._recorded or [])) if i not in self._used]

    async def __aenter__(self) -> Self:
        await self._open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        error = exc_info[1] if len(exc_info) > 1 else None
        await self._close(error if isinstance(error, BaseException) else None)

    def client(self, model: str, **options: Any) -> AbstractAsyncContextManager[HttpClient]:
        """A real provider client that talks to the cassette, closed at the block's end.

        Recording, it is the client `from_string(model, **options)` makes (the key from the
        environment), sending through the cassette to the real API; replaying, it needs no
        key. In `"auto"` mode, without a key, it only replays.

        Raises:
            ConfigurationError: An unknown model string; recording without an API key.
        """
        return self._client(model, options)

    @asynccontextmanager
    async def _client(self, model: str, options: dict[str, Any]) -> AsyncGenerator[HttpClient]:
        async with self._session():
            client, records = self._new_client(model, options)
            original = self._attach(client, records=records)
            try:
                yield client
            finally:
                await client.aclose()
                await original.aclose()

    def wrap(self, target: T) -> AbstractAsyncContextManager[T]:
        """Point a provider client, or a Worker's client, at the cassette inside the block.

        Recording, the requests still go to the client's own API (through the cassette);
        the client gets its own transport back when the block ends.

        Raises:
            ConfigurationError: `target` is neither an HTTP provider client nor has one
                as its `client` (a `ScriptedClient` has no wire to record).
        """
        return self._wrap(target)

    @asynccontextmanager
    async def _wrap(self, target: T) -> AsyncGenerator[T]:
        client = _http_client(target)
        async with self._session():
            original = self._attach(client, records=self.mode != "replay")
            redirected = client.transport
            try:
                yield target
            finally:
                client.transport = original
                await redirected.aclose()

    def assert_all_used(self) -> None:
        """Raise `CassetteUnusedError` if some recordings were never replayed.

        Raises:
            CassetteUnusedError: Lists each unused recording (its model and last user text).
        """
        if self.mode != "record" and self._recorded is None and self.path.exists():
            self._load()  # never opened: every recording of its file went unused
        if self.mode == "record" or not (unused := self.unused):
            return
        recorded = self._recorded or []
        raise CassetteUnusedError(
            f"{len(unused)} recording(s) of {self.path} were never requested:\n"
            + "\n".join(unused_lines(recorded, unused))
            + "\nRecord the cassette again (pytest --llm-record) or pass strict=False."
        )

    # -- sessions ----------------------------------------------------------------------

    @asynccontextmanager
    async def _session(self) -> AsyncGenerator[None]:
        await self._open()
        try:
            yield
        except BaseException as exc:
            await self._close(exc)
            raise
        await self._close(None)

    async def _open(self) -> None:
        self._users += 1
        if self._users > 1:
            return
        try:
            self._load()
            server = WireServer(handler=self._answer)
            await server.start()
        except BaseException:
            self._users -= 1
            raise
        self._server = server

    def _load(self) -> None:
        if self._recorded is not None or self.mode == "record":
            self._recorded = self._recorded or []
            return
        if not self.path.exists():
            if self.mode == "replay":
                raise CassetteFileError(
                    f"no cassette at {self.path}: record it first (pytest --llm-record, or "
                    "Cassette(path, mode='record')) with the provider's API key set"
                )
            self._recorded = []
            return
        self._recorded = loads(self.path.read_text(encoding="utf-8"), name=str(self.path))
        self._keys = [self._matcher.key(r) for r in self._recorded]

    async def _close(self, error: BaseException | None) -> None:
        self._users -= 1
        if self._users:
            return
        server, self._server = self._server, None
        try:
            if error is None or isinstance(error, Exception):
                await self._relays_ended()  # a cancelled block waits for no API
        finally:
            # Shielded: a cancelled block (or a deadline) still closes the server and the
            # upstream client, so no socket or relay is left running; both waits are bounded.
            with anyio.CancelScope(shield=True):
                if server is not None:
                    await server.close()
                await self._upstream.aclose()
            self._relays.clear()
            self._save(error)
        self._raise_failures(error)

    async def _relays_ended(self) -> None:
        """Let answers still being relayed end: a client may be done before the API's end.

        The API's last bytes (the end of the chunked body) can come after the last event the
        client needed; the recording is kept only once they have come.
        """
        with anyio.move_on_after(self._upstream.timeout):
            for done in self._relays:
                await done.wait()
        self._relays.clear()

    def _save(self, error: BaseException | None) -> None:
        if self.mode == "replay" or (self.mode == "auto" and not self._new):
            return
        if self.mode == "record" and error is not None and not isinstance(error, Exception):
            return  # an interrupted re-recording (Ctrl-C, a cancel) keeps the file it had
        kept = (self._recorded or []) if self.mode == "auto" else []
        write(self.path, self._secrets.scrubbed([*kept, *self._new]))

    def _raise_failures(self, error: BaseException | None) -> None:
        if error is not None and not isinstance(error, Exception):
            return  # a cancellation or KeyboardInterrupt goes on as it is
        if self._misses:
            miss = self._misses[0]
            self._misses.clear()
            if error is not None:
                miss.add_note(f"the `async with` block raised {error!r}")
            raise miss
        if self.strict and error is None:
            self.assert_all_used()

    # -- clients -----------------------------------------------------------------------

    def _new_client(self, model: str, options: dict[str, Any]) -> tuple[HttpClient, bool]:
        """The client to hand out, and whether its requests may be recorded."""
        from llm_worker.providers import from_string

        if self.mode != "replay":
            try:
                return from_string(model, **options), True
            except ConfigurationError as exc:
                if self.mode == "record":
                    exc.add_note("recording sends to the real API: it needs its key")
                    raise
        base_url = self._running().base_url
        replay = {**options, "api_key": options.get("api_key") or _REPLAY_KEY, "base_url": base_url}
        return from_string(model, **replay), False

    def _attach(self, client: HttpClient, *, records: bool) -> Transport:
        """Point `client` at a new route of the server; its own transport is returned."""
        original = client.transport
        parts = urlsplit(original.base_url)
        path = parts.path.rstrip("/")
        if not records and not path:
            path = WIRE_PROVIDERS.get(client.provider, ("", ""))[1]
        origin = f"{parts.scheme}://{parts.netloc}" if records else None
        self._routes.append(_Route(client.provider, client.model, origin))
        query = f"?{parts.query}" if parts.query else ""
        route = f"{self._running().base_url}/{_ROUTE}{len(self._routes) - 1}"
        client.transport = original.redirected(route + path + query)
        return original

    def _running(self) -> WireServer:
        if self._server is None:
            raise ConfigurationError("the cassette is not open: use it in `async with`")
        return self._server

    # -- answering ---------------------------------------------------------------------

    async def _answer(self, http: RecordedRequest) -> WireResponse:
        self.requests.append(http)
        route, path = self._route_of(http.path)
        made = self._made(route, path, http)
        if self.mode != "record":
            # Compared as the file has it: a secret in the request was masked there.
            self._secrets.learn(http.headers, "")
            masked = self._secrets.scrubbed([made])[0]
            found = self._find(masked)
            if found is not None:
                return self._replayed((self._recorded or [])[found])
            if self.mode == "replay" or route.origin is None:
                return self._missed(masked)
        return await self._record(route, path, http, made)

    def _route_of(self, path: str) -> tuple[_Route, str]:
        _, first, rest = path.split("/", 2) if path.count("/") >= 2 else ("", "", "")
        number = first.removeprefix(_ROUTE)
        if not first.startswith(_ROUTE) or not number.isdigit() or int(number) >= len(self._routes):
            raise CassetteError(f"a request to {path!r}, which no client of the cassette uses")
        return self._routes[int(number)], "/" + rest

    def _made(self, route: _Route, path: str, http: RecordedRequest) -> Exchange:
        body = http.json()
        gemini = _GEMINI_MODEL.search(path)
        model = gemini.group(1) if gemini else as_str(as_dict(body).get("model")) or route.model
        return Exchange(
            provider=route.provider,
            model=model,
            path=path,
            query=dict(http.query),
            request=normalize(route.provider, model, body),
            status=0,
            headers={},
            chunks=[],
        )

    def _find(self, made: Exchange) -> int | None:
        key = self._matcher.key(made)
        for n, recorded in enumerate(self._keys):
            if n not in self._used and recorded == key:
                self._used.add(n)
                return n
        return None

    def _missed(self, made: Exchange) -> WireResponse:
        text = self._matcher.miss(made, self._recorded or [], self._used, str(self.path))
        if self.mode == "auto":
            text += "\n(auto mode records a new request only with the provider's API key)"
        miss = CassetteMissError(text)
        self._misses.append(miss)
        return _error(_MISS_STATUS, "cassette_miss", f"{text}\n(raised again as the block ends)")

    def _replayed(self, exchange: Exchange) -> WireResponse:
        # The framing headers are the server's own: one in a hand-edited file would frame the
        # body twice (a recording never keeps them; see `_cassette_upstream`).
        headers = {k: v for k, v in exchange.headers.items() if k not in _FRAMING}
        sizes = tuple(len(c) for c in exchange.chunks)
        times = exchange.times if self.timing and exchange.times else None
        delays = tuple(max(0.0, b - a) for a, b in itertools.pairwise(times)) if times else ()
        return WireResponse(
            exchange.body,
            status=exchange.status,
            content_type=exchange.headers.get("content-type", "text/event-stream"),
            headers=headers,
            chunking=self.chunking or Chunking("sizes", sizes=sizes),
            first_byte_delay=times[0] if times else 0.0,
            chunk_delays=delays,
        )

    async def _record(
        self, route: _Route, path: str, http: RecordedRequest, made: Exchange
    ) -> WireResponse:
        assert route.origin is not None  # (routes of recording clients only)
        url = self._upstream.url(route.origin, path, http)
        self._secrets.learn(http.headers, url)
        try:
            relay = await self._upstream.open(url, http)
        except Exception as exc:  # httpx's errors, an OSError: the API out of reach
            message = f"recording: no answer from {route.origin} ({type(exc).__name__}: {exc})"
            return _error(502, "cassette_upstream", self._secrets.text(message))
        return WireResponse(
            status=relay.status,
            content_type=relay.headers.get("content-type", "text/event-stream"),
            headers={k: v for k, v in relay.headers.items() if k != "content-type"},
            stream=self._relayed(relay, made),
        )

    async def _relayed(self, relay: Relay, made: Exchange) -> AsyncGenerator[bytes]:
        """The answer's pieces to the client; the whole answer kept once it has all come."""
        done = anyio.Event()
        self._relays.append(done)
        body = relay.body()
        try:
            async for chunk in body:
                yield chunk
        finally:
            await body.aclose()  # a client that left: the API's answer is closed too
            done.set()
        if relay.complete:  # an answer cut short (the client left) is no recording
            times = relay.times if self.timing else None
            self._new.append(
                dataclasses.replace(
                    made,
                    status=relay.status,
                    headers=relay.headers,
                    chunks=relay.chunks,
                    times=times,
                )
            )


def _http_client(target: object) -> HttpClient:
    from llm_worker.providers._base import HttpClient

    client = target if isinstance(target, HttpClient) else getattr(target, "client", None)
    if not isinstance(client, HttpClient):
        raise ConfigurationError(
            f"a cassette records what an HTTP provider client sends, and "
            f"{type(target).__name__} is not one and has none as its `client` (a "
            "ScriptedClient answers without a wire: there is nothing to record)"
        )
    return client


def _error(status: int, error_type: str, message: str) -> WireResponse:
    return WireResponse(
        {"error": {"type": error_type, "message": message}},
        status=status,
        content_type="application/json",
    )
