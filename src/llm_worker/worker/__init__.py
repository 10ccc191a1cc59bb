"""The Worker layer: the agent loop that puts a model, its tools and hooks to work.

Owns `Worker` (`_worker`), `RunStream` (`_stream`), what a Worker is configured with
(`_config`), one run's loop (`_turn`: `Run`, `StreamRetry`), a batch of tool calls
(`_execution`), the registered hooks and their chain rules (`_hookset`), history repair
(`_history`), object subscribers (`_subscriber`), the assistant message built from raw
events (`_assembler`) and the context policy's compacted requests (`_context*`).
Its public vocabulary lives in the top-level modules `llm_worker.hooks` (hook contexts and
results) and `llm_worker.state` (run results, pause state, the Worker's events), in this layer
too.

May import: the model layer, providers (a model string such as `"anthropic:…"` becomes a
client), the timeline, blob and tool layers. Never `llm_worker.testing` or the CLI. Modules
inside import each other directly, never through this package.
"""

from llm_worker.worker._context_policy import ContextPolicy
from llm_worker.worker._handoff import Handoff, handoff
from llm_worker.worker._stream import RunStream
from llm_worker.worker._turn import StreamRetry
from llm_worker.worker._worker import Worker

__all__ = ("ContextPolicy", "Handoff", "RunStream", "StreamRetry", "Worker", "handoff")
