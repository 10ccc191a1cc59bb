"""`ToolContext`: what a running tool call may know about itself and its run.

A tool asks for it by declaring a parameter annotated `ToolContext`; the model never sees that
parameter (it is left out of the input schema), and the Worker passes the context of the call
being run. Plain functions stay plain: a tool without such a parameter gets nothing.

```python
@tool
async def book_payment(amount: int, ctx: ToolContext) -> str:
    "Book a payment."
    receipt = await bank.book(amount, idempotency_key=ctx.call_id)
    return f"booked: {receipt}"
```

The context is a keyword-built object that grows by new attributes with defaults, never by a
new parameter of the tool's signature (the lesson of openai-agents-python#2180, where a
context type that changed shape broke every tool written against it). Hand-written `Tool`
classes read the same object with [`current_tool_context`][].
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread

from llm_worker.events import UsageEvent

if TYPE_CHECKING:
    from llm_worker.blobs import BlobStore

__all__ = ("ToolContext", "current_tool_context", "is_tool_context", "running_with")

Reporter = Callable[[float, "float | None", "str | None"], None]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """The context of one tool call, for a tool that declares a `ToolContext` parameter.

    Built by keyword only, so new attributes can join without breaking a tool or a test that
    makes one (`ToolContext(call_id="c1", tool_name="book")` works outside a Worker).

    Attributes:
        call_id: The model's id of this call. It is the same in every process that runs the
            call (a resumed pause state keeps it), so a side-effecting tool can use it as its
            idempotency key: resuming one saved state twice must not book a payment twice.
        tool_name: The name the model called the tool by.
        usage: The run's token usage when the call started (every request of the run so far,
            a paused run's included).
        blob_store: The Worker's blob store, or `None` when it has none.
        path: Where the call sits in a run tree: the ids of the sub-agent calls its run is
            nested in, the outermost first (empty for a top-level Worker's call), as
            `event.path` names them.
        requests: Requests the run has made so far.
    """

    _: KW_ONLY
    call_id: str
    tool_name: str
    usage: UsageEvent = field(default_factory=UsageEvent)
    blob_store: BlobStore | None = None
    path: tuple[str, ...] = ()
    requests: int = 0
    _reporter: Reporter | None = field(default=None, repr=False, compare=False)

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report how far the call is: a `ToolProgress` event of `Worker.stream()`.

        Works from any task or thread the tool hands the context to; does nothing when the
        run has no stream reader (or outside a Worker).

        Args:
            progress: How much is done (grows with each report).
            total: How much there is to do, when known.
            message: What is happening, for a person.
        """
        if self._reporter is not None:
            self._reporter(progress, total, message)

    @property
    def cancelled(self) -> bool:
        """Whether the call was cancelled (the run cancelled, the call past its timeout).

        An async tool is cancelled at its next `await` anyway; a sync tool runs in a thread
        that cannot be stopped, so a long loop should look at this and return early. Read it
        in the call's own thread or task.
        """
        try:
            anyio.from_thread.check_cancelled()
        except Exception:  # not a worker thread (anyio's NoEventLoopError): the call's task
            return _task_cancelled()
        except BaseException as exc:  # the backend's cancellation, which only a thread sees
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            return True
        return False

    def raise_if_cancelled(self) -> None:
        """Raise the cancellation now if the call was cancelled (see `cancelled`).

        Raises:
            CancelledError: The call was cancelled: let it propagate, it is never a result.
        """
        try:
            anyio.from_thread.check_cancelled()  # in a thread: raises the backend's class
        except Exception:
            if _task_cancelled():
                raise anyio.get_cancelled_exc_class()() from None


def _task_cancelled() -> bool:
    try:
        # A cancelled scope makes the effective deadline minus infinity (anyio's own test).
        return anyio.current_effective_deadline() == -math.inf
    except RuntimeError:  # no event loop: not inside a call at all
        return False


_current: ContextVar[ToolContext | None] = ContextVar("llm_worker_tool_context", default=None)


def current_tool_context() -> ToolContext | None:
    """The context of the tool call running here, or `None` outside one.

    For hand-written `Tool` classes (an `@tool` function declares a `ToolContext` parameter
    instead). Worker threads of sync tools see it too.
    """
    return _current.get()


@contextmanager
def running_with(context: ToolContext) -> Generator[None]:
    """Make `context` the current call's context inside the block (and its tasks)."""
    token = _current.set(context)
    try:
        yield
    finally:
        _current.reset(token)


def is_tool_context(annotation: Any) -> bool:
    """Whether a resolved parameter annotation asks for the call's `ToolContext`.

    `ToolContext` itself, or `ToolContext | None` (a tool that may also run outside a Worker).
    """
    if annotation is ToolContext:
        return True
    args: tuple[Any, ...] = getattr(annotation, "__args__", ())
    return bool(args) and ToolContext in args and all(a in (ToolContext, type(None)) for a in args)
