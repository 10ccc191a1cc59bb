"""The `llm_worker` logger has a `NullHandler` (issue #31, 8): the application decides.

Without a logging configuration, a failing tool's traceback must not reach Python's
last-resort handler (stderr); with one, the record still arrives. Each case runs in a fresh
interpreter, since a test process has its own logging set up.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import logging, sys
    import anyio
    from llm_worker import ToolUsePart, Worker, tool
    from llm_worker.testing import ScriptedClient, ScriptedResponse

    if sys.argv[1] == "configured":
        logging.basicConfig(level=logging.ERROR, format="LOGGED %(name)s: %(message)s")

    @tool
    def boom() -> str:
        \"\"\"Fail.\"\"\"
        raise RuntimeError("kaboom")

    async def main() -> None:
        client = ScriptedClient(
            [ScriptedResponse([ToolUsePart("c1", "boom", {})]), ScriptedResponse.text("ok")]
        )
        result = await Worker(client, tools=[boom]).run("go")
        print(result.text, client.requests[1].messages[-1].tool_results[0].is_error)

    anyio.run(main)
    """
)


def run(mode: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok True\n"  # the tool failed, and the model was told
    return done


def test_without_logging_configured_stderr_stays_clean() -> None:
    assert run("bare").stderr == ""


def test_with_logging_configured_the_record_still_arrives() -> None:
    err = run("configured").stderr
    assert "LOGGED llm_worker: tool 'boom' raised on call c1" in err
    assert "RuntimeError: kaboom" in err  # the traceback too
