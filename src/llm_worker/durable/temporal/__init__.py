"""Durable runs on Temporal: a Worker's runs as Temporal workflows (`llm-worker[temporal]`).

Owns `TemporalWorker` (`_worker`), the workflow every run is (`_workflow`), the interceptor
that makes each model request and tool call an activity inside it (`_steps`), the activities
(`_activities`), how runs are read from any process (`_runs`) and the Workers this process
serves, by name (`_registry`). The records are DBOS's (`llm_worker.durable._records`): the
two engines keep the same JSON.

Importing this package imports `temporalio`; a missing extra raises `MissingExtraError`
naming `llm-worker[temporal]`. `import llm_worker` never imports it.
"""

from llm_worker._extras import require_extra

require_extra("temporalio", "temporal", feature="TemporalWorker")

from llm_worker.durable.temporal._worker import PASSTHROUGH, TemporalWorker  # noqa: E402

__all__ = ("PASSTHROUGH", "TemporalWorker")
