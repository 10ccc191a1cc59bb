"""Tools: what the model may call, and how one call becomes one result.

A tool is anything with a `name`, a `description`, an `input_schema` (JSON Schema of an object)
and an async `execute(input_json)` — the [`Tool`][] protocol. Most tools are written with the
[`tool`][] decorator, which turns a plain function or method into a [`FunctionTool`][]:

```python
@tool(effect="read_only")
async def get_weather(
    city: Annotated[str, Field(description="The city's name, e.g. Kyoto.")],
    unit: Literal["C", "F"] = "C",
) -> dict[str, float]:
    "Current weather of a city."
```

Each tool declares in its [`ToolMeta`][] what running it does (`effect`: read-only, idempotent
or side-effecting) and whether it must run alone (`exclusive`); the Worker derives from that one
declaration whether a call may start while the answer still streams, run beside other calls, or
run again on a retry or a resume.

[`execute_call`][] is the one place where a call's failures — an unknown tool, arguments that
are not JSON or do not validate, a `ToolError`, any other exception, a timeout — become an
`is_error` [`ToolResult`][] with a message the model can act on. Cancellation is never turned
into a result: it propagates.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import re
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Literal,
    ParamSpec,
    Protocol,
    Self,
    TypeAlias,
    TypeVar,
    cast,
    get_args,
    overload,
    runtime_checkable,
)

import anyio
import anyio.to_thread

from llm_worker.errors import ConfigurationError
from llm_worker.messages import ToolSpec
from llm_worker.tools._context import ToolContext, current_tool_context
from llm_worker.tools._enabled import EnabledCheck
from llm_worker.tools._text import Mixed, as_output, json_text

if TYPE_CHECKING:
    from llm_worker.blobs import ToolOutput

__all__ = (
    "Effect",
    "FunctionTool",
    "Tool",
    "ToolMeta",
    "tool",
    "tool_meta",
)

P = ParamSpec("P")
R = TypeVar("R")

Effect: TypeAlias = Literal["read_only", "idempotent", "side_effect"]
"""What running a tool does: nothing (`read_only`), the same on every run (`idempotent`), or
something that must not happen twice (`side_effect`, the default)."""

_EFFECTS: frozenset[str] = frozenset(get_args(Effect))
# The names every provider accepts: OpenAI and Anthropic allow [A-Za-z0-9_-]{1,64}; Gemini
# also wants a letter or an underscore first.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")


@dataclass(frozen=True, slots=True)
class ToolMeta:
    """Everything the Worker knows about a tool besides how to run it.

    Attributes:
        name: The name the model calls it by: a letter or `_` first, then letters, digits,
            `_` or `-`, at most 64 characters (what every provider accepts).
        description: What it does, for the model.
        input_schema: JSON Schema of its arguments (an object schema).
        effect: `"read_only"` (no effect), `"idempotent"` (safe to repeat) or `"side_effect"`.
        exclusive: The call must run alone, never beside other calls of its batch.
        timeout: Seconds a call may run; past it the call gets an error result.
        strict: Ask the provider to enforce the schema exactly where supported (OpenAI).
        requires_approval: A call pauses the run until a person decides it (see `tool`).
        enabled: Whether the model is offered the tool for the next answer, asked before each
            request (see `tool`); `None`: always.

    Raises:
        ConfigurationError: A name providers reject, an unknown effect, a timeout that is
            not a positive number of seconds.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    effect: Effect = "side_effect"
    exclusive: bool = False
    timeout: float | None = None
    strict: bool = False
    requires_approval: bool = False
    enabled: EnabledCheck | None = None

    def __post_init__(self) -> None:
        name = cast("object", self.name)  # hand-written tools may hand over anything
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ConfigurationError(
                f"tool name {self.name!r:.80} is not accepted by every provider: use letters, "
                "digits, '_' and '-', a letter or '_' first, at most 64 characters"
            )
        if self.effect not in _EFFECTS:
            raise ConfigurationError(
                f"tool {self.name!r}: effect {self.effect!r} is not one of {sorted(_EFFECTS)}"
            )
        if self.timeout is not None and not _positive_seconds(self.timeout):
            raise ConfigurationError(
                f"tool {self.name!r}: timeout {self.timeout!r} is not a positive number of seconds"
            )
        schema = cast("object", self.input_schema)
        if not isinstance(schema, dict):
            raise ConfigurationError(f"tool {self.name!r}: input_schema is not a JSON object")
        if self.enabled is not None and not callable(self.enabled):
            raise ConfigurationError(
                f"tool {self.name!r}: enabled= takes a callable (ctx) -> bool, "
                f"not {type(self.enabled).__name__}"
            )

    @property
    def may_start_early(self) -> bool:
        """May start as soon as its call is complete, while the answer still streams.

        True for a read-only or idempotent tool that is not exclusive: should the answer be
        requested again, running it once more does no harm.
        """
        return self.effect != "side_effect" and not self.exclusive

    @property
    def may_run_parallel(self) -> bool:
        """May run beside the other calls of its batch (it is not exclusive)."""
        return not self.exclusive

    @property
    def may_rerun(self) -> bool:
        """May run again on a retry or a resume (it has no side effect)."""
        return self.effect != "side_effect"

    def spec(self) -> ToolSpec:
        """The tool as offered to the model."""
        return ToolSpec(self.name, self.description, self.input_schema, strict=self.strict)


def _positive_seconds(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


class MetaTool:
    """A base for tools that keep their `ToolMeta` in `meta`.

    It gives them `Tool`'s `name`, `description` and `input_schema`, read from `meta`.
    """

    __slots__ = ()
    meta: ToolMeta

    @property
    def name(self) -> str:
        """The name the model calls the tool by."""
        return self.meta.name

    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        return self.meta.description

    @property
    def input_schema(self) -> dict[str, Any]:
        """JSON Schema of the arguments."""
        return self.meta.input_schema


@runtime_checkable
class Tool(Protocol):
    """What the Worker can run: write a class with these members for a hand-written tool.

    Besides these, `tool_meta` reads optional attributes: `effect`, `exclusive`, `timeout`,
    `strict`, `requires_approval` and `enabled` (as in [`ToolMeta`][]), or a whole `meta: ToolMeta`,
    which wins.
    """

    @property
    def name(self) -> str:
        """The name the model calls the tool by."""
        ...

    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        ...

    @property
    def input_schema(self) -> dict[str, Any]:
        """JSON Schema of the arguments (an object schema)."""
        ...

    async def execute(self, input_json: str) -> str | ToolOutput | Mixed:
        """Run one call.

        Args:
            input_json: The arguments as JSON text (an object).

        Returns:
            What the model reads, or a `ToolOutput` (large outputs, see `llm_worker.blobs`),
            or a list of strings and `ImagePart` / `DocumentPart` (a screenshot with a caption)
            that the model sees as text and images.

        Raises:
            ToolError: A failure the model should read; any other exception also becomes an
                error result, by default as `<Type>: <message>` (see `Worker`'s
                `format_tool_error`).
        """
        ...


# Hand-written tools: read once, when first needed (registration). Objects that cannot be
# weakly referenced or hashed are read each time.
_metas: weakref.WeakKeyDictionary[Any, ToolMeta] = weakref.WeakKeyDictionary()


def tool_meta(tool: Tool) -> ToolMeta:
    """The metadata of any tool.

    A [`FunctionTool`][] (or any object with a `meta: ToolMeta`) returns its own. For other
    tools it is built from `name`, `description`, `input_schema` and the optional `effect`,
    `exclusive`, `timeout` and `strict` attributes, once per tool object.

    Raises:
        ConfigurationError: The object is not a tool, or its metadata is invalid.
    """
    meta = getattr(tool, "meta", None)
    if isinstance(meta, ToolMeta):
        return meta
    try:
        return _metas[tool]
    except (KeyError, TypeError):
        pass
    meta = _read_meta(tool)
    with contextlib.suppress(TypeError):  # unhashable or not weakly referenceable: read again
        _metas[tool] = meta
    return meta


def _read_meta(tool: Tool) -> ToolMeta:
    if getattr(tool, "meta", None) is not None:
        raise ConfigurationError(f"{tool!r}: its `meta` attribute is not a ToolMeta")
    try:
        name, description, schema = tool.name, tool.description, tool.input_schema
    except AttributeError as exc:
        raise ConfigurationError(
            f"{tool!r} is not a tool: decorate a function with @tool, or give the object "
            f"`name`, `description`, `input_schema` and an async `execute` ({exc})"
        ) from exc
    return ToolMeta(
        name,
        description,
        schema,
        effect=getattr(tool, "effect", "side_effect"),
        exclusive=bool(getattr(tool, "exclusive", False)),
        timeout=getattr(tool, "timeout", None),
        strict=bool(getattr(tool, "strict", False)),
        requires_approval=bool(getattr(tool, "requires_approval", False)),
        enabled=getattr(tool, "enabled", None),
    )


_UNBOUND: Any = object()


class FunctionTool(MetaTool, Generic[P, R]):
    """A tool made from a Python function or method; what [`tool`][] returns.

    The name is the function's, the description its docstring (summary and body; the
    Args/Returns sections are left out), and the input schema comes from its signature through
    pydantic, computed once here. Parameter descriptions come from `Annotated[...,
    Field(description=...)]` or, failing that, from the docstring's argument section (Google,
    NumPy or Sphinx style). Arguments the signature does not name are refused.

    The original function stays callable: calling the tool calls it. On a method, accessing
    the tool through an instance (`app.get_user`) gives a tool bound to that instance, so the
    call sees the instance's state; through the class it is the unbound tool, which cannot be
    registered.

    A sync function runs in a worker thread (`anyio.to_thread.run_sync`, whose default
    limiter runs 40 at once), so it never blocks the event loop; an async one runs on the loop.
    A thread cannot be killed: when a sync tool's call is cancelled or times out, the call
    returns at once and its thread is abandoned to finish on its own.

    What the function returns becomes the result's text: a `str` as it is, a `ToolOutput`
    passed through, `None` as `"null"` (the JSON for it, so the model sees the tool did return),
    anything else as JSON (pydantic's `to_jsonable_python`, then orjson; values without a JSON
    form as their `str()`). An `ImagePart` or `DocumentPart` — alone, in a list with strings,
    or inside a list, dict or dataclass (the JSON text then holds `"[image 1: image/png]"` in
    its place) — becomes the result's `media`, which the model sees as an image or a document.

    With `strict=True` the schema takes the form OpenAI's strict mode requires: every object
    closed and all its properties required, an optional parameter or field made nullable,
    `null` then meaning "use the default". Types strict mode cannot express (free-form
    dictionaries, `Any`) are refused at decoration.

    Attributes:
        meta: The tool's metadata.
    """

    meta: ToolMeta
    __wrapped__: Callable[..., Any]
    __name__: str
    __qualname__: str

    def __init__(
        self,
        fn: Callable[P, R],
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        effect: Effect = "side_effect",
        exclusive: bool = False,
        timeout: float | None = None,
        strict: bool = False,
        requires_approval: bool = False,
        enabled: EnabledCheck | None = None,
        localns: Mapping[str, Any] | None = None,
    ) -> None:
        """Make a tool of `fn`; the arguments are those of [`tool`][].

        Args:
            fn: A function, method, `staticmethod` or `classmethod`.
            name: The tool's name; default: the function's name.
            description: What it does; default: from the docstring.
            effect: See [`ToolMeta`][].
            exclusive: See [`ToolMeta`][].
            timeout: See [`ToolMeta`][].
            strict: See [`ToolMeta`][].
            requires_approval: See [`ToolMeta`][].
            enabled: See [`ToolMeta`][].
            localns: Names to resolve string annotations with, beyond the function's module
                (the decorator passes the scope it was applied in).

        Raises:
            ConfigurationError: The signature cannot be made a schema (`*args`, an unresolved
                or unsupported annotation) or the metadata is invalid.
        """
        from llm_worker.tools._schema import describe_function

        target, takes_self = _unwrapped(fn)
        self._binds_class = takes_self is True  # a classmethod binds its class
        functools.update_wrapper(self, target)
        tool_name = name or getattr(target, "__name__", "")
        shape = describe_function(
            target,
            name=tool_name,
            description=description,
            takes_self=takes_self,
            localns=localns,
            strict=strict,
        )
        flags = (effect, exclusive, timeout, strict, requires_approval, enabled)
        self.meta = ToolMeta(tool_name, shape.description, shape.input_schema, *flags)
        self._fn = target
        self._arguments = shape.arguments
        self._takes_self = shape.takes_self
        self._context = shape.context
        self._is_async = inspect.iscoroutinefunction(target)
        self._bound: object = _UNBOUND
        self._origin: FunctionTool[Any, Any] = self

    @property
    def instance(self) -> object | None:
        """The instance a method's tool is bound to (the class, for a classmethod).

        `None` for a plain function, and for a method reached through its class. A hook reads
        the tool's state through it (`ctx.tool.instance`, or `ctx.instance`).
        """
        return None if self._bound is _UNBOUND else self._bound

    @property
    def needs_instance(self) -> bool:
        """True for a method reached through its class: it has no instance to run with."""
        return self._takes_self and self._bound is _UNBOUND

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the original function (with the bound instance first, on a bound tool)."""
        if self._bound is _UNBOUND:
            return self._fn(*args, **kwargs)
        return self._fn(self._bound, *args, **kwargs)

    @overload
    def __get__(self, instance: None, owner: type[Any] | None = None) -> Self: ...
    @overload
    def __get__(self, instance: object, owner: type[Any] | None = None) -> FunctionTool[..., R]: ...
    def __get__(self, instance: object, owner: type[Any] | None = None) -> FunctionTool[..., R]:
        """Bind a method's tool to the instance (or, for a classmethod, to the class)."""
        if not self._takes_self or self._bound is not _UNBOUND:
            return self
        if self._binds_class:
            return self._bind(owner if owner is not None else type(instance))
        return self if instance is None else self._bind(instance)

    def _bind(self, target: object) -> FunctionTool[..., R]:
        # A fresh object per access, like a bound method: caching it on the instance would go
        # stale when the instance is copied, and would break pickling it.
        bound = object.__new__(type(self))
        bound.__dict__.update(self.__dict__)
        bound._bound = target
        return bound

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FunctionTool):
            return NotImplemented
        return self._origin is other._origin and self._bound is other._bound

    def __hash__(self) -> int:
        return hash((id(self._origin), id(self._bound)))

    def __repr__(self) -> str:
        where = "" if self._bound is _UNBOUND else f" bound to {self._bound!r}"
        return f"<FunctionTool {self.name!r}{where}>"

    def validate_input(self, input: Mapping[str, Any]) -> None:
        """Check arguments without running the function; raise `ToolError` listing problems."""
        self._arguments.parse(json_text(dict(input)))

    async def execute(self, input_json: str) -> str | ToolOutput | Mixed:
        """Validate the arguments from `input_json` (`""` means none) and run the function.

        Raises:
            ToolError: The arguments are not a JSON object or do not validate (the message
                lists each problem), or the function raised it.
            ConfigurationError: The method's tool was reached through its class.
        """
        if self.needs_instance:
            raise ConfigurationError(
                f"tool {self.name!r} is a method: use it through an instance "
                f"(obj.{self._fn.__name__}), not through its class"
            )
        args, kwargs = self._arguments.parse(input_json)
        if self._context is not None:
            kwargs[self._context] = _context_for(self.name)
        if self._bound is not _UNBOUND:
            args.insert(0, self._bound)
        if self._is_async:
            value = await self._fn(*args, **kwargs)
        else:
            call = functools.partial(self._fn, *args, **kwargs)
            value = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
            if inspect.isawaitable(value):  # a sync callable that hands back a coroutine
                value = await value
        return as_output(value)


def _unwrapped(fn: object) -> tuple[Callable[..., Any], bool | None]:
    """The function under a `staticmethod` / `classmethod`, and whether it takes `cls`.

    `None` for a plain function: whether it takes `self` is guessed from its signature.
    """
    if isinstance(fn, staticmethod | classmethod):
        # cast: the wrapped function's parameters are described from its signature.
        target = cast("Callable[..., Any]", fn.__func__)  # pyright: ignore[reportUnknownMemberType]
        return target, isinstance(fn, classmethod)
    return cast("Callable[..., Any]", fn), None


def _context_for(name: str) -> ToolContext:
    # Outside a Worker (a test calling `execute` directly) the tool still gets a context.
    current = current_tool_context()
    return current if current is not None else ToolContext(call_id="", tool_name=name)


@overload
def tool(fn: Callable[P, R], /) -> FunctionTool[P, R]: ...
@overload
def tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    effect: Effect = "side_effect",
    exclusive: bool = False,
    timeout: float | None = None,
    strict: bool = False,
    requires_approval: bool = False,
    enabled: EnabledCheck | None = None,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...
def tool(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    effect: Effect = "side_effect",
    exclusive: bool = False,
    timeout: float | None = None,
    strict: bool = False,
    requires_approval: bool = False,
    enabled: EnabledCheck | None = None,
) -> FunctionTool[P, R] | Callable[[Callable[P, R]], FunctionTool[P, R]]:
    """Make a tool of a function or method, sync or async: `@tool` or `@tool(...)`.

    Args:
        fn: The function (when used as `@tool`).
        name: The tool's name; default: the function's name.
        description: What it does; default: the docstring without its Args/Returns sections.
        effect: `"read_only"`, `"idempotent"` or `"side_effect"` (the default); see
            [`ToolMeta`][].
        exclusive: The tool must run alone, never beside other calls.
        timeout: Seconds a call may run before it gets an error result.
        strict: Ask the provider to enforce the schema exactly (OpenAI).
        requires_approval: Pause the run before each call, until a person decides it: the
            before_tool_call hooks run first (a `Skip`, `Abort` or `Pause` of theirs wins), then
            the run ends PAUSED with the call pending; `Worker.resume(state, decisions=...)`
            runs it on `Decision.approve()` and tells the model `Decision.deny(reason)`. Resumed
            without a decision, the call pauses again. A hook may approve the call itself by
            setting `ctx.approved = True` (an allow-list, say).
        enabled: `(ctx: EnabledContext) -> bool` (or async): whether the model is offered
            the tool for the next answer, asked right before each request with the history so
            far (`ctx.called("get_schema")`). The offered tools keep their registration order,
            and change only at those points (a provider's prompt cache keeps its prefix). A
            call of a tool that was not offered gets an error result naming it.

    Returns:
        A [`FunctionTool`][], still callable as the function was.

    Raises:
        ConfigurationError: The signature cannot become a schema or the metadata is invalid.
    """
    localns = _decorating_scope()

    def decorate(f: Callable[P, R]) -> FunctionTool[P, R]:
        return FunctionTool(
            f,
            name=name,
            description=description,
            effect=effect,
            exclusive=exclusive,
            timeout=timeout,
            strict=strict,
            requires_approval=requires_approval,
            enabled=enabled,
            localns=localns,
        )

    return decorate if fn is None else decorate(fn)


def _decorating_scope() -> dict[str, Any] | None:
    # The local names where `@tool` was applied (a class body, a function): string annotations
    # may name types defined there, which the function's globals do not hold.
    frame = inspect.currentframe()
    try:
        scope = frame.f_back.f_back if frame is not None and frame.f_back is not None else None
        if scope is None or scope.f_locals is scope.f_globals:
            return None
        return dict(scope.f_locals)
    finally:
        del frame
