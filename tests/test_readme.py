"""README.md tells the truth: each Python snippet runs, as written, against a scripted model.

The snippets are read out of README.md itself and run with top-level `await`; only the real
provider client is swapped for `ScriptedModelServer(...).client()` (a real client on a local
wire), so a README edit that breaks a snippet breaks this test. The commands and files the
README names are checked too.
"""

from __future__ import annotations

import ast
import gc
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import anyio
import pytest

from llm_worker import Decision, PauseState, RunStatus, ToolUsePart, UsageEvent, tool
from llm_worker.testing import (
    RecordedRequest,
    ScriptedClient,
    ScriptedModelServer,
    ScriptedRequest,
    ScriptedResponse,
)
from support.wire_bodies import WireResult, exchanges

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
SNIPPETS: list[str] = re.findall(r"```python\n(.*?)```", README, re.DOTALL)
TIMEOUT = 10.0
PROVIDER = "anthropic"
BLOB = re.compile(r"\[blob:([0-9a-f-]{36})\]")


def snippet(number: int, swaps: dict[str, str] | None = None) -> str:
    """README's Python snippet `number` (0-based), with `swaps` applied (each must apply)."""
    code = SNIPPETS[number]
    for old, new in (swaps or {}).items():
        assert old in code, f"README snippet {number} no longer contains {old!r}"
        code = code.replace(old, new)
    return code


async def run(code: str, namespace: dict[str, Any], *, bound: float = TIMEOUT) -> dict[str, Any]:
    """Run a snippet as a module with top-level `await` (as `python -m asyncio` would)."""
    compiled = compile(code, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    outcome = eval(compiled, namespace)  # the README's own code, nothing else
    if outcome is not None:
        with anyio.fail_after(bound):
            await outcome
    return namespace


def last_results(request: RecordedRequest) -> list[WireResult]:
    """The tool results the last step of a request's conversation carries."""
    return exchanges(PROVIDER, request.json())[-1].results


def test_the_readme_has_the_snippets_these_tests_run() -> None:
    # A new snippet needs a test here; a removed one needs its test removed.
    assert len(SNIPPETS) == 18


@pytest.mark.anyio
async def test_stream_events_with_a_timeline_handler(capsys: pytest.CaptureFixture[str]) -> None:
    answer = ScriptedResponse.text("Hello! How can I help?", chunk_size=5)
    async with ScriptedModelServer(PROVIDER, [answer]) as server:
        code = snippet(0, {'AnthropicClient(model="claude-sonnet-4-5")': "__server__.client()"})
        namespace = await run(code, {"__server__": server})
        await namespace["client"].aclose()
    assert capsys.readouterr().out == "Hello! How can I help?\n[22 characters, stop: end_turn]\n"
    assert server.requests[0].json()["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Hello!"}]}
    ]


def weather_answer(call: ScriptedRequest) -> ScriptedResponse:
    [result] = call.tool_results
    return ScriptedResponse.text(f"The tool says: {result.content}")


def leaked_sockets() -> list[str]:
    """The ResourceWarnings that collecting the garbage now raises (unclosed sockets)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    return [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


@pytest.mark.anyio
async def test_a_tool_and_a_worker(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = [
        ScriptedResponse([ToolUsePart("", "get_weather", {"city": "Kyoto"})]),
        weather_answer,
    ]
    async with ScriptedModelServer(PROVIDER, script) as server:
        # The snippet as written, its model string included: only the API's address differs.
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-readme")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        namespace = await run(snippet(1), {})
        del namespace["worker"]
        assert leaked_sockets() == []  # `async with Worker(...)` closed the client it made
    result = namespace["result"]
    assert result.status is RunStatus.FINISHED
    assert result.text == "The tool says: Sunny in Kyoto"
    assert result.usage.output_tokens > 0
    assert capsys.readouterr().out.startswith("The tool says: Sunny in Kyoto UsageEvent(")
    meta = namespace["get_weather"].meta
    assert (meta.effect, meta.description) == ("read_only", "Get the current weather of a city.")
    [spec] = server.requests[0].json()["tools"]
    assert spec["input_schema"]["properties"]["city"]["description"] == "The city's name."


@pytest.mark.anyio
async def test_stream_a_run(capsys: pytest.CaptureFixture[str]) -> None:
    from llm_worker import Worker

    @tool(effect="read_only")
    async def get_weather(city: str) -> str:
        """Get the current weather of a city."""
        return f"Sunny in {city}"

    calls = [ToolUsePart("", "get_weather", {"city": c}) for c in ("Kyoto", "Oslo")]
    answer = ScriptedResponse.text("Sunny in both.", chunk_size=5)
    async with ScriptedModelServer(PROVIDER, [ScriptedResponse(list(calls)), answer]) as server:
        client = server.client()
        worker = Worker(client, tools=[get_weather])
        namespace = await run(snippet(2), {"worker": worker})
        await client.aclose()
    assert namespace["stream"].result.text == "Sunny in both."
    assert capsys.readouterr().out == (
        "\n→ get_weather({'city': 'Kyoto'})\n"
        "\n→ get_weather({'city': 'Oslo'})\n"
        "← Sunny in Kyoto\n"
        "← Sunny in Oslo\n"
        "Sunny in both.\n"
        "finished, 2 requests\n"
    )


def test_a_model_string_names_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_worker import Worker
    from llm_worker.providers import AnthropicClient

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-readme")
    worker = Worker("anthropic:claude-sonnet-4-5")
    assert isinstance(worker.client, AnthropicClient)
    assert worker.client.model == "claude-sonnet-4-5"
    assert "sk-ant-readme" not in repr(worker.client)


@pytest.mark.anyio
async def test_hooks_block_a_tool_and_mask_secrets() -> None:
    from llm_worker import Worker

    ran: list[str] = []

    @tool
    async def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"

    @tool
    async def read_config() -> str:
        """Read the configuration."""
        return "user=admin\npassword=hunter2"

    first = ScriptedResponse(
        [ToolUsePart("", "delete_file", {"path": "db.sqlite"}), ToolUsePart("", "read_config", {})]
    )
    async with ScriptedModelServer(PROVIDER, [first, ScriptedResponse.text("OK.")]) as server:
        client = server.client()
        worker = Worker(client, tools=[delete_file, read_config])
        await run(snippet(3), {"worker": worker})
        with anyio.fail_after(TIMEOUT):
            result = await worker.run("Clean up and show the config.")
        await client.aclose()
    assert result.text == "OK."
    assert ran == []
    deleted, config = last_results(server.requests[1])
    assert deleted.is_error
    assert "deleting is not allowed" in deleted.output
    assert config.output == "user=admin\npassword=***"
    assert b"hunter2" not in server.requests[1].body


@pytest.mark.anyio
async def test_pause_for_a_person_and_resume(tmp_path: Path) -> None:
    paid: list[str] = []

    @tool
    async def pay(invoice: str) -> str:
        """Pay an invoice."""
        paid.append(invoice)
        return f"{invoice} paid"

    script = [
        ScriptedResponse([ToolUsePart("", "pay", {"invoice": "INV-7"})]),
        ScriptedResponse.text("Paid."),
    ]
    async with ScriptedModelServer(PROVIDER, script) as server:
        client = server.client()
        namespace = await run(snippet(4), {"client": client, "pay": pay})
        await client.aclose()
    assert namespace["result"].status is RunStatus.FINISHED
    assert namespace["result"].text == "Paid."
    assert paid == ["INV-7"]
    [result] = last_results(server.requests[1])
    assert result.output == "INV-7 paid"

    # The prose after the snippet: decisions instead of the hook.
    [inline] = re.findall(r"`(worker\.resume\(state, decisions=.*?)`", README, re.DOTALL)
    state = PauseState.from_json(namespace["saved"])
    async with ScriptedModelServer(PROVIDER, [ScriptedResponse.text("Done.")]) as server:
        client = server.client()
        worker = namespace["Worker"](client, tools=[pay])
        scope = {"worker": worker, "state": state, "Decision": Decision}
        with anyio.fail_after(TIMEOUT):
            decided = await eval(" ".join(inline.split()), scope)  # README's inline code
        await client.aclose()
    assert decided.text == "Done."
    assert paid == ["INV-7", "INV-7"]


def stored_answer(call: ScriptedRequest) -> ScriptedResponse:
    [summary] = call.tool_results
    match = BLOB.search(summary.content)
    assert match is not None, summary.content
    return ScriptedResponse(
        [ToolUsePart("", "inspect", {"blob_id": match.group(1), "selector": "lines:20-50"})]
    )


@pytest.mark.anyio
async def test_large_outputs_are_stored_summarised_inspected_and_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the snippet's FsBlobStore("blobs") is relative

    @tool(effect="read_only")
    async def search(query: str) -> str:
        """Search the logs."""
        return "".join(f"hit {n:03d} for {query}: token hunter2\n" for n in range(1, 121))

    async def mask(ctx: Any) -> None:
        ctx.result.content = ctx.result.content.replace("hunter2", "***")

    script = [
        ScriptedResponse([ToolUsePart("", "search", {"query": "errors"})]),
        stored_answer,
        ScriptedResponse.text("Found them."),
    ]
    async with ScriptedModelServer(PROVIDER, script) as server:
        client = server.client()
        namespace = await run(snippet(5), {"client": client, "search": search})
        worker = namespace["worker"]
        worker.add_after_tool_call_hook(mask)
        with anyio.fail_after(TIMEOUT):
            result = await worker.run("Find the errors.")
        await client.aclose()
    assert result.text == "Found them."
    [summary] = last_results(server.requests[1])
    assert len(summary.output.encode()) <= 400
    assert "hit 001 for errors: token ***" in summary.output
    [inspected] = last_results(server.requests[2])
    assert "hit 020 for errors: token ***" in inspected.output
    assert "hit 050" in inspected.output
    assert "hit 051" not in inspected.output
    assert all(b"hunter2" not in r.body for r in server.requests)
    # One blob file, beside the store's id key (a dot file).
    [blob] = [p for p in (tmp_path / "blobs").rglob("*") if p.is_file() and p.name[0] != "."]
    assert "hit 120 for errors: token hunter2" in blob.read_text()  # the raw output is kept


@pytest.mark.anyio
async def test_images_and_documents_in_the_prompt_and_from_a_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from support.media import PDF, png

    monkeypatch.chdir(tmp_path)  # the snippet reads mockup.png and spec.pdf from here
    (tmp_path / "mockup.png").write_bytes(png(2, 2))
    (tmp_path / "spec.pdf").write_bytes(PDF)
    script = [
        ScriptedResponse([ToolUsePart("", "screenshot", {})]),
        ScriptedResponse.text("They match."),
    ]
    async with ScriptedModelServer(PROVIDER, script) as server:
        client = server.client()
        namespace = {"client": client, "grab_screen": lambda: png(4, 4)}
        namespace = await run(snippet(7), namespace)
        await client.aclose()
    assert namespace["result"].text == "They match."
    first = server.requests[0].json()["messages"][0]["content"]
    assert [block["type"] for block in first] == ["text", "image", "document"]
    [result] = [
        block
        for block in server.requests[1].json()["messages"][-1]["content"]
        if block["type"] == "tool_result"
    ]
    assert [block["type"] for block in result["content"]] == ["text", "image"]


@pytest.mark.anyio
async def test_blobs_in_an_object_store(moto_server: Any) -> None:
    from llm_worker.blobs import ObjectBlobStore
    from support.blob_stores import BUCKET
    from support.object_store import s3_options

    @tool(effect="read_only")
    async def search(query: str) -> str:
        """Search the logs."""
        return "".join(f"hit {n:03d} for {query}\n" for n in range(1, 121))

    script = [
        ScriptedResponse([ToolUsePart("", "search", {"query": "errors"})]),
        stored_answer,
        ScriptedResponse.text("Found them."),
    ]
    swaps = {'"s3://my-bucket/blobs", region="eu-west-1"': f'"s3://{BUCKET}/readme", **__s3__'}
    async with ScriptedModelServer(PROVIDER, script) as server:
        client = server.client()
        namespace = {"client": client, "search": search, "__s3__": s3_options(moto_server.endpoint)}
        namespace = await run(snippet(6, swaps), namespace)
        with anyio.fail_after(TIMEOUT):
            result = await namespace["worker"].run("Find the errors.")
        await client.aclose()
    assert result.text == "Found them."
    [summary] = last_results(server.requests[1])
    [inspected] = last_results(server.requests[2])
    assert "hit 020 for errors" in inspected.output and "hit 051" not in inspected.output
    blob_id = BLOB.search(summary.output)
    reader = ObjectBlobStore.from_url(f"s3://{BUCKET}/readme", **s3_options(moto_server.endpoint))
    assert blob_id is not None and await reader.exists(blob_id.group(1))


@pytest.mark.anyio
async def test_the_aiohttp_transport_snippet(monkeypatch: pytest.MonkeyPatch) -> None:
    import aiohttp

    from llm_worker.providers import AnthropicClient, OpenAIChatClient

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    code = snippet(13)
    assert 'transport="aiohttp"' in code
    namespace = await run(
        code,
        {
            "aiohttp": aiohttp,
            "AnthropicClient": AnthropicClient,
            "OpenAIChatClient": OpenAIChatClient,
        },
    )
    # Both clients are on aiohttp: one by name, one by the session it was given.
    assert namespace["client"].transport.transport == "aiohttp"
    assert namespace["session"].closed  # the snippet's `async with` closed it, not the client


def test_every_file_the_readme_names_exists() -> None:
    named = re.findall(r"`((?:docs|examples|tests|\.ci)/[\w./-]+)`", README)
    named += [f"examples/{name}" for name in re.findall(r"^\| `(\w+\.py)` \|", README, re.M)]
    assert len(named) >= 10
    for path in named:
        assert (ROOT / path).exists(), path


def resolve(name: str) -> object:
    """`Worker.resume`, `providers.RetryPolicy`, `llm_worker.hooks`… as found in the package."""
    import importlib

    import llm_worker

    target: object = llm_worker
    path = "llm_worker"
    for part in name.removeprefix("llm_worker.").split("."):
        path += f".{part}"
        try:
            target = getattr(target, part)
        except AttributeError:
            target = importlib.import_module(path)
    return target


def test_every_name_in_the_feature_table_exists() -> None:
    table = README.split("## What it does", 1)[1].split("## A short tour", 1)[0]
    names = set(re.findall(r"`([\w.]+)`", table)) - {"inspect"}  # the model's tool, not Python
    assert len(names) >= 12
    for name in sorted(names):
        assert resolve(name) is not None, name


def test_every_client_in_the_providers_table_exists() -> None:
    from llm_worker import providers

    table = README.split("## Providers", 1)[1].split("## Command line", 1)[0]
    rows = re.findall(r"^\| `([\w-]+):([\w.-]+)` \| `(\w+)`", table, re.M)
    assert len(rows) == 4
    for prefix, model, client_name in rows:
        client = providers.from_string(f"{prefix}:{model}", api_key="test-key")
        assert type(client) is getattr(providers, client_name)


@pytest.mark.parametrize("command", ["demo", "chat", "run"])
def test_every_cli_command_the_readme_shows_answers_help(command: str) -> None:
    assert f"uv run llm-worker {command}" in README
    exe = shutil.which("llm-worker", path=str(Path(sys.executable).parent))
    assert exe is not None
    done = subprocess.run(
        [exe, command, "--help"], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    options: list[str] = []
    for line in re.findall(rf"uv run llm-worker {command}\b(.*)", README):
        options += re.findall(r"(--[\w-]+)", line)
    if command == "demo":  # the Quick start's prose names the demo's options
        quick_start = README.split("## Quick start", 1)[1].split("## What it does", 1)[0]
        options += re.findall(r"(--[\w-]+)", quick_start)
    for option in options:
        assert option in done.stdout, f"{command} --help does not show {option}"


@pytest.mark.anyio
async def test_durable_runs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    @tool
    def book_hotel(city: str) -> str:
        """Book a hotel."""
        return f"booked in {city}"

    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        return f"paid {amount}"

    script = [
        ScriptedResponse([ToolUsePart("b1", "book_hotel", {"city": "Kyoto"})]),
        ScriptedResponse.text("Booked."),
        ScriptedResponse([ToolUsePart("p1", "pay", {"amount": 100})]),
        ScriptedResponse.text("Paid."),
    ]
    database = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    async with ScriptedModelServer(PROVIDER, script) as server, server.client() as client:
        code = snippet(10, {"sqlite:///runs.sqlite": database})
        # DBOS launches, and a durable run records each step: 10 s is tight on a busy machine.
        namespace = await run(
            code, {"client": client, "book_hotel": book_hotel, "pay": pay}, bound=60.0
        )
        assert len(server.requests) == 4  # the second start of trip-42 asked nothing
    assert namespace["result"].text == namespace["again"].text == "Booked."
    assert namespace["paid"].text == "Paid."
    assert capsys.readouterr().out.splitlines()[-4:] == [
        "answer",
        "paused",
        "tool_result",
        "answer",
    ]


@pytest.mark.anyio
async def test_structured_output(capsys: pytest.CaptureFixture[str]) -> None:
    script = [
        ScriptedResponse.text('{"number": "INV-7", "total": 12.5}'),
        ScriptedResponse.text('{"number": "INV-8", "total": 3}', chunk_size=2),
    ]
    async with ScriptedModelServer(PROVIDER, script) as server:
        client = server.client()
        namespace = await run(snippet(8), {"client": client})
        await client.aclose()
    invoice = namespace["invoice"]
    assert (invoice.number, invoice.total) == ("INV-7", 12.5)
    assert namespace["stream"].result.output.number == "INV-8"
    assert capsys.readouterr().out.strip().endswith("number='INV-8' total=3.0")
    body = server.requests[0].json()
    assert body["output_config"]["format"]["schema"]["required"] == ["number", "total"]


def says_the_time(call: ScriptedRequest) -> ScriptedResponse:
    [result] = call.tool_results
    return ScriptedResponse.text(f"In Tokyo: {result.content}")


@pytest.mark.anyio
async def test_mcp_tools_in_a_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    call = ToolUsePart("", "time_get_current_time", {"timezone": "Asia/Tokyo"})
    script = [ScriptedResponse([call]), says_the_time]
    async with ScriptedModelServer(PROVIDER, script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-readme")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        # uvx would fetch the server from PyPI: the dev group has it installed instead.
        local = f'{sys.executable!r}, ["-m", "mcp_server_time", "--local-timezone", "UTC"]'
        code = snippet(12, {'"uvx", ["mcp-server-time"]': local})
        namespace = await run(code, {})
    result = namespace["result"]
    assert result.status is RunStatus.FINISHED
    assert '"timezone":"Asia/Tokyo"' in result.text.replace(" ", "")


@pytest.mark.anyio
async def test_tracing_to_the_console_and_the_cost(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from decimal import Decimal

    @tool(effect="read_only")
    async def get_weather(city: str) -> str:
        """Get the current weather of a city."""
        return f"Sunny in {city}"

    usage = UsageEvent(input_tokens=420, output_tokens=38)
    call = ScriptedResponse([ToolUsePart("", "get_weather", {"city": "Kyoto"})], usage=usage)
    answer = ScriptedResponse.text("Sunny.", usage=UsageEvent(input_tokens=480, output_tokens=14))
    model = "claude-sonnet-4-5"
    async with ScriptedModelServer(PROVIDER, [call, answer], model=model) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-readme")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        # The exporter's default `out` is the sys.stdout of when the SDK was first imported
        # (maybe before this test's capture began): hand it the current one.
        swaps = {"ConsoleSpanExporter()": "ConsoleSpanExporter(out=__stdout__)"}
        namespace = await run(
            snippet(11, swaps), {"get_weather": get_weather, "__stdout__": sys.stdout}
        )
    out = capsys.readouterr().out
    names = re.findall(r'^    "name": "(.*)",$', out, re.MULTILINE)
    chat = f"chat {model}"
    assert names == [chat, "execute_tool get_weather", chat, "invoke_agent weather"]
    assert '"gen_ai.response.finish_reasons": [\n            "tool_call"\n        ]' in out
    assert '"gen_ai.usage.input_tokens": 420' in out
    # $3 / M input and $15 / M output tokens: (900 * 3 + 52 * 15) / 1e6
    assert namespace["result"].cost == Decimal("0.00348")


@pytest.mark.anyio
async def test_testing_your_agent_records_then_replays(tmp_path: Path) -> None:
    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"{city}: 21 °C"

    code = next(s for s in SNIPPETS if "Cassette(" in s)
    path = tmp_path / "weather.jsonl"
    model = 'cassette.client("anthropic:claude-sonnet-4-5")'
    answers = [
        ScriptedResponse([ToolUsePart("", "get_weather", {"city": "Kyoto"})]),
        ScriptedResponse.text("21 °C in Kyoto."),
    ]
    async with ScriptedModelServer(PROVIDER, answers) as server:
        swaps = {
            "tests/cassettes/weather.jsonl": str(path),
            model: model[:-1] + f', base_url="{server.base_url}", api_key="sk-ant-readme")',
        }
        for old, new in swaps.items():
            assert old in code
            code = code.replace(old, new)
        live = await run(code, {"get_weather": get_weather})
    assert len(server.requests) == 2 and "sk-ant-readme" not in path.read_text()
    replayed = await run(code, {"get_weather": get_weather})  # the model is gone
    assert replayed["result"].messages == live["result"].messages
    assert replayed["result"].text == "21 °C in Kyoto."


@pytest.mark.anyio
async def test_long_runs_catalog_counting_and_policy(capsys: pytest.CaptureFixture[str]) -> None:
    from llm_worker.models import model_info, unregister_model
    from llm_worker.testing import ScriptedClient

    [code] = [s for s in SNIPPETS if "ContextPolicy(" in s]  # found by content, not place
    swaps = {'"anthropic:claude-haiku-4-5"': "__summarizer__"}
    for old, new in swaps.items():
        assert old in code
        code = code.replace(old, new)
    summarizer = ScriptedClient(ScriptedResponse.text("A summary."))
    model = "claude-sonnet-4-5"
    script = ScriptedResponse.text("Done.")
    try:
        async with (
            ScriptedModelServer(PROVIDER, script, model=model) as server,
            server.client() as client,
        ):
            await run(code, {"client": client, "__summarizer__": summarizer})
        assert model_info("openai:ft:gpt-4.1-mini:acme").context_window == 1_047_576
    finally:
        unregister_model("openai:ft:gpt-4.1-mini:acme")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "200000 64000 True"
    assert out[1] == "5 provider"  # the scripted count: 17 characters // 4 + 1
    paths = [r.path for r in server.requests]
    assert paths == ["/v1/messages/count_tokens", "/v1/messages"]


@pytest.mark.anyio
async def test_the_fallback_snippet(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from llm_worker.testing import WireResponse, WireServer

    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    down = WireResponse(overloaded, status=529, content_type="application/json")
    answer = ScriptedResponse.text("All quiet.")
    async with (
        WireServer(handler=lambda _: down) as anthropic,
        ScriptedModelServer("gemini", [answer], model="gemini-2.5-pro") as gemini,
    ):
        # The snippet as written, its model strings included: only the APIs' addresses differ.
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-readme")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic.base_url)
        monkeypatch.setenv("GEMINI_API_KEY", "gemini-readme-key")
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", gemini.base_url)
        namespace = await run(snippet(16), {})
        await namespace["pool"].aclose()
    assert namespace["result"].text == "All quiet."
    assert capsys.readouterr().out == "gemini gemini-2.5-pro\n"
    assert "sk-ant-key" not in repr(namespace["client"])


@pytest.mark.anyio
async def test_the_runs_controls(capsys: pytest.CaptureFixture[str]) -> None:
    [code] = [s for s in SNIPPETS if "worker.follow_up(" in s]  # found by content, not place
    script = [
        ScriptedResponse([ToolUsePart("", "get_schema", {})]),
        ScriptedResponse([ToolUsePart("", "query_db", {"sql": "select total from orders"})]),
        ScriptedResponse.text("Order 7: 42."),
        ScriptedResponse.text("Order 8: 17."),
    ]
    async with ScriptedModelServer(PROVIDER, script) as server, server.client() as client:
        await run(code, {"client": client})
    assert capsys.readouterr().out.splitlines() == ["Order 8: 17."]
    offered = [[t["name"] for t in r.json()["tools"]] for r in server.requests]
    assert offered == [["get_schema"]] + [["get_schema", "query_db"]] * 3
    assert "And the total of order 8?" in server.requests[3].body.decode()
    assert "query_db" not in str(server.requests[0].json()["tools"])  # not before the schema


@pytest.mark.anyio
async def test_sub_agents_stream_pause_and_resume_as_one_tree() -> None:
    published: list[str] = []

    @tool(effect="read_only")
    def search(topic: str) -> str:
        """Search."""
        return f"sources on {topic}"

    @tool(requires_approval=True)
    def publish(fact: str) -> str:
        """Publish."""
        published.append(fact)
        return "published"

    def desk(call: ToolUsePart, answer: str) -> Any:
        def step(r: ScriptedRequest) -> ScriptedResponse:
            return ScriptedResponse.text(answer) if r.tool_results else ScriptedResponse([call])

        return ScriptedClient(step)

    clients = {
        "research": desk(ToolUsePart("", "search", {"topic": "clocks"}), "Found."),
        "check": desk(ToolUsePart("", "publish", {"fact": "Lamport 1978"}), "Published."),
        "edit": ScriptedClient(
            lambda r: (
                ScriptedResponse.text("Done.")
                if r.tool_results
                else ScriptedResponse(
                    [
                        ToolUsePart("call_r", "research", {"input": "clocks"}),
                        ToolUsePart("call_c", "check", {"input": "Lamport 1978"}),
                    ]
                )
            )
        ),
    }
    swaps = {
        '"gemini:gemini-2.5-flash"': "clients['research']",
        '"openai-responses:gpt-5-mini"': "clients['check']",
        '"anthropic:claude-sonnet-4-5"': "clients['edit']",
    }
    namespace = {"clients": clients, "search": search, "publish": publish}
    [code] = [s for s in SNIPPETS if ".as_tool(" in s]  # found by content, not place
    for old, new in swaps.items():
        assert old in code
        code = code.replace(old, new)
    namespace = await run(code, namespace)
    result = namespace["result"]
    assert result.status is RunStatus.FINISHED and result.text == "Done."
    assert published == ["Lamport 1978"]
    assert sorted(c.path for c in result.children) == [("call_c",), ("call_r",)]
