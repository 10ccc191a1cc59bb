"""Running tools: FunctionTool.execute, methods and state, threads, result text, and every
failure execute_call turns into an error result (or, for cancellation, does not)."""

import dataclasses
import datetime
import threading
from collections.abc import Callable
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel, Field

from llm_worker import ToolError
from llm_worker.blobs import Content, ToolOutput
from llm_worker.collectors import ToolCall
from llm_worker.tools import FunctionTool, ToolResult, execute_call, tool

pytestmark = pytest.mark.anyio


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall("call_1", name, arguments)


async def run(t: Any, **arguments: Any) -> ToolResult:
    with anyio.fail_after(5):
        return await execute_call(t, call(t.name, **arguments))


class User(BaseModel):
    name: str
    age: int


# -- the function stays a function --------------------------------------------------------


async def test_decorated_functions_stay_callable() -> None:
    @tool
    def add(a: int, b: int = 1) -> int:
        """Add."""
        return a + b

    @tool
    async def aadd(a: int, b: int = 1) -> int:
        """Add, async."""
        return a + b

    assert add(2, b=3) == 5
    assert await aadd(2) == 3


async def test_arguments_are_validated_and_defaults_left_to_the_function() -> None:
    seen: list[Any] = []

    @tool
    def f(n: int, user: User, when: datetime.date, tags: list[str] | None = None) -> str:
        """F."""
        seen.append((n, user, when, tags))
        return "done"

    result = await run(f, n="7", user={"name": "Ann", "age": 30}, when="2024-05-01")
    assert result == ToolResult("call_1", "f", "done")
    assert seen == [(7, User(name="Ann", age=30), datetime.date(2024, 5, 1), None)]


async def test_a_default_without_a_json_form_stays_the_functions_own() -> None:
    marker = object()

    @tool
    def f(a: int, b: Any = marker) -> bool:
        """F."""
        return b is marker

    assert f.input_schema["properties"]["b"] == {}
    assert f.input_schema["required"] == ["a"]
    assert await f.execute('{"a": 1}') == "true"
    assert await f.execute('{"a": 1, "b": 2}') == "false"


async def test_empty_input_means_no_arguments() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    assert await ping.execute("") == "pong"
    assert await ping.execute("  \n") == "pong"
    assert await ping.execute("{}") == "pong"


async def test_positional_only_parameters() -> None:
    @tool
    def f(a: int, /, b: int = 2) -> int:
        """F."""
        return a * 10 + b

    assert await f.execute('{"a": 1}') == "12"


# -- methods keep their instance ----------------------------------------------------------


class Counter:
    def __init__(self, start: int) -> None:
        self.count = start

    @tool
    def bump(self, by: int = 1) -> int:
        """Add to the counter."""
        self.count += by
        return self.count

    @tool
    async def abump(self, by: int = 1) -> int:
        """Add to the counter, async."""
        self.count += by
        return self.count

    @tool
    @classmethod
    def kind(cls, suffix: str) -> str:
        """The class name."""
        return cls.__name__ + suffix


async def test_methods_keep_their_instance_state() -> None:
    first, second = Counter(0), Counter(100)
    assert (await run(first.bump, by=2)).content == "2"
    assert (await run(first.abump)).content == "3"
    assert (await run(second.bump)).content == "101"
    assert (first.count, second.count) == (3, 101)
    assert first.bump(by=10) == 13  # still callable as the method
    assert first.bump.name == "bump"
    assert first.bump.input_schema is Counter.bump.input_schema


async def test_classmethod_tool_binds_the_class() -> None:
    assert (await run(Counter.kind, suffix="!")).content == "Counter!"
    assert (await run(Counter(0).kind, suffix="?")).content == "Counter?"


def test_bound_tools_compare_like_bound_methods() -> None:
    a, b = Counter(0), Counter(0)
    assert a.bump == a.bump
    assert hash(a.bump) == hash(a.bump)
    assert a.bump != b.bump
    assert a.bump != a.abump
    assert Counter.bump is Counter.bump
    assert isinstance(Counter.bump, FunctionTool)
    assert "bound to" in repr(a.bump)


async def test_a_method_reached_through_its_class_is_not_run() -> None:
    result = await run(Counter.bump)
    assert result.is_error
    assert "is a method: use it through an instance" in result.content
    assert Counter.bump.needs_instance
    assert not Counter(0).bump.needs_instance


# -- where the code runs ------------------------------------------------------------------


async def test_sync_tools_run_off_the_event_loop_thread_async_ones_on_it() -> None:
    threads: dict[str, int] = {}

    @tool
    def blocking() -> str:
        """Sync."""
        threads["sync"] = threading.get_ident()
        return "ok"

    @tool
    async def nonblocking() -> str:
        """Async."""
        threads["async"] = threading.get_ident()
        return "ok"

    await run(blocking)
    await run(nonblocking)
    assert threads["sync"] != threading.get_ident()
    assert threads["async"] == threading.get_ident()


async def test_a_sync_callable_returning_a_coroutine_is_awaited() -> None:
    async def later() -> str:
        return "awaited"

    @tool
    def f() -> Any:
        """F."""
        return later()

    assert (await run(f)).content == "awaited"


# -- result text --------------------------------------------------------------------------


@dataclasses.dataclass
class Pair:
    left: int
    right: datetime.datetime


class Opaque:
    def __str__(self) -> str:
        return "<opaque thing>"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain text", "plain text"),
        ("", ""),
        (None, "null"),
        (42, "42"),
        ({"a": [1, 2.5, True, None], "ü": "é"}, '{"a":[1,2.5,true,null],"ü":"é"}'),
        ({1: "one"}, '{"1":"one"}'),
        (User(name="Ann", age=3), '{"name":"Ann","age":3}'),
        (
            Pair(1, datetime.datetime(2024, 1, 2, 3, 4, 5)),
            '{"left":1,"right":"2024-01-02T03:04:05"}',
        ),
        ([User(name="B", age=1)], '[{"name":"B","age":1}]'),
        ({"x": Opaque()}, '{"x":"<opaque thing>"}'),
        (2**70, str(2**70)),
        (frozenset({3}), "[3]"),
    ],
)
async def test_return_values_become_text(value: Any, text: str) -> None:
    @tool
    def f() -> Any:
        """F."""
        return value

    result = await run(f)
    assert (result.content, result.is_error, result.output) == (text, False, None)


async def test_a_tool_output_is_passed_through() -> None:
    stored = ToolOutput.Stored(summary="[blob:x] text | 9000 lines", content=Content.Text("big"))

    @tool
    def small() -> ToolOutput:
        """Small."""
        return ToolOutput.Inline("short answer")

    @tool
    async def large() -> ToolOutput:
        """Large."""
        return stored

    inline = await run(small)
    assert inline == ToolResult(
        "call_1", "small", "short answer", output=ToolOutput.Inline("short answer")
    )
    result = await run(large)
    assert (result.content, result.output, result.is_error) == (stored.summary, stored, False)


async def test_a_hand_written_tool_may_return_any_value() -> None:
    class Loose:
        name = "loose"
        description = "Returns a dict."
        input_schema: dict[str, Any] = {"type": "object"}  # noqa: RUF012

        async def execute(self, input_json: str) -> Any:
            return {"echo": input_json}

    result = await execute_call(Loose(), ToolCall("c", "loose", {"k": [1]}))
    assert result == ToolResult("c", "loose", '{"echo":"{\\"k\\":[1]}"}')


# -- argument failures --------------------------------------------------------------------


@tool
def register(
    user: User,
    count: Annotated[int, Field(ge=1)],
    mode: str = "fast",
) -> str:
    """Register a user."""
    return "registered"


async def test_wrong_types_are_listed_with_what_was_expected() -> None:
    result = await run(register, user={"name": "Ann", "age": "old"}, count="many")
    assert result.is_error
    assert result.content == (
        "Invalid arguments for tool 'register' (2 problems); call it again with corrected "
        "arguments:\n"
        "- user.age: Input should be a valid integer, unable to parse string as an integer "
        "(got 'old')\n"
        "- count: Input should be a valid integer, unable to parse string as an integer "
        "(got 'many')"
    )


async def test_missing_and_extra_fields() -> None:
    result = await run(register, user={"name": "Ann"}, count=0, colour="red")
    assert result.is_error
    assert result.content.splitlines()[1:] == [
        "- user.age: required, but missing",
        "- count: Input should be greater than or equal to 1 (got 0)",
        "- colour: not a parameter of this tool (its parameters: user, count, mode)",
    ]


class StrictUser(BaseModel, extra="forbid"):
    name: str


async def test_nested_models_keep_their_own_extra_policy() -> None:
    @tool
    def f(strict: StrictUser, lax: User) -> str:
        """F."""
        return f"{strict.name} {lax.name}"

    bad = await run(f, strict={"name": "A", "x": 1}, lax={"name": "B", "age": 1})
    assert bad.content.splitlines()[1:] == ["- strict.x: not an accepted field here"]
    # A model that ignores unknown fields (pydantic's default) still does.
    good = await run(f, strict={"name": "A"}, lax={"name": "B", "age": 1, "x": 1})
    assert good == ToolResult("call_1", "f", "A B")


async def test_validation_messages_are_bounded() -> None:
    @tool
    def many(values: list[int]) -> None:
        """Many."""

    result = await run(many, values=["x" * 500] * 25)
    lines = result.content.splitlines()
    assert lines[0].startswith("Invalid arguments for tool 'many' (25 problems)")
    assert len(lines) == 1 + 10 + 1
    assert lines[-1] == "- and 15 more"
    assert all(len(line) < 300 for line in lines)
    assert "… (502 characters in all)" in lines[1]


async def test_invalid_json_given_to_execute_directly() -> None:
    with pytest.raises(ToolError, match="not valid JSON") as info:
        await register.execute('{"user": ')
    assert str(info.value) == (
        "The arguments for tool 'register' are not valid JSON (EOF while parsing a value at "
        "line 1 column 9). Received: '{\"user\": '. Call the tool again with its arguments "
        "as one JSON object."
    )
    with pytest.raises(ToolError, match="must be a JSON object \\(got \\[1, 2\\]\\)"):
        await register.execute("[1, 2]")


async def test_a_call_whose_arguments_did_not_parse_does_not_run() -> None:
    ran: list[bool] = []

    @tool
    def f(a: int) -> None:
        """F."""
        ran.append(True)

    from_collector = ToolCall(
        "c",
        "f",
        {},
        raw_input='{"a": 1',
        error="the arguments of tool 'f' are not valid JSON (EOF): '{\"a\": 1'",
    )
    result = await execute_call(f, from_collector)
    assert result.is_error
    assert result.content == (
        "The tool 'f' was not run: the arguments of tool 'f' are not valid JSON (EOF): "
        "'{\"a\": 1'. Call it again with its arguments as one JSON object."
    )
    bare = ToolCall("c", "f", {}, raw_input="<" * 1000, error="not JSON")
    message = (await execute_call(f, bare)).content
    assert "Received: '" + "<" * 200 + "… (1000 characters in all)'" in message
    assert ran == []


async def test_arguments_come_from_call_input_so_hooks_can_rewrite_them() -> None:
    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    rewritten = ToolCall("c", "echo", {"text": "original"}, raw_input='{"text": "original"}')
    rewritten.input["text"] = "rewritten by a hook"
    assert (await execute_call(echo, rewritten)).content == "rewritten by a hook"


# -- failures of the tool -----------------------------------------------------------------


async def test_tool_error_message_is_passed_as_is() -> None:
    @tool
    def fail(reason: str) -> None:
        """Fail."""
        raise ToolError(reason)

    result = await run(fail, reason="No user with id 7; list users first.")
    assert (result.content, result.is_error) == ("No user with id 7; list users first.", True)
    assert (await run(fail, reason="")).content == "The tool 'fail' failed without saying why."


@pytest.mark.parametrize("is_async", [False, True])
async def test_other_exceptions_become_type_and_message(is_async: bool) -> None:
    def boom() -> None:
        raise KeyError("missing key")

    async def aboom() -> None:
        raise KeyError("missing key")

    fn: Callable[[], Any] = aboom if is_async else boom
    result = await run(tool(name="boom")(fn))
    assert (result.content, result.is_error) == ("KeyError: 'missing key'", True)


async def test_exception_messages_are_bounded() -> None:
    @tool
    def huge() -> None:
        """Huge."""
        raise RuntimeError("x" * 100_000)

    @tool
    def silent() -> None:
        """Silent."""
        raise RuntimeError

    content = (await run(huge)).content
    assert content.startswith("RuntimeError: xxx")
    assert content.endswith("… (100000 characters in all)")
    assert len(content) < 1100
    assert (await run(silent)).content == "RuntimeError"


async def test_unknown_tool_lists_the_available_ones() -> None:
    result = await execute_call(None, call("get_wether"), available=["get_weather", "search"])
    assert result == ToolResult(
        "call_1",
        "get_wether",
        "There is no tool named 'get_wether'. Available tools: get_weather, search. "
        "Call one of these by its exact name.",
        is_error=True,
    )
    none = await execute_call(None, call("x"))
    assert none.content == "There is no tool named 'x': no tools are available."
    many = await execute_call(None, call("x"), available=[f"t{i}" for i in range(60)])
    assert many.content.count(", ") == 49
    assert "t49 and 10 more" in many.content


# -- timeouts and cancellation ------------------------------------------------------------


async def test_an_async_tool_past_its_timeout_gets_an_error_result() -> None:
    stopped = anyio.Event()

    @tool(timeout=0.05)
    async def stuck() -> str:
        """Never answers."""
        try:
            await anyio.Event().wait()
        finally:
            stopped.set()
        return "unreachable"

    result = await run(stuck)
    assert result == ToolResult(
        "call_1", "stuck", "The tool 'stuck' timed out after 0.05 s without a result.", True
    )
    assert stopped.is_set()  # the coroutine was cancelled, not left running


async def test_a_sync_tool_past_its_timeout_is_abandoned() -> None:
    release = threading.Event()
    finished = threading.Event()

    @tool(timeout=0.05)
    def stuck() -> str:
        """Blocks its thread."""
        release.wait(10)
        finished.set()
        return "late"

    try:
        result = await run(stuck)
        assert result.is_error
        assert result.content == "The tool 'stuck' timed out after 0.05 s without a result."
        assert not finished.is_set()  # the call returned while the thread still ran
    finally:
        release.set()


async def test_a_tool_within_its_timeout_returns_normally() -> None:
    @tool(timeout=30)
    async def quick() -> str:
        """Quick."""
        return "in time"

    assert (await run(quick)).content == "in time"


@pytest.mark.parametrize("limit", [None, 30.0])
async def test_cancellation_propagates_and_is_never_a_result(limit: float | None) -> None:
    started = anyio.Event()
    cancelled: list[bool] = []
    results: list[ToolResult] = []

    @tool(timeout=limit)
    async def wait_forever() -> str:
        """Waits."""
        started.set()
        try:
            await anyio.Event().wait()
        except anyio.get_cancelled_exc_class():
            cancelled.append(True)
            raise
        return "unreachable"

    async def runner() -> None:
        results.append(await execute_call(wait_forever, call("wait_forever")))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(runner)
            await started.wait()
            group.cancel_scope.cancel()
    assert cancelled == [True]
    assert results == []


async def test_cancelling_a_sync_tool_returns_at_once() -> None:
    release = threading.Event()
    entered = threading.Event()
    results: list[ToolResult] = []

    @tool
    def blocked() -> str:
        """Blocks."""
        entered.set()
        release.wait(10)
        return "late"

    async def runner() -> None:
        results.append(await execute_call(blocked, call("blocked")))

    try:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as group:
                group.start_soon(runner)
                await anyio.to_thread.run_sync(entered.wait, 5)
                group.cancel_scope.cancel()
        assert results == []
        assert not release.is_set()
    finally:
        release.set()


async def test_a_huge_error_message_is_cut_for_the_model_and_kept_whole_on_the_result() -> None:
    @tool
    async def dump() -> str:
        """Fail with a huge message (a server's stack dump, say)."""
        raise ToolError("e" * 1_000_000)

    result = await run(dump)
    assert result.is_error and len(str(result.content)) < 20_000
    assert "characters of the error cut" in str(result.content)
    assert isinstance(result.exception, ToolError) and len(str(result.exception)) == 1_000_000
