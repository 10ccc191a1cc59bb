"""The errors durable runs raise, beside the library's own (every one an `LLMWorkerError`)."""

from __future__ import annotations

from llm_worker.errors import ConfigurationError, LLMWorkerError, PauseStateError

__all__ = (
    "DecisionConflictError",
    "ExecutorAliveError",
    "PayloadTooLargeError",
    "RecordError",
    "RecordedError",
    "RunFailedError",
)


class RecordError(LLMWorkerError):
    """A record in the system database is not one llm-worker wrote: refused, never run.

    Raised for a pickled record (llm-worker stores JSON only, and unpickling runs code), for
    text that is not JSON, and for JSON of the wrong shape (a tampered or corrupted row).

    Attributes:
        run_id: The run the record belongs to, when known.
        step: The record's step (`llm-worker request 2`, `result`, ...), when known.
        detail: What is wrong with it.
    """

    def __init__(self, detail: str, *, run_id: str | None = None, step: str | None = None) -> None:
        where = "" if run_id is None else f" of run {run_id!r}"
        where += "" if step is None else f" (step {step!r})"
        super().__init__(f"a stored record{where} is refused: {detail}")
        self.detail = detail
        self.run_id = run_id
        self.step = step

    def at(self, run_id: str, step: str) -> RecordError:
        """The same refusal, naming the run and step it was read for."""
        return RecordError(self.detail, run_id=self.run_id or run_id, step=self.step or step)


class RecordedError(LLMWorkerError):
    """A run's recorded exception of a type llm-worker does not rebuild (an application's own).

    Attributes:
        type_name: The original exception's type, `module.QualifiedName`.
        message: Its message.
    """

    def __init__(self, message: str, *, type_name: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message


class RunFailedError(LLMWorkerError):
    """The durable run failed: it has no pause to read and takes no decision.

    Attributes:
        run_id: The run.
    """

    def __init__(self, message: str, *, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


class DecisionConflictError(PauseStateError):
    """Another decision (or a cancel) already answered this pause of the run: this one is dropped.

    Attributes:
        run_id: The run.
    """

    def __init__(self, message: str, *, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


class ExecutorAliveError(ConfigurationError):
    """`recover()` was asked to take over a process that is alive (its lease is current).

    Attributes:
        executor_ids: The live executors.
    """

    def __init__(self, message: str, *, executor_ids: list[str]) -> None:
        super().__init__(message)
        self.executor_ids = executor_ids


class PayloadTooLargeError(LLMWorkerError):
    """A durable run's value is over its engine's payload limit (Temporal's, 2 MB by default).

    Large tool outputs belong in the Worker's blob store (`Worker(blob_store=...)`; an
    object store for a fleet): the history then carries a summary and the blob's key.

    Attributes:
        what: The value (`the output of tool fetch`, `the run's result`, ...).
        size: Its size in bytes, encoded as JSON.
        limit: The limit in bytes.
    """

    def __init__(self, *, what: str, size: int, limit: int) -> None:
        super().__init__(
            f"{what} is {size} bytes as JSON, over Temporal's payload limit of {limit} bytes: "
            "it cannot go into the workflow history. Keep large tool outputs in the Worker's "
            "blob store (Worker(blob_store=...), an object store for a fleet)"
        )
        self.what = what
        self.size = size
        self.limit = limit
