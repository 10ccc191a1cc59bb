"""Tools started early on an answer that was withdrawn, carried over to the answer after it.

A fallback client may give up on an answer mid-stream and have another client answer the same
request. A tool the Worker started early (`early_tool_start`) on the withdrawn answer keeps
running; when the new answer makes the same call (same tool, same arguments once the
before_tool_call hooks are done with them), that run's result answers it — the tool is not
started a second time. A call the new answer does not repeat is left to finish unread.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

import anyio
import orjson

from llm_worker.tools import ToolResult

if TYPE_CHECKING:
    from llm_worker.collectors import ToolCall
    from llm_worker.state import PendingCall

__all__ = ("CallKey", "Carried", "call_key")

CallKey: TypeAlias = tuple[str, bytes]


def call_key(call: ToolCall) -> CallKey:
    """What makes two calls the same: the tool and its arguments (key order aside)."""
    try:
        arguments = orjson.dumps(call.input, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not JSON (a hook's rewrite is checked, but be safe): never equal
        arguments = repr(id(call)).encode()
    return call.name, arguments


@dataclass(slots=True)
class Carried:
    """A call started early on a withdrawn answer: its completion and its record."""

    done: anyio.Event
    pending: PendingCall

    async def result_for(self, call: ToolCall) -> ToolResult:
        """The carried run's result, as the answer to `call` (the new answer's call id)."""
        await self.done.wait()
        result = self.pending.result
        if result is None:  # the run ended without a result (it was cut short)
            return ToolResult(
                call.id,
                call.name,
                "the call could not be completed",
                is_error=True,
                input=call.input,
            )
        return dataclasses.replace(result, tool_use_id=call.id)
