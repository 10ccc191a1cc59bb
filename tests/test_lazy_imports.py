"""`import llm_worker` and a client load no logging; the library's records arrive as before.

Logging (with traceback, threading and string) is imported at the library's first record
(`llm_worker._log`); anyio and random at a transport's first request or retry; pathlib where a
file is read; a cooldown's module at a fallback's first use. Building a client pays for none
of them (docs/benchmarks.md, "Import and a client: a third pass (I42)"). Each case runs in a
fresh interpreter: the test process has all of them loaded.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import llm_worker

KEY = "sk-LlmWorkerSecret-0123456789abcdefXYZ"
# What building a client must not import (each is imported where it is first needed).
DEFERRED = (
    "logging",
    "traceback",
    "string",
    "anyio",
    "random",
    "pathlib",
    "llm_worker.providers._cooldown",
    "llm_worker.providers._template",  # Chat's and Gemini's byte templates: at a first text
    "httpx",
    "aiohttp",
)


def run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout


def test_import_and_building_every_client_load_no_logging_nor_request_time_modules() -> None:
    # A real key (a scrubber with secrets: the log filter is due) and a credential in the URL.
    out = run(
        f"""
        import sys
        import llm_worker
        from llm_worker.providers import (
            AnthropicClient, GeminiClient, OpenAIChatClient, OpenAIResponsesClient,
        )
        for cls in (AnthropicClient, GeminiClient, OpenAIChatClient, OpenAIResponsesClient):
            for transport in (None, "httpx", "aiohttp"):
                cls(model="m", api_key={KEY!r}, transport=transport, timeout=30)
            cls(model="m", api_key={KEY!r}, base_url="https://h.example/v1?key={KEY}")
        print(",".join(m for m in {DEFERRED!r} if m in sys.modules))
        """
    )
    assert out == "\n"


def test_a_users_handler_on_the_package_logger_gets_a_retry_record_as_the_callers() -> None:
    # Logging is imported after the client was built (as an application may): the record
    # reaches the user's handler on `llm_worker`, from the line that logged it, with its
    # fields; the package logger got its NullHandler; the request installed the scrubbing
    # filter on the HTTP library's loggers before that library could log.
    out = run(
        f"""
        import os, sys
        import anyio
        from llm_worker import Message, Request
        from llm_worker.errors import APIConnectionError
        from llm_worker.providers import OpenAIChatClient, RetryPolicy

        client = OpenAIChatClient(
            model="m", api_key={KEY!r}, base_url="http://127.0.0.1:9/v1", transport="httpx",
            retry=RetryPolicy(max_attempts=2, initial_delay=0.0, jitter=0.0),
        )
        assert "logging" not in sys.modules
        import logging

        records = []

        class Keep(logging.Handler):
            def emit(self, record):
                records.append(record)

        package = logging.getLogger("llm_worker")
        package.addHandler(Keep())
        package.setLevel(logging.INFO)
        package.propagate = False

        async def main():
            try:
                async for _ in client.stream(Request([Message.user("hi")])):
                    pass
            except APIConnectionError:
                print("refused")

        anyio.run(main)
        [r] = records
        print(r.name, r.levelname, r.funcName, os.path.basename(r.pathname), r.attempt, r.wait)
        print(sorted(type(h).__name__ for h in package.handlers))
        print(bool(logging.getLogger("httpx").filters), {KEY!r} in r.getMessage())
        """
    )
    assert out.splitlines() == [
        "refused",
        "llm_worker.retries INFO retrying _retries.py 1 0.0",
        "['Keep', 'NullHandler']",
        "True False",
    ]


def test_without_a_configuration_a_library_warning_reaches_no_stderr() -> None:
    # The NullHandler comes with the first record, so Python's last-resort handler (which
    # prints WARNING and above on stderr) never sees one (`run` checks stderr is empty).
    out = run(
        """
        import sys
        import llm_worker
        from llm_worker._log import logger

        logger("llm_worker.hooks").warning("a hook broke")
        import logging

        print([type(h).__name__ for h in logging.getLogger("llm_worker").handlers])
        """
    )
    assert out == "['NullHandler']\n"


def test_every_library_logger_is_a_lazy_one() -> None:
    # A module that made its own `logging.getLogger("llm_worker…")` would import logging at
    # import, and could log before the package logger has its NullHandler (`_log` adds it).
    src = Path(llm_worker.__file__).parent
    allowed = {src / "_log.py", src / "_secrets.py"}  # the latter: the HTTP libraries' loggers
    found = [
        str(path.relative_to(src))
        for path in sorted(src.rglob("*.py"))
        if path not in allowed and re.search(r"\blogging\.getLogger\(", path.read_text())
    ]
    assert found == []
