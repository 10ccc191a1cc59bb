"""`llm-worker demo`: a Worker looks around the current folder.

Offline (the default without an API key) it talks to an embedded model server on 127.0.0.1
that speaks a real provider wire format, through the real provider client: everything but the
model itself is the real code path — streaming text and thinking, two tool calls in parallel,
an approval hook, a large output kept as a blob with its summary, an `inspect` call, the final
answer and its token usage. With an API key (or `--model provider:name`) the same demo runs
against the real provider.

Approval: with `--yes` every call is allowed (and each approval printed); without it, on a
terminal, each call of a folder tool is asked about; with no terminal to ask (CI, a pipe) the
calls are allowed automatically and a note says so. The built-in read-only `inspect` tool is
always allowed.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

import anyio
from rich.console import Console
from rich.markup import escape

from llm_worker.blobs import FsBlobStore
from llm_worker.cli._input import read_line
from llm_worker.cli._render import Renderer
from llm_worker.cli._tools import folder_tools
from llm_worker.events import UsageEvent
from llm_worker.hooks import Skip, ToolCallContext
from llm_worker.messages import TextPart, ThinkingPart, ToolUsePart
from llm_worker.providers import from_string, model_from_env
from llm_worker.state import RunCompleted, RunStatus
from llm_worker.testing import (
    Chunking,
    ScriptedModelServer,
    ScriptedRequest,
    ScriptedResponse,
    ScriptStep,
)
from llm_worker.worker import Worker

__all__ = ("DEMO_PROMPT", "run_demo")

DEMO_PROMPT = (
    "Give me an overview of the current folder: list its files and read its README at the "
    "same time, look into any large output with the inspect tool, then tell me in a few "
    "sentences what this folder is."
)

# The environment variable that enables a live demo, and the model it picks.
_BLOB = re.compile(r"\[blob:([0-9a-f-]{36})\] text \| (\d+) lines")
# Largest write of the embedded server, per wire format: about 30 writes per answer, whatever
# the format's verbosity, so that the text visibly streams and the demo still ends in a second.
_WRITE_SIZE = {"anthropic": 300, "openai_chat": 440, "openai_responses": 520, "gemini": 300}
_README_BYTES = 600  # below the 800-byte blob threshold: the README stays inline


async def run_demo(
    *,
    console: Console,
    provider: str = "anthropic",
    model: str | None = None,
    offline: bool = False,
    yes: bool = False,
    folder: Path | None = None,
    ask: bool | None = None,
    pace: float = 0.008,
) -> int:
    """Run the demo and return the exit code (0 when the model gave its final answer).

    Args:
        console: Where to print.
        provider: The wire format of the embedded server (offline).
        model: `provider:model` to run live.
        offline: Stay offline even with an API key.
        yes: Allow every tool call without asking.
        folder: The folder the tools look at (the current one by default).
        ask: Ask before each tool call; by default when stdin is a terminal and not `yes`.
        pace: Seconds between two writes of the embedded server (so the streaming shows).
    """
    root = (folder or Path.cwd()).resolve()
    target = None if offline else model_from_env(model)
    approval = _Approval(console, yes=yes, ask=sys.stdin.isatty() if ask is None else ask)
    with tempfile.TemporaryDirectory(prefix="llm-worker-blobs-") as blobs:
        store = FsBlobStore(blobs)
        if target is not None:
            console.print(f"[bold]llm-worker demo[/] — live, model [cyan]{escape(target)}[/]")
            async with from_string(target) as client:
                worker = Worker(client, tools=folder_tools(root), blob_store=store)
                return await _drive(worker, console, approval)
        console.print(
            f"[bold]llm-worker demo[/] — offline: a scripted model behind a real "
            f"[cyan]{provider}[/] wire format on 127.0.0.1 (set an API key for a live model)"
        )
        server = ScriptedModelServer(
            provider,
            _script(root),
            chunking=Chunking.random(max_size=_WRITE_SIZE[provider]),
            chunk_delay=pace,
        )
        async with server, server.client() as client:
            worker = Worker(client, tools=folder_tools(root), blob_store=store)
            code = await _drive(worker, console, approval)
        console.print(
            f"[dim]{len(server.requests)} HTTP requests reached the embedded {provider} server. "
            "Next: `llm-worker chat --model anthropic:claude-sonnet-4-5`, or an API key in "
            "the environment for a live demo.[/]"
        )
        return code


async def _drive(worker: Worker, console: Console, approval: _Approval) -> int:
    render = Renderer(console)
    approval.render = render
    worker.add_before_tool_call_hook(approval)
    console.print(f"[bold]user:[/] {escape(DEMO_PROMPT)}")
    status = None
    async for event in worker.stream(DEMO_PROMPT):
        render(event)
        if isinstance(event, RunCompleted):
            status = event.result.status
    return 0 if status is RunStatus.FINISHED else 1


class _Approval:
    """The before_tool_call hook: allow, ask, or allow with a note when nobody can answer."""

    def __init__(self, console: Console, *, yes: bool, ask: bool) -> None:
        self.console = console
        self.yes = yes
        self.ask = ask and not yes
        self.noted = False
        self.render: Renderer | None = None

    async def __call__(self, ctx: ToolCallContext) -> Skip | None:
        if self.render is not None:
            # The order on screen is cosmetic: never let it hold the run up for long.
            with anyio.move_on_after(2):
                await self.render.answer_rendered.wait()
        call = f"{escape(ctx.call.name)}({escape(_args(ctx.call.input))})"
        if ctx.call.name == "inspect":
            self._line(f"[green]✓[/] {call} [dim]allowed: built-in and read-only[/]")
            return None
        if self.yes:
            self._line(f"[green]✓[/] {call} [dim]allowed (--yes)[/]")
            return None
        if not self.ask:
            if not self.noted:
                self._line("[yellow]no terminal to ask: tool calls are allowed automatically[/]")
                self.noted = True
            self._line(f"[green]✓[/] {call} [dim]allowed[/]")
            return None
        return await self._question(call)

    async def _question(self, call: str) -> Skip | None:
        if self.render is not None:
            self.render.stop_spinner()
        self.console.print(f"[bold yellow]?[/] allow {call}? [Y/n] ", end="")
        answer = await read_line()
        if answer is None or answer.strip().lower() in ("n", "no"):
            self._line("[red]✗ denied[/]" if answer is not None else "\n[red]✗ denied[/]")
            return Skip("the user denied this call")
        if self.render is not None:
            self.render.resume_spinner()
        return None

    def _line(self, markup: str) -> None:
        if self.render is not None:
            self.render.line(markup)
        else:
            self.console.print(markup, highlight=False)


def _args(values: dict[str, object]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in values.items())


# -- the scripted model of the offline demo ------------------------------------------------


def _script(root: Path) -> list[ScriptStep]:
    readme = next(
        (n for n in ("README.md", "README.rst", "README.txt", "README") if (root / n).is_file()),
        "README.md",
    )
    first = ScriptedResponse(
        [
            ThinkingPart(
                "The user wants an overview. Listing the files and reading the README are "
                "independent, so I will call both tools at once.",
                signature="demo-signature",
            ),
            TextPart("Let me look around this folder."),
            ToolUsePart("", "list_files", {"path": "."}),
            ToolUsePart("", "read_file", {"path": readme, "max_bytes": _README_BYTES}),
        ],
        usage=UsageEvent(input_tokens=812, output_tokens=96, cache_read_input_tokens=512),
        chunk_size=8,
    )
    return [first, _inspect_step, _answer_step]


def _stored(call: ScriptedRequest) -> re.Match[str] | None:
    """The summary of a stored output among the tool results of the conversation."""
    results = (r for m in call.request.messages for r in m.tool_results)
    return next(filter(None, (_BLOB.search(r.content) for r in results)), None)


def _inspect_step(call: ScriptedRequest) -> ScriptedResponse:
    # A real model reads the summary in the tool result; this one finds the blob id there.
    found = _stored(call)
    if found is None:  # a small folder: nothing was stored, nothing to inspect
        return _answer_step(call)
    return ScriptedResponse(
        [
            TextPart("The listing was large, so it was stored; let me inspect its first lines."),
            ToolUsePart("", "inspect", {"blob_id": found.group(1), "selector": "lines:1-10"}),
        ],
        usage=UsageEvent(input_tokens=1204, output_tokens=41, cache_read_input_tokens=812),
        chunk_size=8,
    )


def _answer_step(call: ScriptedRequest) -> ScriptedResponse:
    found = _stored(call)
    listing = (
        f"The listing had {found.group(2)} entries, too many for the context, so it was kept "
        "as a blob and I read only the lines I needed with inspect. "
        if found
        else ""
    )
    text = (
        "Here is the overview. I listed the folder and read its README in parallel. "
        f"{listing}This folder holds a project whose README explains what it is and how to "
        "run it; the listing shows its source, tests and configuration files."
    )
    return ScriptedResponse(
        [TextPart(text)],
        usage=UsageEvent(input_tokens=1530, output_tokens=64, cache_read_input_tokens=1204),
        chunk_size=8,
    )
