"""The SSE decoder against the WHATWG event-stream rules, any chunking, and real recordings."""

from __future__ import annotations

import itertools
import re
import tracemalloc
from dataclasses import dataclass

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_worker.errors import MalformedStreamError
from llm_worker.providers._sse import ServerSentEvent, SSEDecoder, json_of
from support import recorded

BOM = b"\xef\xbb\xbf"


def decode(*chunks: bytes) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    events.extend(decoder.flush())
    return events


def split_at(body: bytes, cuts: list[int]) -> list[bytes]:
    points = [0, *sorted(set(cuts)), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(points)]


def reference(body: bytes) -> list[ServerSentEvent]:
    """A direct reading of the WHATWG algorithm over the whole text (plus our flush rule)."""
    text = body.decode("utf-8", "replace")
    text = text.removeprefix("\ufeff")
    *lines, last = re.split(r"\r\n|\r|\n", text)
    events: list[ServerSentEvent] = []
    data: list[str] = []
    event = ""
    last_id: str | None = None
    retry: int | None = None
    # At the end of the stream an unfinished last line still counts, and so does its event.
    for line in [*lines, last, ""]:
        if line == "":
            if data:
                events.append(ServerSentEvent(event or "message", "\n".join(data), last_id, retry))
                retry = None
            data, event = [], ""
            continue
        if line.startswith(":"):
            continue
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            last_id = value
        elif name == "retry" and value and all("0" <= c <= "9" for c in value):
            retry = int(value)
    return events


# --- line ends -------------------------------------------------------------------------------


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_every_line_end_gives_the_same_events(eol: bytes) -> None:
    body = eol.join([b"event: a", b"data: 1", b"data: 2", b"", b"data: 3", b"", b""])
    assert decode(body) == [
        ServerSentEvent("a", "1\n2"),
        ServerSentEvent("message", "3"),
    ]


def test_mixed_line_ends_in_one_stream() -> None:
    assert decode(b"data: a\rdata: b\r\ndata: c\n\r\n") == [ServerSentEvent("message", "a\nb\nc")]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    assert decode(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == [
        ServerSentEvent("message", "a\nb")
    ]


def test_cr_then_cr_is_two_line_ends_even_across_chunks() -> None:
    # "data: a" CR, then CR LF: the second CR starts a blank line, which dispatches.
    assert decode(b"data: a\r", b"\r\n", b"data: b\n\n") == [
        ServerSentEvent("message", "a"),
        ServerSentEvent("message", "b"),
    ]


@pytest.mark.parametrize(
    "char", ["\u2028", "\u2029", "\u0085", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]
)
def test_unicode_line_breaks_are_data_not_line_ends(char: str) -> None:
    # str.splitlines() would break on every one of these; SSE ends lines at CR and LF only.
    body = f"data: a{char}b\n\n".encode()
    assert decode(body) == [ServerSentEvent("message", f"a{char}b")]


# --- fields ----------------------------------------------------------------------------------


def test_data_lines_are_joined_with_lf() -> None:
    assert decode(b"data: one\ndata: two\ndata: three\n\n")[0].data == "one\ntwo\nthree"


def test_comments_are_ignored() -> None:
    body = b": OPENROUTER PROCESSING\n\ndata: x\n:comment inside\ndata: y\n\n:\n\n"
    assert decode(body) == [ServerSentEvent("message", "x\ny")]


def test_event_type_applies_to_its_event_only() -> None:
    body = b"event: ping\ndata: {}\n\ndata: plain\n\n"
    assert [e.event for e in decode(body)] == ["ping", "message"]


def test_event_type_without_data_is_forgotten_at_the_blank_line() -> None:
    assert decode(b"event: lost\n\ndata: x\n\n") == [ServerSentEvent("message", "x")]


def test_empty_event_type_means_message() -> None:
    assert decode(b"event:\ndata: x\n\n")[0].event == "message"


def test_last_event_id_persists_until_changed() -> None:
    body = b"id: 1\ndata: a\n\ndata: b\n\nid: 2\n\ndata: c\n\nid\ndata: d\n\n"
    assert [e.id for e in decode(body)] == ["1", "1", "2", ""]


def test_id_containing_nul_is_ignored() -> None:
    assert [e.id for e in decode(b"id: 7\ndata: a\n\nid: 8\x009\ndata: b\n\n")] == ["7", "7"]


def test_retry_sets_the_reconnection_time() -> None:
    events = decode(b"retry: 3000\ndata: a\n\ndata: b\n\n")
    assert [e.retry for e in events] == [3000, None]


@pytest.mark.parametrize("value", [b"12a", b"-1", b" 5", b"1.5", b"", "\u0661\u0662".encode()])
def test_retry_with_anything_but_ascii_digits_is_ignored(value: bytes) -> None:
    assert decode(b"retry: " + value + b"\ndata: a\n\n")[0].retry is None


def test_retry_without_data_rides_on_the_next_event() -> None:
    # A retry-only block is what servers send; the value is kept, not dropped.
    assert decode(b"retry: 10\n\ndata: a\n\n")[0].retry == 10


def test_field_without_colon_has_an_empty_value() -> None:
    assert decode(b"data\ndata\n\n") == [ServerSentEvent("message", "\n")]
    assert decode(b"event: e\nevent\ndata: x\n\n")[0].event == "message"


def test_only_one_leading_space_is_stripped() -> None:
    body = b"data:no space\ndata:  two spaces\ndata:\ttab\n\n"
    assert decode(body)[0].data == "no space\n two spaces\n\ttab"
    assert decode(b"event:  x\ndata: a\n\n")[0].event == " x"


def test_unknown_fields_and_leading_space_names_are_ignored() -> None:
    assert decode(b"foo: bar\n data: no\nData: no\ndata: yes\n\n") == [
        ServerSentEvent("message", "yes")
    ]


def test_empty_data_line_dispatches_an_empty_event() -> None:
    assert decode(b"data:\n\n") == [ServerSentEvent("message", "")]
    assert decode(b"data: \n\n") == [ServerSentEvent("message", "")]


def test_blank_lines_alone_dispatch_nothing() -> None:
    assert decode(b"\n\n\r\n\r\r\n") == []


def test_colon_in_value_is_kept() -> None:
    assert decode(b'data: {"a": "b:c"}\n\n')[0].data == '{"a": "b:c"}'


# --- byte order mark -------------------------------------------------------------------------


def test_bom_at_start_is_stripped() -> None:
    assert decode(BOM + b"data: x\n\n") == [ServerSentEvent("message", "x")]


@pytest.mark.parametrize("cut", [1, 2, 3])
def test_bom_split_across_chunks_is_stripped(cut: int) -> None:
    body = BOM + b"data: x\n\n"
    assert decode(body[:cut], body[cut:]) == [ServerSentEvent("message", "x")]
    assert decode(*[body[i : i + 1] for i in range(len(body))]) == [ServerSentEvent("message", "x")]


def test_only_one_bom_and_only_at_start() -> None:
    # A second BOM belongs to the first line's field name, which no longer matches "data".
    assert decode(BOM + BOM + b"data: x\n\ndata: y\n\n") == [ServerSentEvent("message", "y")]
    assert decode(b"data: \xef\xbb\xbfx\n\n") == [ServerSentEvent("message", "\ufeffx")]


def test_a_partial_bom_is_part_of_the_first_line() -> None:
    # One byte of a BOM, then no more of it: the byte stays and spoils the first field name.
    assert decode(b"\xef", b"data: x\n\ndata: y\n\n") == [ServerSentEvent("message", "y")]
    assert decode(b"data: a\n\n", BOM) == [ServerSentEvent("message", "a")]


# --- end of stream ---------------------------------------------------------------------------


def test_final_event_without_blank_line_is_dispatched_by_flush() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n\ndata: b") == [ServerSentEvent("message", "a")]
    assert decoder.flush() == [ServerSentEvent("message", "b")]
    assert decoder.flush() == []


def test_final_event_with_one_line_end_is_dispatched_by_flush() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"event: done\ndata: b\r") == []
    assert decoder.flush() == [ServerSentEvent("done", "b")]


def test_flush_after_a_complete_stream_gives_nothing() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n\n") == [ServerSentEvent("message", "a")]
    assert decoder.flush() == []


def test_empty_chunks_change_nothing() -> None:
    assert decode(b"", b"data: a", b"", b"\n", b"", b"\n", b"") == [ServerSentEvent("message", "a")]


# --- bytes -----------------------------------------------------------------------------------


def test_multibyte_utf8_split_anywhere() -> None:
    body = "data: é漢字😀\n\n".encode()
    expected = [ServerSentEvent("message", "é漢字😀")]
    for cut in range(len(body)):
        assert decode(body[:cut], body[cut:]) == expected
    assert decode(*[body[i : i + 1] for i in range(len(body))]) == expected


def test_invalid_utf8_becomes_replacement_characters() -> None:
    assert decode(b"data: a\xffb\xe6\n\n") == [ServerSentEvent("message", "a\ufffdb\ufffd")]


def test_a_long_line_over_many_chunks_is_decoded_whole() -> None:
    payload = b"x" * 200_000
    body = b"data: " + payload + b"\n\n"
    chunks = [body[i : i + 1000] for i in range(0, len(body), 1000)]
    assert decode(*chunks) == [ServerSentEvent("message", payload.decode())]


# --- properties ------------------------------------------------------------------------------


@dataclass
class Spec:
    event: str | None
    data: list[str]
    id: str | None
    comment: str | None


_line_text = st.text(
    st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=12
)
_specs = st.builds(
    Spec,
    event=st.none() | _line_text,
    data=st.lists(_line_text, min_size=1, max_size=4),
    id=st.none() | _line_text.filter(lambda s: "\0" not in s),
    comment=st.none() | _line_text,
)


def serialize(specs: list[Spec], eols: list[bytes]) -> bytes:
    lines: list[str] = []
    for spec in specs:
        if spec.comment is not None:
            lines.append(":" + spec.comment)
        if spec.event is not None:
            lines.append("event: " + spec.event)
        if spec.id is not None:
            lines.append("id: " + spec.id)
        lines.extend("data: " + d for d in spec.data)
        lines.append("")
    out = b""
    previous = b""
    for n, line in enumerate(lines):
        eol = eols[n % len(eols)]
        if previous == b"\r" and not line and eol == b"\n":
            eol = b"\r"  # CR then an empty line ended by LF would read as one CRLF
        out += line.encode() + eol
        previous = eol
    return out


def expected_events(specs: list[Spec]) -> list[ServerSentEvent]:
    events: list[ServerSentEvent] = []
    last_id: str | None = None
    for spec in specs:
        last_id = spec.id if spec.id is not None else last_id
        events.append(ServerSentEvent(spec.event or "message", "\n".join(spec.data), last_id))
    return events


@settings(max_examples=300, deadline=None)
@given(
    specs=st.lists(_specs, max_size=5),
    eols=st.lists(st.sampled_from([b"\n", b"\r\n", b"\r"]), min_size=1, max_size=4),
    bom=st.booleans(),
    data=st.data(),
)
def test_any_events_with_any_line_ends_and_any_chunking(
    specs: list[Spec], eols: list[bytes], bom: bool, data: st.DataObject
) -> None:
    body = (BOM if bom else b"") + serialize(specs, eols)
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=12))
    expected = expected_events(specs)
    assert decode(body) == expected
    assert decode(*split_at(body, cuts)) == expected


_soup = st.lists(
    st.sampled_from(
        [
            *(b"data", b"event", b"id", b"retry", b":", b": ", b" ", b"x", b"12", b"\0"),
            *(b"\n", b"\r", b"\r\n", b"\n\n", BOM, "é漢".encode(), "\u2028".encode(), b"\xff"),
        ]
    ),
    max_size=40,
).map(b"".join)


@settings(max_examples=500, deadline=None)
@given(body=_soup, data=st.data())
def test_matches_a_reference_decoder_on_arbitrary_bytes(body: bytes, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=8))
    assert decode(body) == reference(body)
    assert decode(*split_at(body, cuts)) == reference(body)


# Runs of events of one `data: ` line each (Chat's every event) are read at once, tested in C
# over the whole run (`SSEDecoder._run`): bodies mostly of such events, with what must send a
# read back to the line path among them, in any chunking.
_runs = st.lists(
    st.sampled_from(
        [
            *(b"data: x\n\n", b"data: \n\n", b'data: {"a": [1]}\n\n', b"data: \xc3\xa9\n\n"),
            *(b"data:x\n\n", b"data:  y\n\n", b"data: a\ndata: b\n\n", b"data: z", b"data: "),
            *(b"\n", b"\n\n", b"\r", b"\r\n", b": c\n", b"event: e\n", b"id: 7\n", b"retry: 5\n"),
            *(BOM, b"data: a\r\n\r\n", b"x\n\n", b"data: u\n\n\n"),
        ]
    ),
    max_size=30,
).map(b"".join)


# The same framed by CRLF (Gemini's every event), with lone CRs and LFs, mixed framing and
# CRs split from their LFs among them.
_crlf_runs = st.lists(
    st.sampled_from(
        [
            *(b"data: x\r\n\r\n", b"data: \r\n\r\n", b'data: {"a": [1]}\r\n\r\n'),
            *(b"data: \xc3\xa9\r\n\r\n", b"data:x\r\n\r\n", b"data: a\r\ndata: b\r\n\r\n"),
            *(b"data: z", b"data: ", b"\r", b"\n", b"\r\n", b"\r\n\r\n", b": c\r\n"),
            *(b"event: e\r\n", b"id: 7\r\n", b"data: a\n\n", b"data: a\rb\r\n\r\n"),
            *(b"data: a\r\r\n\r\n", b"data: a\r\n\n", b"data: u\r\n\r\n\r\n", BOM),
        ]
    ),
    max_size=30,
).map(b"".join)


@settings(max_examples=900, deadline=None)
@given(body=st.one_of(_runs, _crlf_runs), data=st.data())
def test_runs_of_one_line_events_match_the_reference_in_any_chunking(
    body: bytes, data: st.DataObject
) -> None:
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=8))
    assert decode(body) == reference(body)
    assert decode(*split_at(body, cuts)) == reference(body)


@pytest.mark.parametrize(
    "body",
    [
        b"data: a\rdata: b\n\n",  # a lone CR ends the first line: two data lines
        b"data: a\n\ndata: b\rc\n\n",
        b"data: a\n\ndata: b\ndata: c\n\n",  # two data lines in the run's last event
        b"data: a\n\n: ping\n\ndata: b\n\n",
        b"data: a\n\nid: 3\ndata: b\n\n",
        b"data: a\n\n\n\ndata: b\n\n\n",  # extra blank lines
        b"data: a\n\ndata:b\n\ndata:  c\n\n",  # no space, two spaces
        b"data: \n\ndata: \n\n",  # empty data
        b"data: a\r\n\r\ndata: b\rc\r\n\r\n",  # a lone CR in a CRLF run: two data lines
        b"data: a\r\n\r\ndata: b\nc\r\n\r\n",  # a lone LF
        b"data: a\r\n\r\ndata: b\n\n",  # LF framing after CRLF
        b"data: a\n\ndata: b\r\n\r\n",  # and before
        b"data: a\r\n\r\n\r\n\r\ndata: b\r\n\r\n",  # extra blank lines
        b"data: a\r\r\n\r\ndata: b\r\n\r\n",
    ],
)
def test_near_misses_of_a_run_of_one_line_events(body: bytes) -> None:
    assert decode(body) == reference(body)
    for cut in range(len(body) + 1):
        assert decode(body[:cut], body[cut:]) == reference(body), cut


# --- real recordings -------------------------------------------------------------------------


def _sse_recordings() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for api in ("openai_chat", "openai_responses", "anthropic_messages", "gemini"):
        for name in recorded.fixture_names(api):
            response = recorded.load(api, name)["response"]
            if response["status"] == 200 and "event-stream" in response["content_type"]:
                found.append((api, name))
    return found


def test_every_recorded_stream_decodes_alike_whole_bytewise_and_in_pieces() -> None:
    recordings = _sse_recordings()
    assert len(recordings) > 50
    for api, name in recordings:
        body: bytes = recorded.load(api, name)["response"]["body"].encode()
        whole = decode(body)
        assert whole == reference(body), name
        assert whole, name
        assert decode(*[body[i : i + 1] for i in range(len(body))]) == whole, name
        assert decode(*split_at(body, list(range(7, len(body), 97)))) == whole, name
        # Every recorded data field is JSON or the [DONE] sentinel: no event was mangled.
        for event in whole:
            assert event.data == "[DONE]" or event.data.lstrip()[:1] in ("{", "["), (name, event)


# --- bounded memory --------------------------------------------------------------------------


@pytest.mark.parametrize("piece", [1, 7, 100], ids=["1", "7", "100"])
def test_an_unfinished_line_fails_on_the_chunk_that_passes_the_limit(piece: int) -> None:
    decoder = SSEDecoder(max_event_bytes=1000)
    fed = 0
    error: MalformedStreamError | None = None
    while error is None and fed < 100_000:
        fed += piece
        try:
            decoder.feed(b"y" * piece)
        except MalformedStreamError as exc:
            error = exc
    # Failed at once, not at the end of the stream; a line may hold `data: ` beside the
    # limit's bytes (an event of exactly the limit passes however its line is split).
    assert 1006 < fed <= 1006 + piece
    assert error is not None
    assert "one line of the event stream" in error.message
    assert "max_event_bytes=1,000" in error.message


def test_the_rest_after_a_line_end_counts_too() -> None:
    decoder = SSEDecoder(max_event_bytes=1000)
    assert decoder.feed(b"data: a\n\n") == [ServerSentEvent("message", "a")]
    with pytest.raises(MalformedStreamError):
        decoder.feed(b"data: b\n\n" + b"z" * 1007)


def test_an_event_of_many_lines_is_bounded_and_the_count_restarts_per_event() -> None:
    decoder = SSEDecoder(max_event_bytes=1000)
    line = b"data: " + b"d" * 99 + b"\n"
    for _ in range(3):  # three events of 900 bytes each: each under the limit
        events = decoder.feed(line * 9 + b"\n")
        assert [len(e.data) for e in events] == [9 * 99 + 8]
    with pytest.raises(MalformedStreamError, match="one event of the stream"):
        decoder.feed(line * 11)


def test_lines_at_the_limit_still_decode() -> None:
    body = b"data: " + b"x" * 994 + b"\n\n"  # a line of exactly 1,000 bytes
    decoder = SSEDecoder(max_event_bytes=1000)
    events = [e for i in range(0, len(body), 10) for e in decoder.feed(body[i : i + 10])]
    assert events == [ServerSentEvent("message", "x" * 994)]


def test_a_whole_event_past_the_limit_in_one_chunk_fails() -> None:
    # The event's line ends in the same chunk: counted when the event ends, not as a tail.
    with pytest.raises(MalformedStreamError, match="one event of the stream"):
        SSEDecoder(max_event_bytes=1000).feed(b"data: " + b"x" * 1001 + b"\n\n")
    with pytest.raises(MalformedStreamError, match="one event of the stream"):
        SSEDecoder(max_event_bytes=1000).feed(b"event: e\ndata: " + b"x" * 1001 + b"\n\n")


def test_the_limit_counts_the_data_as_dispatched_with_the_lfs_that_join_its_lines() -> None:
    # The LFs count: `data:` lines without data grow an event all the same (uncounted, an
    # event of empty lines held memory without limit).
    body = b"data: " + b"x" * 500 + b"\ndata: " + b"y" * 499 + b"\n\n"  # 1,000 bytes of data
    assert decode_with(body, limit=1000) == [
        ServerSentEvent("message", "x" * 500 + "\n" + "y" * 499)
    ]
    with pytest.raises(MalformedStreamError, match="one event of the stream"):
        decode_with(body.replace(b"y" * 499, b"y" * 500), limit=1000)


def decode_with(body: bytes, *, limit: int) -> list[ServerSentEvent]:
    decoder = SSEDecoder(max_event_bytes=limit)
    return [*decoder.feed(body), *decoder.flush()]


def test_many_event_types_decode_past_the_few_remembered() -> None:
    # Event types are remembered by their whole line, a bounded few: the rest decode as ever.
    body = b"".join(b"event: kind%d\ndata: %d\n\n" % (i % 50, i) for i in range(200))
    events = decode(*split_at(body, list(range(0, len(body), 37))))
    assert [(e.event, e.data) for e in events] == [(f"kind{i % 50}", str(i)) for i in range(200)]


def test_a_remembered_event_line_names_only_its_own_event() -> None:
    body = b"event: ping\ndata: 1\n\ndata: 2\n\nevent: ping\n\ndata: 3\n\nevent: ping\ndata: 4\n\n"
    assert [(e.event, e.data) for e in decode(body)] == [
        ("ping", "1"), ("message", "2"), ("message", "3"), ("ping", "4")
    ]  # fmt: skip


def test_the_event_line_read_last_names_only_its_own_events() -> None:
    # An `event:` line is compared with the one read last before it is looked up: the same
    # type again, two types of one length alternating, repeats past the few remembered, a
    # type without data (forgotten), the line as a data value; whole and split in pieces.
    names = [b"delta", b"delta", b"stops", b"delta", b"stops", b"stops"]
    names += [b"k%02d" % i for i in range(40)] + [b"delta", b"delta", b"k39", b"k39"]
    body = b"".join(b"event: %s\ndata: %d\n\n" % (name, i) for i, name in enumerate(names))
    body += b"event: delta\n\ndata: plain\n\ndata: event: delta\n\nevent: delta\ndata: x\n\n"
    expected = reference(body)
    assert [e.event for e in expected][-4:] == ["k39", "message", "message", "delta"]
    for piece in (len(body), 1, 7, 26):
        assert decode(*split_at(body, list(range(0, len(body), piece)))) == expected


@pytest.mark.parametrize(
    "body",
    [
        b"data: a\r\ndata: b\nc\r\n\r\n",  # a lone LF among CRLFs
        b"data: a\rdata: b\r\n\r\n",  # a lone CR among CRLFs
        b"data: a\r\n\r\ndata: b\r\n\r\n",  # CRLF only: the fast split
    ],
    ids=["lone-LF", "lone-CR", "CRLF"],
)
def test_crlf_bodies_with_and_without_lone_line_ends(body: bytes) -> None:
    assert decode(body) == reference(body)
    assert decode(*[body[i : i + 1] for i in range(len(body))]) == reference(body)


def test_raw_events_are_the_type_and_the_undecoded_data() -> None:
    decoder = SSEDecoder()
    assert list(decoder.raw(b"event: e\ndata: caf\xc3\xa9\xff\n\ndata: x\n\n")) == [
        ("e", b"caf\xc3\xa9\xff"),
        ("message", b"x"),
    ]


def test_json_of_reads_bytes_and_replaces_invalid_utf8() -> None:
    assert json_of(b'{"a": "caf\xc3\xa9"}') == {"a": "caf\u00e9"}
    assert json_of(b'{"a": "x\xff"}') == {"a": "x\ufffd"}
    with pytest.raises(orjson.JSONDecodeError):
        json_of(b'{"a": ')


@pytest.mark.parametrize("read", [6, 4096], ids=["a line per read", "many lines per read"])
def test_an_event_of_empty_data_lines_is_bounded_too(read: int) -> None:
    # Each `data:` line without data held an entry and counted nothing: a server sending
    # them without a blank line grew the decoder's memory without ever failing.
    decoder = SSEDecoder(max_event_bytes=1000)
    body = b"data:\n" * 2000
    reads = [body[at : at + read] for at in range(0, len(body), read)]
    with pytest.raises(MalformedStreamError, match="one event of the stream"):
        _feed_all(decoder, reads)


def _feed_all(decoder: SSEDecoder, reads: list[bytes]) -> None:
    for read in reads:
        decoder.feed(read)


def test_an_open_event_of_short_lines_is_held_at_about_its_size() -> None:
    # An object per line cost ~40 bytes for 3 counted: tens of times the limit was held
    # before the limit failed the event. Each read's lines are held joined.
    decoder = SSEDecoder()
    read = b"data: xy\n" * 7000  # 63 KB, 21 KB of data with its LFs
    tracemalloc.start()
    try:
        for _ in range(30):
            decoder.feed(read)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held < 2 * 30 * 3 * 7000
    [event] = decoder.feed(b"\n")
    assert event.data == "\n".join(["xy"] * 210_000)
