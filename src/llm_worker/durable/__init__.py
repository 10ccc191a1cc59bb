"""Durable runs: a Worker's runs as DBOS Transact workflows (`pip install 'llm-worker[dbos]'`).

The same surface on Temporal: `llm_worker.durable.temporal.TemporalWorker` (extra
`llm-worker[temporal]`); `DurableRuns` (`_protocol`) is the protocol both engines meet.

Owns `DurableWorker` (`_durable`) and how it acts on runs (`_access`: through this process's
DBOS, or as a client that serves nothing), the process's DBOS engine and the workflow every
durable run is (`_engine`), the interceptor that makes each model request and tool call a
step (`_steps`, with `step()` for hooks' side effects), the JSON records those steps keep
(`_records`) and how DBOS stores them (`_serializer`: JSON, never a pickle), llm-worker's
tables beside DBOS's (`_store`: decision claims, liveness leases) and its errors (`_errors`).

May import: the model, provider, timeline, blob, tool and worker layers. Never
`llm_worker.testing` or the CLI. `dbos` (and SQLAlchemy) are imported only through
`require_extra`, when a `DurableWorker` is made, never by `import llm_worker`.
"""

from llm_worker.durable._durable import DEFAULT_DATABASE_URL, DurableWorker
from llm_worker.durable._errors import (
    DecisionConflictError,
    ExecutorAliveError,
    PayloadTooLargeError,
    RecordedError,
    RecordError,
    RunFailedError,
)
from llm_worker.durable._protocol import DurableRuns, RunSummary
from llm_worker.durable._steps import step

__all__ = (
    "DEFAULT_DATABASE_URL",
    "DecisionConflictError",
    "DurableRuns",
    "DurableWorker",
    "ExecutorAliveError",
    "PayloadTooLargeError",
    "RecordError",
    "RecordedError",
    "RunFailedError",
    "RunSummary",
    "step",
)
