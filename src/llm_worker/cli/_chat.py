"""`llm-worker chat` (interactive, history kept across turns) and `llm-worker run` (one shot).

Ctrl-C while a turn runs cancels that turn (`Worker.cancel`: the open block is aborted, the
history stays sendable) and the session goes on; a second Ctrl-C in the same turn cancels it
hard. Ctrl-C at the prompt clears the line; Ctrl-D (end of input) ends the session. A turn
that fails (the server is unreachable, the key is refused) is reported in one line and left
out of the history, so the next prompt starts from the last good state.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Generator, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.markup import escape

from llm_worker._json import as_dict
from llm_worker.cli._attach import attached, describe, prompt_message
from llm_worker.cli._mcp import HeldServers, mcp_servers
from llm_worker.cli._render import Renderer
from llm_worker.errors import ConfigurationError, LLMWorkerError
from llm_worker.messages import MediaPart, Message, ThinkingConfig
from llm_worker.state import RunCompleted, RunResult, RunStatus
from llm_worker.worker import Worker

__all__ = (
    "build_worker",
    "parse_thinking",
    "print_error",
    "read_schema",
    "run_chat",
    "run_once",
)

_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


def parse_thinking(value: str) -> ThinkingConfig:
    """`--thinking 2048` (a token budget) or `--thinking high` (an effort)."""
    if value.isdigit() and int(value) > 0:
        return ThinkingConfig(budget_tokens=int(value))
    if value in _EFFORTS:
        return ThinkingConfig(effort=value)
    raise argparse.ArgumentTypeError(
        f"expected a token budget (e.g. 2048) or an effort ({', '.join(_EFFORTS)}), not {value!r}"
    )


def read_schema(path: str) -> dict[str, Any]:
    """`--output-schema schema.json`: a JSON Schema (an object) read from a file."""
    try:
        schema = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"{path} is not JSON: {exc}") from None
    found = as_dict(schema)
    if not found:
        raise argparse.ArgumentTypeError(f"{path} is not a JSON Schema (a non-empty object)")
    return found


def print_error(message: str) -> None:
    """One readable line on stderr: `error: …` (no traceback, no wrapping)."""
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    err.print(f"[bold red]error:[/] {escape(' '.join(message.split()))}")


def build_worker(args: argparse.Namespace, servers: Sequence[object] = ()) -> Worker:
    """The Worker the `chat` / `run` options describe.

    Raises:
        ConfigurationError: An unknown model string, or no API key for the provider.
    """
    from llm_worker.providers import from_string

    _check_key(args.model, args.api_key, args.base_url)
    options: dict[str, Any] = {}
    if args.base_url:
        options["base_url"] = args.base_url
    if args.api_key:
        options["api_key"] = args.api_key
    client = from_string(args.model, **options)
    tools: list[Any] = []
    if args.tools:
        from llm_worker.cli._tools import folder_tools

        tools = folder_tools(Path.cwd())
    tools.extend(servers)
    return Worker(
        client,
        tools=tools,
        system=args.system,
        thinking=args.thinking,
        max_tokens=args.max_tokens,
        output_type=args.output_schema,
    )


def _check_key(model: str, api_key: str | None, base_url: str | None) -> None:
    """Name the environment variable and the option when no key is found.

    The client's own message names its `api_key=` argument, which a CLI user cannot pass.
    """
    from llm_worker import providers

    prefix, _, name = model.partition(":")
    class_name = providers.PROVIDER_PREFIXES.get(prefix.lower())
    if class_name is None or not name or api_key is not None or base_url is not None:
        return  # a malformed model string is reported by from_string
    names: tuple[str, ...] = getattr(providers, class_name).api_key_env
    if not any(os.environ.get(name) for name in names):
        raise ConfigurationError(
            f"no API key for {model}: set {' or '.join(names)}, or pass --api-key "
            "(a server of your own: --base-url)"
        )


@contextlib.contextmanager
def _sigint_cancels(worker: Worker) -> Generator[None]:
    """While a turn runs, Ctrl-C cancels the turn instead of ending the program."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    presses = 0

    def on_sigint() -> None:
        nonlocal presses
        presses += 1
        if presses == 1:
            worker.cancel()
        elif task is not None:  # the clean cancel did not end the turn: cancel it hard
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    except (NotImplementedError, RuntimeError, ValueError):  # Windows, or not the main thread
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)


async def _turn(worker: Worker, render: Renderer, prompt: str | Message) -> RunResult | None:
    result = None
    with _sigint_cancels(worker):
        async for event in worker.stream(prompt):
            render(event)
            if isinstance(event, RunCompleted):
                result = event.result
    return result


def _line_editing() -> bool:
    """Turn on line editing and history (readline) when the input is a terminal."""
    if not sys.stdin.isatty():
        return False
    try:
        import readline  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:  # not on every platform
        return False
    return True


def _prompt(console: Console, editing: bool) -> str:
    if editing and console.is_terminal and not console.no_color:
        # \001 and \002 tell readline that the colour codes take no room on the line.
        return "\001\x1b[1;32m\002you>\001\x1b[0m\002 "
    return "you> "


def run_chat(console: Console, args: argparse.Namespace) -> int:
    """The interactive session: one turn per line, until end of input."""
    parts = attached(args)
    servers = HeldServers(mcp_servers(args.mcp))
    worker = build_worker(args, servers.servers)
    prompt = _prompt(console, _line_editing())
    console.print(
        f"[bold]llm-worker chat[/] — [cyan]{escape(args.model)}[/] "
        "[dim](Ctrl-C cancels a turn, Ctrl-D quits)[/]"
    )
    if parts:
        console.print(f"[dim]{escape(describe(args, parts))} — sent with your first message[/]")
    with asyncio.Runner() as runner:
        try:
            runner.run(servers.start())
            _session(runner, worker, console, prompt, parts)
        finally:
            runner.run(servers.stop())
            runner.run(_close(worker))
    return 0


def _session(
    runner: asyncio.Runner, worker: Worker, console: Console, prompt: str, parts: list[MediaPart]
) -> None:
    while True:
        try:
            line = input(prompt)
        except EOFError:
            console.print()
            return
        except KeyboardInterrupt:
            console.print()
            continue
        if not sys.stdin.isatty():  # piped input is not echoed: show what was read
            console.print(line, markup=False, highlight=False)
        if line.strip() and _chat_turn(runner, worker, console, prompt_message(line, parts)):
            parts = []  # the files went with this turn


def _chat_turn(
    runner: asyncio.Runner, worker: Worker, console: Console, line: str | Message
) -> bool:
    """One turn; whether it was kept in the history."""
    kept = len(worker.history)
    render = Renderer(console)
    try:
        runner.run(_turn(worker, render, line))
    except (KeyboardInterrupt, asyncio.CancelledError):  # a second Ctrl-C: cancelled hard
        render.stop_spinner()
        console.print("\n[yellow](turn cancelled)[/]")
    except LLMWorkerError as exc:
        render.stop_spinner()
        del worker.history[kept:]
        print_error(f"{exc} — this turn was not kept; send it again to retry")
        return False
    return True


async def _close(worker: Worker) -> None:
    aclose = getattr(worker.client, "aclose", None)
    if aclose is not None:
        await aclose()


async def run_once(console: Console, args: argparse.Namespace) -> int:
    """One prompt: the answer streams to stdout (the rest to stderr), or JSON with `--json`.

    Returns 0 when the model answered, 1 when the run did not finish (cancelled).
    """
    parts = attached(args)
    message = prompt_message(args.prompt, parts)
    servers = mcp_servers(args.mcp)
    worker = build_worker(args, servers)
    try:
        async with AsyncExitStack() as stack:
            for server in servers:
                await stack.enter_async_context(server)
            result = await _run_once(console, args, worker, message, parts)
    finally:
        await _close(worker)
    return 0 if result is not None and result.status is RunStatus.FINISHED else 1


async def _run_once(
    console: Console,
    args: argparse.Namespace,
    worker: Worker[Any],
    message: str | Message,
    parts: list[MediaPart],
) -> RunResult[Any] | None:
    if args.json or args.output_schema is not None:
        # With a schema, stdout is the validated output (JSON), not the streamed text.
        with _sigint_cancels(worker):
            result = await worker.run(message)
        shown = _as_json(result) if args.json else _output(result)
        sys.stdout.write(orjson.dumps(shown, option=orjson.OPT_INDENT_2).decode())
        sys.stdout.write("\n")
        return result
    info = Console(stderr=True, highlight=False)
    if parts:
        info.print(escape(describe(args, parts)), style="dim")
    return await _turn(worker, Renderer(console, info=info), message)


def _output(result: RunResult[Any]) -> Any:
    if result.refusal is not None:
        raise LLMWorkerError(f"the model refused: {result.refusal}")
    return result.output_or_none  # None (printed `null`) for a run cancelled by Ctrl-C


def _as_json(result: RunResult[Any]) -> dict[str, Any]:
    usage = result.usage
    return {
        "status": result.status.value,
        "text": result.text,
        "output": output if (output := result.output_or_none) != result.text else None,
        "refusal": result.refusal,
        "reason": result.reason,
        "requests": result.requests,
        "usage": {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
            "cache_read_input_tokens": usage.cache_read_input_tokens,
            "cache_creation_input_tokens": usage.cache_creation_input_tokens,
            "reasoning_tokens": usage.reasoning_tokens,
        },
        "cost_usd": _cost(result),
        "messages": [m.to_dict() for m in result.messages],
    }


def _cost(result: RunResult) -> str | None:
    # A string: JSON numbers would turn the exact decimal into a float.
    from llm_worker.errors import MissingExtraError

    try:
        cost = result.cost
    except MissingExtraError:
        return None
    return None if cost is None else str(cost)
