"""`Worker.as_tool`: a Worker run as a tool of another, in a context of its own.

Each call forks the sub-agent's Worker (its system prompt, tools, hooks, model; a fresh
history), runs it under the calling run's node of the run tree (`_tree`), and returns its
final answer — or its typed output as JSON — as the call's result. Its events reach the
parent's stream with their path; its usage rolls up into the parent's result.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, cast

from llm_worker.errors import ConfigurationError, ToolError
from llm_worker.state import RunStatus
from llm_worker.tools import Effect, ToolMeta, tool_meta
from llm_worker.tools._text import json_text
from llm_worker.tools._tool import MetaTool
from llm_worker.tools._toolset import current_call
from llm_worker.worker._tree import (
    ChildPaused,
    Forwarder,
    Launch,
    Node,
    child_run,
    current_node,
    is_reader,
    launching,
    parent_limits,
)

if TYPE_CHECKING:
    from llm_worker.state import RunResult
    from llm_worker.worker._config import WorkerConfig
    from llm_worker.worker._worker import Worker

__all__ = ("DEFAULT_MAX_DEPTH", "AgentTool", "OutputForm", "SubAgents")

DEFAULT_MAX_DEPTH = 3
"""Sub-agent levels below the root run a tree may have (the root's children are level 1)."""

OutputForm: TypeAlias = Literal["text", "structured"]
"""What a sub-agent's call returns: its final text, or its typed output as JSON."""

_RANK: dict[str, int] = {"read_only": 0, "idempotent": 1, "side_effect": 2}
_TEXT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "The task, in words."}},
    "required": ["input"],
    "additionalProperties": False,
}


class AgentTool(MetaTool):
    """A Worker as a tool: each call runs it once, in a fresh context (`Worker.as_tool`)."""

    __slots__ = ("_input_type", "_output", "max_depth", "meta", "worker")

    def __init__(
        self,
        worker: Worker[Any],
        *,
        name: str,
        description: str,
        input_type: Any = str,
        output: OutputForm = "text",
        effect: Effect | None = None,
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> None:
        if output not in ("text", "structured"):
            raise ConfigurationError(f"as_tool: output={output!r} is not 'text' or 'structured'")
        if output == "structured" and worker._cfg.output is None:  # pyright: ignore[reportPrivateUsage]
            raise ConfigurationError(
                "as_tool(output='structured') needs a Worker with an output_type"
            )
        if max_depth < 1:
            raise ConfigurationError(f"as_tool: max_depth={max_depth!r} must be >= 1")
        self.worker = worker
        self._input_type = input_type
        self._output = output
        self.max_depth = max_depth
        schema = _TEXT_SCHEMA if input_type is str else _model_schema(input_type)
        self.meta = ToolMeta(name, description, schema, effect=effect or _strongest(worker))

    def __repr__(self) -> str:
        return f"AgentTool(name={self.meta.name!r}, worker={self.worker!r})"

    async def execute(self, input_json: str) -> str:
        """Run the sub-agent on the call's input; its answer (or output) is the result.

        Raises:
            ToolError: The input does not fit, the tree would be deeper than `max_depth` or
                the Worker would be its own descendant, or the sub-agent's run did not
                finish (cancelled by a hook, refused).
        """
        prompt = self._prompt(input_json)
        launch = self._launch()
        child = self.worker.fork()
        parent = current_node()
        forwarder = Forwarder(launch.path, parent.cfg) if parent is not None else None
        child._cfg = child_config(child._cfg, forwarder)  # pyright: ignore[reportPrivateUsage]
        status = RunStatus.CANCELLED  # a run that raised still made (and was billed) requests
        resumed = parent.run.tree.resume.pop(launch.path[-1], None) if parent else None
        try:
            with launching(launch):
                if resumed is None:
                    result = await child._run(prompt, None)  # pyright: ignore[reportPrivateUsage]
                else:
                    state, decisions = resumed
                    result = await child._resume(state, decisions, None, None)  # pyright: ignore[reportPrivateUsage]
            status = result.status
        finally:
            if forwarder is not None:
                forwarder.close()
            _roll_up(self.meta.name, launch, parent, status)
        return self._answer(result)

    def _prompt(self, input_json: str) -> str:
        if self._input_type is str:
            from llm_worker._json import as_dict, as_str

            text = as_str(as_dict(_loads(input_json)).get("input"))
            if text is None:
                raise ToolError('give the task as {"input": "..."}')
            return text
        try:
            value = self._input_type.model_validate_json(input_json)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise ToolError(f"the input does not fit: {exc}") from exc
        return str(value.model_dump_json())

    def _launch(self) -> Launch:
        parent = current_node()
        call = current_call()
        mine = self.worker._cfg  # pyright: ignore[reportPrivateUsage]
        if parent is None or call is None:  # called outside a run: a root of its own
            return Launch(("",) if call is None else (call[0],), (mine,))
        path = (*parent.path, call[0])
        if len(path) > self.max_depth:
            raise ToolError(
                f"sub-agent {self.meta.name!r} not run: the run tree would be {len(path)} "
                f"levels deep, past its limit of {self.max_depth} (as_tool(max_depth=...))"
            )
        if mine in parent.lineage:
            raise ToolError(
                f"sub-agent {self.meta.name!r} not run: its Worker is already running above "
                "this call, and a Worker cannot be its own descendant"
            )
        return Launch(path, (*parent.lineage, mine), limits=parent_limits(parent))

    def _answer(self, result: RunResult[Any]) -> str:
        if result.status is RunStatus.PAUSED and result.state is not None:
            raise ChildPaused(result.state, result.reason)
        if result.status is not RunStatus.FINISHED:
            why = f": {result.reason}" if result.reason else ""
            raise ToolError(f"the sub-agent's run ended {result.status.value}{why}")
        if result.refusal is not None:
            raise ToolError(f"the sub-agent declined: {result.refusal}")
        if self._output == "structured":
            return json_text(result.output)
        return result.text


def child_config(cfg: WorkerConfig, forwarder: Forwarder | None) -> WorkerConfig:
    """The fork's own configuration: its own sinks and block state, the same registrations."""
    # Another run's reader (a RunStream of the sub-agent's Worker itself) is not this run's.
    sinks = [s for s in cfg.sinks if not is_reader(s)]
    if forwarder is not None:
        sinks.insert(0, forwarder)
    path = forwarder.path if forwarder is not None else ()
    # `path` is also what the child's tool calls read in their ToolContext.
    # A sub-agent's run is a step of its caller's, never a conversation of its own session.
    timeline = cfg.timeline.branch(path)
    return replace(cfg, sinks=sinks, timeline=timeline, path=path, session=None)


def _roll_up(name: str, launch: Launch, parent: Node | None, status: RunStatus) -> None:
    """Add the child's run, and the runs below it, to its parent's."""
    node = launch.node
    if node is None or parent is None:
        return
    # A resumed child's run counts from its start again: its earlier records go.
    depth = len(node.path)
    records = parent.run.tree.children
    records[:] = [c for c in records if c.path[:depth] != node.path]
    records.append(child_run(name, node, status))
    records.extend(node.run.tree.children)


def _strongest(worker: Worker[Any]) -> Effect:
    """The strongest effect among the Worker's tools (read-only when it has none)."""
    registry = worker._cfg.registry  # pyright: ignore[reportPrivateUsage]
    effects: list[Effect] = [
        tool_meta(t).effect for n in registry.names if (t := registry.get(n)) is not None
    ]
    strongest: Effect = "read_only"
    for effect in effects:
        if _RANK[effect] > _RANK[strongest]:
            strongest = effect
    return strongest


def _model_schema(input_type: Any) -> dict[str, Any]:
    schema = getattr(input_type, "model_json_schema", None)
    if schema is None or not callable(getattr(input_type, "model_validate_json", None)):
        raise ConfigurationError(
            f"as_tool: input_type={input_type!r} is not str or a pydantic model"
        )
    return dict(schema())


def _loads(text: str) -> object:
    import orjson

    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ToolError(f"the arguments are not JSON: {exc}") from exc


class SubAgents:
    """`Worker.as_tool`, kept beside the tool it makes."""

    __slots__ = ()

    def as_tool(
        self,
        *,
        name: str,
        description: str,
        input_type: Any = str,
        output: OutputForm = "text",
        effect: Effect | None = None,
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> AgentTool:
        """This Worker as a sub-agent: a tool whose call runs it in a fresh context.

        ```python
        researcher = Worker("gemini:gemini-2.5-flash", tools=[search], system="Research.")
        writer = Worker("anthropic:claude-sonnet-4-5", tools=[
            researcher.as_tool(name="research", description="Finds facts on a topic."),
        ])
        ```

        Each call runs a fork of this Worker (its system prompt, tools, hooks, model; a
        history of its own) on the call's input, and its final answer (or, with
        `output="structured"`, its typed output as JSON) is the call's result. Calls in one
        answer run in parallel like any tools. The child's events reach the calling run's
        `Worker.stream()`, Timeline handlers and subscribers with `event.path` (the call
        ids from the root); its usage is in the caller's `RunResult.usage`, broken down in
        `RunResult.children`; cancelling the caller cancels it.

        Args:
            name: The tool's name.
            description: What the sub-agent does, for the calling model.
            input_type: `str` (the model sends `{"input": "..."}`) or a pydantic model
                (its fields are the arguments; the child reads them as JSON).
            output: `"text"` (the final answer) or `"structured"` (the output type's value
                as JSON; needs `output_type`).
            effect: The tool's effect; by default the strongest among this Worker's tools
                (read-only when it has none).
            max_depth: Levels of sub-agents below the root a call may run at; past it (or
                when this Worker would be its own descendant) the call's result is an error.

        Raises:
            ConfigurationError: A bad name, input type or output form.
        """
        return AgentTool(
            cast("Worker[Any]", self),  # a mixin of Worker only
            name=name,
            description=description,
            input_type=input_type,
            output=output,
            effect=effect,
            max_depth=max_depth,
        )
