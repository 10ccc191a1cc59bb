"""The `llm-worker` command: `demo`, `chat`, `run`, `serve`, `mcp-serve` and `eval`.

Imported only by the console script (and `python -m llm_worker.cli`), so `import llm_worker`
never pays for argparse or rich. rich comes with the `cli` extra (`pip install
'llm-worker[cli]'`); without it the command says so and exits with 1.

Exit codes: 0 success; 1 an error (one line on stderr: a missing key, an unknown model string,
an unreachable server, …) or a run that did not finish; 2 a usage error; 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from llm_worker.testing import CassetteMode

__all__ = ("main",)

_WIRE_FORMATS = ("anthropic", "openai_chat", "openai_responses", "gemini")


def _parser() -> argparse.ArgumentParser:
    from llm_worker.cli._attach import add_options
    from llm_worker.cli._chat import parse_thinking, read_schema

    parser = argparse.ArgumentParser(
        prog="llm-worker",
        description="Put LLMs to work: stream answers, call tools, step in with hooks.",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="{demo,chat,run,serve,mcp-serve,eval}"
    )

    _demo_parser(sub)
    for name, text in (("chat", "an interactive session"), ("run", "one prompt, streamed")):
        cmd = sub.add_parser(name, help=text)
        if name == "run":
            cmd.add_argument("prompt", help="the prompt")
            cmd.add_argument("--json", action="store_true", help="print the result as JSON")
        cmd.add_argument("--model", required=True, help="provider:model, e.g. openai:gpt-4.1")
        cmd.add_argument("--base-url", help="API root (Ollama, vLLM, llama.cpp, a proxy)")
        cmd.add_argument("--api-key", help="API key (default: the provider's environment variable)")
        cmd.add_argument("--system", help="system prompt")
        cmd.add_argument(
            "--thinking",
            type=parse_thinking,
            metavar="BUDGET|EFFORT",
            help="reasoning: a token budget (2048) or an effort (none, minimal, low, medium, "
            "high, xhigh, max)",
        )
        cmd.add_argument("--max-tokens", type=int, help="output token limit per request")
        cmd.add_argument("--tools", action="store_true", help="let the model read this folder")
        add_options(cmd)
        cmd.add_argument(
            "--output-schema",
            type=read_schema,
            metavar="SCHEMA.json",
            help="answer with JSON of this JSON Schema (validated; an invalid answer is retried)",
        )
        cmd.add_argument(
            "--mcp",
            action="append",
            default=[],
            metavar="COMMAND|URL",
            help="an MCP server's tools: a command line (stdio, e.g. 'uvx mcp-server-time') or "
            "a streamable HTTP URL; repeatable",
        )
    _serve_parser(sub)
    _mcp_serve_parser(sub)
    _eval_parser(sub)
    return parser


def _eval_parser(sub: Any) -> None:  # argparse names the subparsers' type privately
    _eval_arguments(
        sub.add_parser(
            "eval",
            help="run a Worker over a file's cases (cassettes or live) and print a table",
            description=_EVAL_TEXT,
        )
    )


_EVAL_TEXT = (
    "Run make_worker() over each EvalCase of `cases` in CASES.py and print each case's "
    "status, requests, tokens, cost, time and answer. Cassettes are replayed from "
    "cassettes/<file name>/ beside the file unless told otherwise."
)


def _eval_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("cases", type=Path, metavar="CASES.py", help="defines cases, make_worker")
    cmd.add_argument("--cassettes", type=Path, metavar="DIR", help="the cassettes' folder")
    how = cmd.add_mutually_exclusive_group()
    how.add_argument("--record", action="store_true", help="record every case again")
    how.add_argument("--record-new", action="store_true", help="record cases not recorded yet")
    how.add_argument("--live", action="store_true", help="run against the model, no cassettes")


def _demo_parser(sub: Any) -> None:  # argparse's subparsers type is private
    demo = sub.add_parser(
        "demo",
        help="a Worker looks around this folder (offline by default)",
        description="A Worker looks around this folder with two read-only file tools. Offline "
        "(no API key, or --offline) the model is scripted, behind a real provider wire format "
        "on 127.0.0.1. Each tool call is asked about on a terminal; --yes allows them all; "
        "with no terminal to ask (CI, a pipe) they are allowed and a note says so.",
    )
    demo.add_argument(
        "--provider",
        default="anthropic",
        choices=_WIRE_FORMATS,
        help="wire format of the embedded offline model server (default: anthropic)",
    )
    demo.add_argument(
        "--model", help="provider:model to run live, e.g. anthropic:claude-sonnet-4-5"
    )
    demo.add_argument("--offline", action="store_true", help="stay offline even with an API key")
    demo.add_argument("--yes", "-y", action="store_true", help="allow every tool call, no asking")


def _serve_parser(sub: Any) -> None:  # argparse's subparsers type is private
    serve = sub.add_parser(
        "serve",
        help="serve a Worker to a web front end (Vercel AI SDK or AG-UI)",
        description="Serve MODULE:FACTORY (a callable returning a fresh Worker per request) "
        "at /api/chat, speaking the Vercel AI SDK UI message stream or AG-UI (needs the "
        "'cli' and 'web' extras: pip install 'llm-worker[cli,web]').",
    )
    serve.add_argument("target", metavar="MODULE:FACTORY", help="e.g. app:make_worker")
    serve.add_argument("--protocol", choices=("vercel", "ag-ui"), default="vercel")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--static", type=Path, help="a folder of files served at / (a page)")
    serve.add_argument(
        "--resumable",
        action="store_true",
        help="runs outlive their connection; GET/DELETE {path}/{id}/stream reconnects/stops",
    )
    serve.add_argument(
        "--authorize",
        metavar="MODULE:FUNCTION",
        help="authorize(request, chat_id) -> owner or None, asked for every request "
        "(without it only 127.0.0.1 is served: every client acts as one user)",
    )
    serve.add_argument(
        "--body-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="a request body not in by then is refused with 408 (default: 30)",
    )
    serve.add_argument(
        "--limit-concurrency",
        type=int,
        default=1_000,
        metavar="N",
        help="past N connections and tasks, answer 503 (default: 1000)",
    )
    serve.add_argument(
        "--timeout-keep-alive",
        type=int,
        default=5,
        metavar="SECONDS",
        help="close an idle kept-alive connection after this (default: 5)",
    )
    serve.add_argument(
        "--timeout-graceful-shutdown",
        type=int,
        default=10,
        metavar="SECONDS",
        help="on SIGTERM / Ctrl+C, cancel the runs still going after this (default: 10)",
    )


def _mcp_serve_parser(sub: Any) -> None:  # argparse names the subparsers' type privately
    serve = sub.add_parser(
        "mcp-serve",
        help="serve @tool functions as an MCP server",
        description="Serve the tools `module:name` names (a list of @tool functions, or one) "
        "as an MCP server, over stdio by default.",
    )
    serve.add_argument("target", metavar="module:name", help="e.g. my_app.tools:tools")
    serve.add_argument("--name", help="the server's name (default: module:name)")
    serve.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP at /mcp")


_NO_RICH = (
    "llm-worker: the command line needs the 'cli' extra, which is not installed ({error}).\n"
    "Install it with: pip install 'llm-worker[cli]'   (or: uv add 'llm-worker[cli]')"
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `llm-worker` console script; returns the exit code."""
    try:
        importlib.import_module("rich.console")
    except ImportError as exc:
        # The library runs without rich; only this command needs it (the `cli` extra) —
        # but `eval`, which prints its table as plain text without it.
        words = list(sys.argv[1:] if argv is None else argv)
        if words[:1] == ["eval"]:
            return _plain_eval(words[1:])
        print(_NO_RICH.format(error=exc), file=sys.stderr)
        return 1
    args = _parser().parse_args(argv)
    from rich.console import Console

    from llm_worker.cli._chat import print_error
    from llm_worker.errors import LLMWorkerError

    console = Console(highlight=False)
    console.soft_wrap = not console.is_terminal  # piped output: one line stays one line
    try:
        return _dispatch(console, args)
    except LLMWorkerError as exc:
        print_error(str(exc))
        return 1
    except KeyboardInterrupt:
        console.print("\n[yellow]interrupted[/]")
        return 130


def _dispatch(console: Console, args: argparse.Namespace) -> int:
    import anyio

    if args.command == "demo":
        from llm_worker.cli._demo import run_demo

        return anyio.run(
            lambda: run_demo(
                console=console,
                provider=args.provider,
                model=args.model,
                offline=args.offline,
                yes=args.yes,
            )
        )
    if args.command == "serve":
        from llm_worker.ui._serve import run_server

        options = {"host": args.host, "port": args.port, "static": args.static}
        options["authorize"] = args.authorize
        bounds = {
            "body_timeout": args.body_timeout,
            "limit_concurrency": args.limit_concurrency,
            "timeout_keep_alive": args.timeout_keep_alive,
            "timeout_graceful_shutdown": args.timeout_graceful_shutdown,
        }
        run_server(args.target, args.protocol, resumable=args.resumable, **options, **bounds)
        return 0
    if args.command == "mcp-serve":
        from llm_worker.cli._mcp import serve_tools

        return serve_tools(args.target, args.name, args.http)
    if args.command == "eval":
        return _eval_command(console, args)
    from llm_worker.cli._chat import run_chat, run_once

    if args.command == "chat":
        return run_chat(console, args)
    return anyio.run(lambda: run_once(console, args))


def _plain_eval(argv: list[str]) -> int:
    """`llm-worker eval` without rich: the same run, a plain-text table."""
    from llm_worker.errors import LLMWorkerError

    parser = argparse.ArgumentParser(prog="llm-worker eval", description=_EVAL_TEXT)
    _eval_arguments(parser)
    try:
        return _eval_command(None, parser.parse_args(argv))
    except LLMWorkerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _eval_command(console: Console | None, args: argparse.Namespace) -> int:
    import anyio

    from llm_worker.cli._eval import run_eval

    mode: CassetteMode | None = "record" if args.record else "replay"
    if args.record_new:
        mode = "auto"
    if args.live:
        mode = None
    return anyio.run(lambda: run_eval(console, args.cases, cassettes=args.cassettes, mode=mode))
