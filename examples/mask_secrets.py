"""Mask secrets in tool results with an after_tool_call hook.

An after_tool_call hook sees each result before the model does, and may rewrite
`ctx.result.content` — what the model reads and what the history keeps. Here it replaces
passwords in URLs and API keys with `***`, so they never reach the provider.

Note: with a blob store, a large output is stored as the tool returned it, before this hook
runs. The hook masks its summary, and also what the model later reads of it with `inspect`
(inspect's results pass through after_tool_call too), but the stored original keeps the
secrets: mask inside the tool when they must not reach the disk either.

Run: `python examples/mask_secrets.py` (offline unless an API key is set; see _common.py).
"""

from __future__ import annotations

import re

import anyio
from _common import model

from llm_worker import TextPart, ToolUsePart, Worker, tool
from llm_worker.hooks import ToolResultContext
from llm_worker.testing import ScriptedResponse

# Each pattern with its replacement: keep the name, hide the value.
SECRETS = [
    (re.compile(r"(://[^:/@\s]+:)[^@\s]+(@)"), r"\1***\2"),  # user:password@ in a URL
    (re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}"), "***"),  # API keys
    (re.compile(r"(?im)^(\w*(?:PASSWORD|SECRET|TOKEN)\w*=).+$"), r"\1***"),  # NAME_PASSWORD=…
]


@tool(effect="read_only")
def read_config(name: str) -> str:
    """Read an application's configuration file."""
    return (
        f"# {name}.env\n"
        "DATABASE_URL=postgres://admin:hunter2@db.internal:5432/shop\n"
        "OPENAI_API_KEY=sk-proj-4f9aX2kLm8Qz7Rt1Vb6Nc3\n"
        "SMTP_PASSWORD=correct-horse-battery\n"
        "DEBUG=false\n"
    )


def mask(text: str) -> tuple[str, int]:
    count = 0
    for pattern, replacement in SECRETS:
        text, n = pattern.subn(replacement, text)
        count += n
    return text, count


async def mask_secrets(ctx: ToolResultContext) -> None:
    masked, count = mask(ctx.result.content)
    if count:
        ctx.result.content = masked
        print(f"after_tool_call: masked {count} secrets in {ctx.call.name}'s result")
    # Returning None means Continue: the (edited) result goes on to the model.


SCRIPT = [
    ScriptedResponse([ToolUsePart("", "read_config", {"name": "shop"})]),
    ScriptedResponse(
        [
            TextPart(
                "The shop uses a Postgres database at db.internal, an OpenAI key and SMTP; "
                "debug mode is off. The credentials were masked before I saw them."
            )
        ]
    ),
]
RAW = ("hunter2", "sk-proj-4f9aX2kLm8Qz7Rt1Vb6Nc3", "correct-horse-battery")


async def main() -> None:
    async with model(SCRIPT) as (client, server):
        worker = Worker(client, tools=[read_config])
        worker.add_after_tool_call_hook(mask_secrets)
        result = await worker.run("What does the shop's configuration set up?")
        print(f"model: {result.text}")
        print("what the history keeps of the tool result:")
        for message in worker.history:
            for part in message.tool_results:
                print("  " + part.content.replace("\n", "\n  ").rstrip())
        if server is not None:
            sent = b"".join(r.body for r in server.requests).decode()
            leaked = [s for s in RAW if s in sent]
            print(f"secrets that reached the model: {leaked or 'none'}")


if __name__ == "__main__":
    anyio.run(main)
