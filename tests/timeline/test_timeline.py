"""The Timeline's rules, one by one: meta dispatch, block lifecycles, scopes, odd streams."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from llm_worker import (
    BlockAbort,
    BlockDelta,
    BlockStart,
    BlockStop,
    BlockType,
    ErrorEvent,
    Event,
    InputJsonDelta,
    PingEvent,
    ResponseStatus,
    SignatureDelta,
    StatusEvent,
    StopReason,
    TextBlockAbort,
    TextBlockStart,
    TextBlockStop,
    TextDelta,
    TextMetadata,
    ThinkingBlockAbort,
    ThinkingBlockStart,
    ThinkingBlockStop,
    ThinkingDelta,
    ThinkingMetadata,
    Timeline,
    ToolResultMetadata,
    ToolUseBlockAbort,
    ToolUseBlockStart,
    ToolUseBlockStop,
    ToolUseMetadata,
    UsageEvent,
)

# -- helpers shared with the property tests -----------------------------------------------


@dataclass
class Scope:
    """A scope that knows who made it; `serial` is unique over a whole test."""

    owner: str
    serial: int
    events: list[object] = field(default_factory=lambda: [])


@dataclass
class Log:
    """One log of (handler, scope serial or None, event) over all handlers, in call order."""

    calls: list[tuple[str, int | None, object]] = field(default_factory=lambda: [])
    scopes: list[Scope] = field(default_factory=lambda: [])

    def of(self, name: str) -> list[object]:
        return [event for who, _serial, event in self.calls if who == name]

    def serials(self, name: str) -> list[int | None]:
        return [serial for who, serial, _event in self.calls if who == name]


class Recorder:
    """A Handler that logs every call with its scope, for any kind."""

    def __init__(self, name: str, log: Log) -> None:
        self.name = name
        self.log = log

    def new_scope(self) -> Scope:
        scope = Scope(self.name, len(self.log.scopes))
        self.log.scopes.append(scope)
        return scope

    def on_event(self, scope: Scope, event: Any, /) -> None:
        scope.events.append(event)
        self.log.calls.append((self.name, scope.serial, event))


def plain(name: str, log: Log) -> Any:
    """A plain callable that logs its calls (no scope)."""

    def handler(event: object) -> None:
        log.calls.append((name, None, event))

    return handler


def text_start(index: int) -> BlockStart:
    return BlockStart(index, BlockType.TEXT, TextMetadata())


def tool_start(index: int, call_id: str, name: str) -> BlockStart:
    return BlockStart(index, BlockType.TOOL_USE, ToolUseMetadata(call_id, name))


def text(index: int, s: str) -> BlockDelta:
    return BlockDelta(index, TextDelta(s))


def feed(timeline: Timeline, events: list[Event]) -> None:
    for event in events:
        timeline.dispatch(event)


@pytest.fixture
def log() -> Log:
    return Log()


# -- meta events ----------------------------------------------------------------------------


def test_meta_events_reach_their_handlers_in_registration_order(log: Log) -> None:
    timeline = Timeline()
    timeline.on_usage(Recorder("u1", log))
    timeline.on_usage(plain("u2", log))
    timeline.on_usage(Recorder("u3", log))
    timeline.on_ping(plain("p", log))
    timeline.on_status(Recorder("s", log))
    timeline.on_error(plain("e", log))
    usage, ping = UsageEvent(input_tokens=3), PingEvent(1.0)
    status, error = StatusEvent(ResponseStatus.STARTED), ErrorEvent("x", "boom")
    feed(timeline, [usage, ping, status, error])
    assert [(who, event) for who, _s, event in log.calls] == [
        ("u1", usage),
        ("u2", usage),
        ("u3", usage),
        ("p", ping),
        ("s", status),
        ("e", error),
    ]


def test_a_meta_handler_gets_one_scope_at_registration(log: Log) -> None:
    timeline = Timeline()
    timeline.on_usage(Recorder("u", log))
    assert len(log.scopes) == 1  # made at registration, before any event
    feed(timeline, [UsageEvent(input_tokens=1), text_start(0), UsageEvent(output_tokens=2)])
    feed(timeline, [BlockStop(0, BlockType.TEXT), UsageEvent(output_tokens=3)])
    assert log.serials("u") == [0, 0, 0]
    assert len(log.scopes) == 1


def test_meta_events_keep_their_place_among_block_events(log: Log) -> None:
    timeline = Timeline()
    timeline.on_text_block(plain("t", log))
    timeline.on_usage(plain("u", log))
    timeline.on_ping(plain("t", log))  # same name: one sequence to compare
    usage, ping = UsageEvent(output_tokens=1), PingEvent()
    feed(timeline, [text_start(0), text(0, "a"), usage, text(0, "b"), ping])
    feed(timeline, [BlockStop(0, BlockType.TEXT)])
    assert log.of("t") == [
        TextBlockStart(0),
        TextDelta("a"),
        TextDelta("b"),
        ping,
        TextBlockStop(0),
    ]
    order = [event for _who, _s, event in log.calls]
    assert order.index(usage) == 2


# -- block lifecycles -----------------------------------------------------------------------


def test_text_block_lifecycle_passes_the_delta_objects_through(log: Log) -> None:
    timeline = Timeline()
    timeline.on_text_block(Recorder("t", log))
    d1, d2 = text(0, "Hel"), text(0, "lo")
    feed(timeline, [text_start(0), d1, d2])
    feed(timeline, [BlockStop(0, BlockType.TEXT, StopReason.END_TURN, "stop")])
    events = log.of("t")
    assert events == [
        TextBlockStart(0),
        TextDelta("Hel"),
        TextDelta("lo"),
        TextBlockStop(0, StopReason.END_TURN, "stop"),
    ]
    assert events[1] is d1.delta  # no copy per delta
    assert events[2] is d2.delta


def test_thinking_block_lifecycle_carries_its_metadata(log: Log) -> None:
    timeline = Timeline()
    timeline.on_thinking_block(Recorder("k", log))
    meta = ThinkingMetadata(item_id="rs_1")
    feed(
        timeline,
        [
            BlockStart(0, BlockType.THINKING, meta),
            BlockDelta(0, ThinkingDelta("hmm")),
            BlockStop(0, BlockType.THINKING),
        ],
    )
    assert log.of("k") == [ThinkingBlockStart(0, meta), ThinkingDelta("hmm"), ThinkingBlockStop(0)]


def test_tool_use_stop_and_abort_carry_the_id_and_name_from_the_start(log: Log) -> None:
    timeline = Timeline()
    timeline.on_tool_use_block(Recorder("c", log))
    feed(
        timeline,
        [
            tool_start(0, "call_1", "get_weather"),
            BlockDelta(0, InputJsonDelta('{"city":')),
            BlockDelta(0, InputJsonDelta('"Oslo"}')),
            BlockStop(0, BlockType.TOOL_USE, StopReason.TOOL_USE, "tool_calls"),
            tool_start(1, "call_2", "search"),
            BlockDelta(1, InputJsonDelta("{")),
            BlockAbort(1, BlockType.TOOL_USE, "connection reset"),
        ],
    )
    assert log.of("c") == [
        ToolUseBlockStart(0, "call_1", "get_weather"),
        InputJsonDelta('{"city":'),
        InputJsonDelta('"Oslo"}'),
        ToolUseBlockStop(0, "call_1", "get_weather", StopReason.TOOL_USE, "tool_calls"),
        ToolUseBlockStart(1, "call_2", "search"),
        InputJsonDelta("{"),
        ToolUseBlockAbort(1, "call_2", "search", "connection reset"),
    ]


def test_each_kind_goes_only_to_its_own_handlers(log: Log) -> None:
    timeline = Timeline()
    timeline.on_text_block(plain("text", log))
    timeline.on_thinking_block(plain("thinking", log))
    timeline.on_tool_use_block(plain("tool", log))
    feed(
        timeline,
        [
            BlockDelta(0, ThinkingDelta("t")),
            BlockStop(0, BlockType.THINKING),
            text(1, "x"),
            BlockStop(1, BlockType.TEXT),
            tool_start(2, "c", "f"),
            BlockStop(2, BlockType.TOOL_USE),
        ],
    )
    assert log.of("thinking") == [ThinkingBlockStart(0), ThinkingDelta("t"), ThinkingBlockStop(0)]
    assert log.of("text") == [TextBlockStart(1), TextDelta("x"), TextBlockStop(1)]
    assert log.of("tool") == [ToolUseBlockStart(2, "c", "f"), ToolUseBlockStop(2, "c", "f")]


def test_tool_result_blocks_go_to_the_text_handlers(log: Log) -> None:
    timeline = Timeline()
    timeline.on_text_block(plain("t", log))
    timeline.dispatch(BlockStart(0, BlockType.TOOL_RESULT, ToolResultMetadata("call_9")))
    assert timeline.current_block is BlockType.TOOL_RESULT
    feed(timeline, [text(0, "42"), BlockStop(0, BlockType.TOOL_RESULT)])
    assert log.of("t") == [
        TextBlockStart(0, tool_use_id="call_9"),
        TextDelta("42"),
        TextBlockStop(0),
    ]
    assert timeline.current_block is None


def test_signature_deltas_are_not_passed_to_handlers(log: Log) -> None:
    timeline = Timeline()
    timeline.on_thinking_block(plain("k", log))
    timeline.on_text_block(plain("t", log))
    feed(
        timeline,
        [
            BlockDelta(0, SignatureDelta("sig-before-any-block")),
            BlockStart(0, BlockType.THINKING, ThinkingMetadata()),
            BlockDelta(0, ThinkingDelta("a")),
            BlockDelta(0, SignatureDelta("sig")),
            BlockStop(0, BlockType.THINKING),
        ],
    )
    assert log.of("k") == [ThinkingBlockStart(0), ThinkingDelta("a"), ThinkingBlockStop(0)]
    assert log.of("t") == []


def test_current_block_follows_the_open_block() -> None:
    timeline = Timeline()
    assert timeline.current_block is None
    timeline.dispatch(tool_start(0, "c", "f"))
    assert timeline.current_block is BlockType.TOOL_USE
    timeline.dispatch(BlockStop(0, BlockType.TOOL_USE))
    assert timeline.current_block is None
    timeline.dispatch(text(1, "implicit"))
    assert timeline.current_block is BlockType.TEXT


# -- scopes -------------------------------------------------------------------------------


def test_scopes_are_fresh_per_block_and_per_handler_and_kept_within_a_block(log: Log) -> None:
    timeline = Timeline()
    timeline.on_text_block(Recorder("a", log))
    timeline.on_text_block(Recorder("b", log))
    for index in range(2):
        feed(timeline, [text_start(index), text(index, "x"), text(index, "y")])
        feed(timeline, [BlockStop(index, BlockType.TEXT)])
    # a: scope 0 for block 0 and 2 for block 1; b: 1 and 3 — made at each start.
    assert log.serials("a") == [0, 0, 0, 0, 2, 2, 2, 2]
    assert log.serials("b") == [1, 1, 1, 1, 3, 3, 3, 3]
    assert [s.owner for s in log.scopes] == ["a", "b", "a", "b"]


def test_handlers_are_called_in_registration_order_plain_and_scoped_alike(log: Log) -> None:
    timeline = Timeline()
    timeline.on_text_block(plain("1", log))
    timeline.on_text_block(Recorder("2", log))
    timeline.on_text_block(plain("3", log))
    feed(timeline, [text_start(0), text(0, "x"), BlockStop(0, BlockType.TEXT)])
    assert [who for who, _s, _e in log.calls] == ["1", "2", "3"] * 3


def test_a_delta_without_start_starts_the_block_implicitly(log: Log) -> None:
    timeline = Timeline()
    timeline.on_text_block(Recorder("t", log))
    timeline.on_tool_use_block(Recorder("c", log))
    feed(
        timeline,
        [
            text(0, "a"),
            text(0, "b"),
            BlockStop(0, BlockType.TEXT),
            BlockDelta(1, InputJsonDelta("{}")),
            BlockStop(1, BlockType.TOOL_USE),
        ],
    )
    assert log.of("t") == [TextBlockStart(0), TextDelta("a"), TextDelta("b"), TextBlockStop(0)]
    assert log.of("c") == [
        ToolUseBlockStart(1, "", ""),
        InputJsonDelta("{}"),
        ToolUseBlockStop(1, "", ""),
    ]
    assert log.serials("t") == [0, 0, 0, 0]
    assert len(log.scopes) == 2


# -- aborts ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        (text_start(3), TextBlockAbort(3, "cancelled")),
        (BlockStart(3, BlockType.THINKING, ThinkingMetadata()), ThinkingBlockAbort(3, "cancelled")),
        (tool_start(3, "c", "f"), ToolUseBlockAbort(3, "c", "f", "cancelled")),
    ],
)
def test_abort_current_block_aborts_the_open_block(
    log: Log, start: BlockStart, expected: object
) -> None:
    timeline = Timeline()
    for register in (
        timeline.on_text_block,
        timeline.on_thinking_block,
        timeline.on_tool_use_block,
    ):
        register(Recorder("h", log))
    timeline.dispatch(start)
    timeline.abort_current_block("cancelled")
    assert log.of("h")[-1] == expected
    assert timeline.current_block is None
    timeline.abort_current_block("again")  # nothing open: no-op
    assert len(log.of("h")) == 2


def test_abort_current_block_default_reason_and_no_op_without_block(log: Log) -> None:
    timeline = Timeline()
    timeline.on_text_block(plain("t", log))
    timeline.abort_current_block()
    assert log.calls == []
    timeline.dispatch(text(0, "x"))
    timeline.abort_current_block()
    assert log.of("t")[-1] == TextBlockAbort(0, "aborted")


def test_after_an_abort_the_next_block_gets_new_scopes(log: Log) -> None:
    timeline = Timeline()
    timeline.on_text_block(Recorder("t", log))
    feed(timeline, [text(0, "a"), BlockAbort(0, BlockType.TEXT, "reset"), text(1, "b")])
    assert log.serials("t") == [0, 0, 0, 1, 1]
    assert log.of("t")[2] == TextBlockAbort(0, "reset")


# -- streams that break the event model -----------------------------------------------------


def test_a_start_while_a_block_is_open_aborts_it_first(log: Log) -> None:
    timeline = Timeline()
    timeline.on_text_block(Recorder("t", log))
    timeline.on_tool_use_block(Recorder("c", log))
    feed(timeline, [text_start(0), text(0, "a"), tool_start(1, "c1", "f")])
    abort = log.of("t")[-1]
    assert isinstance(abort, TextBlockAbort)
    assert abort.index == 0
    assert "block 1 started" in abort.reason
    assert log.of("c") == [ToolUseBlockStart(1, "c1", "f")]
    assert timeline.current_block is BlockType.TOOL_USE


def test_a_delta_for_another_index_aborts_the_open_block_and_starts_one(log: Log) -> None:
    timeline = Timeline()
    timeline.on_text_block(Recorder("t", log))
    feed(timeline, [text_start(0), text(0, "a"), text(5, "b"), BlockStop(5, BlockType.TEXT)])
    events = log.of("t")
    assert isinstance(events[2], TextBlockAbort)
    assert events[2].index == 0
    assert events[3:] == [TextBlockStart(5), TextDelta("b"), TextBlockStop(5)]
    assert log.serials("t") == [0, 0, 0, 1, 1, 1]


def test_a_delta_of_another_kind_aborts_the_open_block_and_starts_its_own(log: Log) -> None:
    timeline = Timeline()
    timeline.on_text_block(plain("t", log))
    timeline.on_thinking_block(plain("k", log))
    feed(timeline, [text_start(0), BlockDelta(0, ThinkingDelta("oops"))])
    assert isinstance(log.of("t")[-1], TextBlockAbort)
    assert log.of("k") == [ThinkingBlockStart(0), ThinkingDelta("oops")]
    assert timeline.current_block is BlockType.THINKING


def test_a_stop_ends_the_open_block_whatever_index_it_names(log: Log) -> None:
    timeline = Timeline()
    timeline.on_text_block(plain("t", log))
    feed(timeline, [text_start(0), BlockStop(7, BlockType.TOOL_USE, StopReason.END_TURN)])
    assert log.of("t") == [TextBlockStart(0), TextBlockStop(0, StopReason.END_TURN)]
    assert timeline.current_block is None


def test_a_stop_or_abort_with_no_open_block_is_ignored(log: Log) -> None:
    timeline = Timeline()
    timeline.on_text_block(plain("t", log))
    feed(timeline, [BlockStop(0, BlockType.TEXT), BlockAbort(0, BlockType.TEXT, "x")])
    assert log.calls == []
    assert timeline.current_block is None


def test_dispatch_rejects_what_is_not_an_event() -> None:
    with pytest.raises(TypeError, match="not str"):
        Timeline().dispatch("hello")  # type: ignore[arg-type]


def test_dispatch_accepts_subclasses_of_the_events(log: Log) -> None:
    class MyDelta(BlockDelta):
        __slots__ = ()

    class MyUsage(UsageEvent):
        __slots__ = ()

    timeline = Timeline()
    timeline.on_text_block(plain("t", log))
    timeline.on_usage(plain("u", log))
    usage = MyUsage(input_tokens=1)
    feed(timeline, [MyDelta(0, TextDelta("a")), MyDelta(0, TextDelta("b")), usage])
    assert log.of("t") == [TextBlockStart(0), TextDelta("a"), TextDelta("b")]
    assert log.of("u") == [usage]


# -- registration handles -------------------------------------------------------------------


def test_remove_unregisters_and_is_idempotent(log: Log) -> None:
    timeline = Timeline()
    reg = timeline.on_usage(plain("u", log))
    keep = timeline.on_usage(plain("v", log))
    assert reg.active
    reg.remove()
    reg.remove()
    assert not reg.active
    assert keep.active
    timeline.dispatch(UsageEvent())
    assert [who for who, _s, _e in log.calls] == ["v"]


def test_registration_is_a_context_manager(log: Log) -> None:
    timeline = Timeline()
    handler = plain("t", log)
    with timeline.on_text_block(handler) as reg:
        assert reg.handler is handler
        timeline.dispatch(text(0, "in"))
    timeline.dispatch(text(0, "out"))
    assert log.of("t") == [TextBlockStart(0), TextDelta("in")]


def test_a_handler_removed_mid_block_gets_nothing_more(log: Log) -> None:
    timeline = Timeline()
    reg = timeline.on_text_block(Recorder("a", log))
    timeline.on_text_block(Recorder("b", log))
    feed(timeline, [text_start(0), text(0, "x")])
    reg.remove()
    feed(timeline, [text(0, "y"), BlockStop(0, BlockType.TEXT)])
    assert log.of("a") == [TextBlockStart(0), TextDelta("x")]
    assert log.of("b") == [TextBlockStart(0), TextDelta("x"), TextDelta("y"), TextBlockStop(0)]


def test_a_handler_registered_mid_block_joins_at_the_next_delta(log: Log) -> None:
    timeline = Timeline()
    timeline.on_text_block(Recorder("a", log))
    feed(timeline, [text_start(0), text(0, "x")])
    timeline.on_text_block(Recorder("late", log))
    timeline.on_tool_use_block(Recorder("other", log))  # another kind: not concerned
    assert len(log.scopes) == 1  # no scope until the next delta
    feed(timeline, [text(0, "y"), text(0, "z"), BlockStop(0, BlockType.TEXT)])
    assert log.of("late") == [TextDelta("y"), TextDelta("z"), TextBlockStop(0)]
    assert log.serials("late") == [1, 1, 1]
    assert log.of("a") == [TextBlockStart(0), *(TextDelta(s) for s in "xyz"), TextBlockStop(0)]
    assert log.of("other") == []


def test_a_handler_registered_mid_block_without_a_later_delta_sees_nothing(log: Log) -> None:
    timeline = Timeline()
    feed(timeline, [text_start(0), text(0, "x")])
    timeline.on_text_block(Recorder("late", log))
    feed(timeline, [BlockStop(0, BlockType.TEXT), text_start(1), BlockStop(1, BlockType.TEXT)])
    assert log.of("late") == [TextBlockStart(1), TextBlockStop(1)]


def test_a_handler_may_register_and_remove_handlers_while_dispatching(log: Log) -> None:
    timeline = Timeline()
    regs: list[Any] = []

    def registering(event: object) -> None:
        log.calls.append(("r", None, event))
        if isinstance(event, TextBlockStart):
            regs.append(timeline.on_text_block(plain("new", log)))
        if isinstance(event, TextBlockStop):
            regs[0].remove()

    timeline.on_text_block(registering)
    feed(timeline, [text_start(0), text(0, "a"), BlockStop(0, BlockType.TEXT)])
    feed(timeline, [text_start(1), BlockStop(1, BlockType.TEXT)])
    # "new" joined at the first delta (not at the start it was registered in), and got the
    # stop during which it was removed (the stop had been sent to the block's handlers).
    assert log.of("new") == [TextDelta("a"), TextBlockStop(0)]


# -- handlers that raise --------------------------------------------------------------------


class Boom(Exception):
    pass


def raising_on(kind: type, log: Log, name: str = "boom") -> Any:
    """A plain handler that raises once, at the first event of `kind`."""
    armed = [True]

    def handler(event: object) -> None:
        log.calls.append((name, None, event))
        if armed[0] and isinstance(event, kind):
            armed[0] = False
            raise Boom(name)

    return handler


def test_an_exception_in_a_delta_propagates_and_the_timeline_goes_on(log: Log) -> None:
    timeline = Timeline()
    timeline.on_text_block(raising_on(TextDelta, log))
    timeline.on_text_block(Recorder("after", log))
    timeline.dispatch(text_start(0))
    with pytest.raises(Boom):
        timeline.dispatch(text(0, "a"))
    assert timeline.current_block is BlockType.TEXT
    timeline.dispatch(BlockStop(0, BlockType.TEXT))
    assert timeline.current_block is None
    # The handler after the raising one missed that delta only; its scope was kept.
    assert log.of("after") == [TextBlockStart(0), TextBlockStop(0)]
    assert log.serials("after") == [0, 0]


def test_an_exception_at_the_start_leaves_the_block_open_with_all_scopes(log: Log) -> None:
    timeline = Timeline()
    timeline.on_text_block(raising_on(TextBlockStart, log))
    timeline.on_text_block(Recorder("after", log))
    with pytest.raises(Boom):
        timeline.dispatch(text_start(0))
    assert timeline.current_block is BlockType.TEXT
    feed(timeline, [text(0, "a"), BlockStop(0, BlockType.TEXT)])
    assert log.of("after") == [TextDelta("a"), TextBlockStop(0)]
    assert log.of("boom")[1:] == [TextDelta("a"), TextBlockStop(0)]


def test_an_exception_at_the_stop_still_closes_the_block(log: Log) -> None:
    timeline = Timeline()
    timeline.on_text_block(raising_on(TextBlockStop, log))
    timeline.on_text_block(Recorder("after", log))
    feed(timeline, [text_start(0), text(0, "a")])
    with pytest.raises(Boom):
        timeline.dispatch(BlockStop(0, BlockType.TEXT))
    assert timeline.current_block is None
    feed(timeline, [text(1, "b"), BlockStop(1, BlockType.TEXT)])
    assert log.serials("after") == [0, 0, 1, 1, 1]


def test_an_exception_in_new_scope_is_retried_at_the_next_delta(log: Log) -> None:
    class Flaky(Recorder):
        failures = 1

        def new_scope(self) -> Scope:
            if self.failures:
                self.failures -= 1
                raise Boom("no scope")
            return super().new_scope()

    timeline = Timeline()
    timeline.on_text_block(Recorder("first", log))
    timeline.on_text_block(Flaky("flaky", log))
    timeline.on_text_block(Recorder("last", log))
    with pytest.raises(Boom):
        timeline.dispatch(text_start(0))
    feed(timeline, [text(0, "a"), BlockStop(0, BlockType.TEXT)])
    for name in ("first", "flaky", "last"):
        assert log.of(name) == [TextDelta("a"), TextBlockStop(0)], name
    assert len({s.serial for s in log.scopes}) == 3


def test_an_exception_while_aborting_for_a_new_start_still_opens_the_new_block(log: Log) -> None:
    timeline = Timeline()
    timeline.on_text_block(raising_on(TextBlockAbort, log))
    timeline.on_tool_use_block(Recorder("c", log))
    timeline.dispatch(text_start(0))
    with pytest.raises(Boom):
        timeline.dispatch(tool_start(1, "id", "name"))
    assert timeline.current_block is BlockType.TOOL_USE
    timeline.dispatch(BlockStop(1, BlockType.TOOL_USE))
    assert log.of("c") == [ToolUseBlockStart(1, "id", "name"), ToolUseBlockStop(1, "id", "name")]


def test_an_exception_while_aborting_for_a_stray_delta_still_delivers_it(log: Log) -> None:
    timeline = Timeline()
    timeline.on_text_block(raising_on(TextBlockAbort, log))
    timeline.on_thinking_block(Recorder("k", log))
    timeline.dispatch(text_start(0))
    with pytest.raises(Boom):
        timeline.dispatch(BlockDelta(1, ThinkingDelta("t")))
    assert log.of("k") == [ThinkingBlockStart(1), ThinkingDelta("t")]


def test_an_async_handler_or_a_handler_class_is_refused_at_registration() -> None:
    from llm_worker.errors import ConfigurationError

    async def on_usage(event: object) -> None: ...

    class AsyncScoped:
        def new_scope(self) -> None: ...

        async def on_event(self, scope: None, event: object) -> None: ...

    class Scoped:
        def new_scope(self) -> None: ...

        def on_event(self, scope: None, event: object) -> None: ...

    timeline = Timeline()
    with pytest.raises(ConfigurationError, match="async"):
        timeline.on_usage(on_usage)  # pyright: ignore[reportArgumentType]
    with pytest.raises(ConfigurationError, match="async"):
        timeline.on_text_block(AsyncScoped())  # pyright: ignore[reportArgumentType]
    with pytest.raises(ConfigurationError, match="not a handler"):
        timeline.on_text_block(Scoped)  # pyright: ignore[reportArgumentType]
    with pytest.raises(ConfigurationError, match="not a handler"):
        timeline.on_status(42)  # pyright: ignore[reportArgumentType]
    timeline.on_text_block(Scoped())  # pyright: ignore[reportArgumentType]
