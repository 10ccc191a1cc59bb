"""No MCP server's token in any text: the canary-key scan of issue 30 item 8 and 31 item 4.

A token given to a stdio server on its command line (`--token KEY`), and a key in an HTTP
server's URL query, are looked for — whole, and as any run of 12 of their characters, case
ignored — in the server's `repr` and name, every exception (its text, `repr`, args, and the
traceback with its chained causes), the request body that carries the fault text to the model
provider, and every record every logger wrote at DEBUG (messages and formatted tracebacks).

Also: a stdio server that fails to start is quoted in the `MCPConnectionError` (its stderr's
last lines, scrubbed), and it gets this process's proxy, certificate and package-index
variables by default.
"""

from __future__ import annotations

import logging
import sys
import traceback
from pathlib import Path

import anyio
import orjson
import pytest

from llm_worker import MCPConnectionError, Worker
from llm_worker.mcp import PASSED_ENV, MCPServer
from llm_worker.messages import ToolUsePart
from llm_worker.testing import ScriptedModelServer, ScriptedResponse, WireResponse, WireServer
from support.mcp_servers import free_port, scripted

pytestmark = pytest.mark.anyio

KEY = "mcp-tok-Canary0123456789abcdefGHIJKL"


def leaks(text: str) -> list[str]:
    lowered, key = text.lower(), KEY.lower()
    return [key[i : i + 12] for i in range(len(key) - 11) if key[i : i + 12] in lowered]


def assert_clean(*texts: object) -> None:
    for text in texts:
        found = leaks(str(text))
        assert not found, f"key material {found[:2]} in {str(text)[:400]!r}"


def assert_error_clean(error: BaseException) -> None:
    assert_clean(str(error), repr(error), *error.args)
    assert_clean("".join(traceback.format_exception(error)))  # every chained cause too


def assert_logs_clean(caplog: pytest.LogCaptureFixture) -> None:
    formatter = logging.Formatter()
    for record in caplog.records:
        assert_clean(record.name, record.getMessage(), formatter.format(record))


@pytest.fixture
def everything(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)  # every logger, the SDK's and httpx's included
    return caplog


# A stdio "server" that says why it cannot start on stderr (echoing its token), then exits.
_FAILS = (
    "import sys\n"
    "print('starting with token ' + sys.argv[2], file=sys.stderr)\n"
    "print('fatal: the package index could not be reached', file=sys.stderr)\n"
    "sys.exit(3)\n"
)


@pytest.mark.parametrize(
    "args",
    [["--token", KEY], [f"--api-key={KEY}"], [f"API_TOKEN={KEY}"], [KEY]],
    ids=["flag-then-value", "flag=value", "NAME=value", "bare-token"],
)
async def test_a_token_on_the_command_line_is_in_no_name_error_or_log(
    args: list[str], everything: pytest.LogCaptureFixture
) -> None:
    command_args = ["-c", _FAILS.replace("sys.argv[2]", "sys.argv[-1]"), *args]
    server = MCPServer.stdio(sys.executable, command_args, init_timeout=10)
    assert_clean(repr(server), server.name)
    assert "***" in server.name and sys.executable in server.name
    with anyio.fail_after(30), pytest.raises(MCPConnectionError) as caught:
        async with server:
            pass
    error = caught.value
    assert_error_clean(error)
    assert_clean(error.server)
    # The server's last stderr lines say why it failed, its token masked.
    assert "fatal: the package index could not be reached" in str(error), str(error)
    tail = str(error).partition("stderr ended with:")[2]
    [said] = [line for line in tail.splitlines() if "starting with token" in line]
    assert said.endswith("***"), said
    assert_logs_clean(everything)
    logged = [r.getMessage() for r in everything.records if r.name == "llm_worker.mcp"]
    assert any("starting with token" in m and m.endswith("***") for m in logged), logged


async def test_the_fault_text_the_model_reads_holds_no_token(
    tmp_path: Path, everything: pytest.LogCaptureFixture
) -> None:
    # The server dies in the middle of the call: the model reads a fault naming the server,
    # whose default name is its command line, token and all.
    command, args = scripted("dies", tmp_path / "log.jsonl")
    server = MCPServer.stdio(command, [*args, "--token", KEY], max_reconnects=0)
    script = [
        ScriptedResponse([ToolUsePart("c1", "echo", {"text": "hi"})]),
        ScriptedResponse.text("done"),
    ]
    async with ScriptedModelServer("openai_chat", script) as model, server:
        worker = Worker(model.client(), tools=[server])
        with anyio.fail_after(30):
            result = await worker.run("call echo")
        bodies = [r.body.decode() for r in model.requests]
    [tool_result] = [p for m in result.messages for p in m.tool_results]
    assert tool_result.is_error and "MCP server" in tool_result.content
    assert_clean(tool_result.content, *bodies)
    assert "***" in orjson.loads(bodies[1])["messages"][-1]["content"]
    assert_logs_clean(everything)


async def test_a_key_in_the_url_query_is_in_no_cause_traceback_or_log_line(
    everything: pytest.LogCaptureFixture,
) -> None:
    port = free_port()  # nothing listens: httpx's error, chained, quoted the URL
    server = MCPServer.http(f"http://127.0.0.1:{port}/mcp?api_key={KEY}", init_timeout=5)
    with anyio.fail_after(30), pytest.raises(MCPConnectionError) as caught:
        async with server:
            pass
    assert_error_clean(caught.value)
    assert_clean(repr(server), server.name)
    assert_logs_clean(everything)
    assert everything.records, "the SDK's DEBUG lines were captured"


async def test_a_key_in_the_url_of_a_server_that_answers_is_in_no_log_line(
    everything: pytest.LogCaptureFixture,
) -> None:
    refuse = WireResponse({"error": "unauthorized"}, status=401, content_type="application/json")
    async with WireServer([refuse] * 4) as http:
        server = MCPServer.http(f"{http.base_url}/mcp?key={KEY}", init_timeout=5)
        with anyio.fail_after(30), pytest.raises(MCPConnectionError) as caught:
            async with server:
                pass
    assert http.requests[0].query["key"] == KEY  # the key was sent
    assert_error_clean(caught.value)
    assert_logs_clean(everything)
    # httpx's INFO request line was written, scrubbed.
    assert [r for r in everything.records if r.name == "httpx"], "httpx logged the request"


# -- the environment a stdio server gets ----------------------------------------------------

_SHOWN = (
    "HTTPS_PROXY",
    "no_proxy",
    "SSL_CERT_FILE",
    "UV_INDEX_URL",
    "UV_NATIVE_TLS",
    "PIP_INDEX_URL",
    "MY_APP_DATABASE_URL",
    "HOME",
)
_PRINTS_ENV = (
    "import json, os, sys\n"
    f"names = {list(_SHOWN)!r}\n"
    "print(json.dumps({n: os.environ[n] for n in names if n in os.environ}), file=sys.stderr)\n"
    "sys.exit(1)\n"
)


async def _server_env(**options: object) -> dict[str, str]:
    server = MCPServer.stdio(sys.executable, ["-c", _PRINTS_ENV], init_timeout=10, **options)  # pyright: ignore[reportArgumentType]
    with anyio.fail_after(30), pytest.raises(MCPConnectionError) as caught:
        async with server:
            pass
    message = str(caught.value)
    tail = message.partition("stderr ended with:")[2]
    return orjson.loads(tail[tail.index("{") : tail.rindex("}") + 1])


async def test_proxy_certificate_and_index_variables_are_passed_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.test:3128")
    monkeypatch.setenv("no_proxy", "localhost")
    monkeypatch.setenv("SSL_CERT_FILE", "/etc/corp/ca.pem")
    monkeypatch.setenv("UV_INDEX_URL", "https://pypi.corp.test/simple")
    monkeypatch.setenv("UV_NATIVE_TLS", "1")
    monkeypatch.setenv("PIP_INDEX_URL", "https://pypi.corp.test/simple")
    monkeypatch.setenv("MY_APP_DATABASE_URL", "postgres://nope")
    env = await _server_env()
    assert env["HTTPS_PROXY"] == "http://proxy.test:3128" and env["no_proxy"] == "localhost"
    assert env["SSL_CERT_FILE"] == "/etc/corp/ca.pem"
    assert env["UV_INDEX_URL"] == env["PIP_INDEX_URL"] == "https://pypi.corp.test/simple"
    assert env["UV_NATIVE_TLS"] == "1"
    assert "MY_APP_DATABASE_URL" not in env  # the rest of the environment stays here
    assert "HOME" in env  # the SDK's safe set
    assert {"HTTPS_PROXY", "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS"} <= set(PASSED_ENV)


async def test_env_wins_and_pass_env_false_passes_only_the_safe_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.test:3128")
    env = await _server_env(env={"HTTPS_PROXY": "http://other.test:8080"})
    assert env["HTTPS_PROXY"] == "http://other.test:8080"
    env = await _server_env(pass_env=False)
    assert "HTTPS_PROXY" not in env and "HOME" in env


async def test_a_proxy_password_passed_on_is_masked_in_what_the_server_says(
    monkeypatch: pytest.MonkeyPatch, everything: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", f"http://user:{KEY}@proxy.test:3128")
    server = MCPServer.stdio(sys.executable, ["-c", _PRINTS_ENV], init_timeout=10)
    with anyio.fail_after(30), pytest.raises(MCPConnectionError) as caught:
        async with server:
            pass
    assert "HTTPS_PROXY" in str(caught.value)
    assert_error_clean(caught.value)
    assert_logs_clean(everything)
