"""Review of the MCP secret scrubbing: tokens that look unlike `--token X`, and hostile stderr.

A header handed to a proxy server (`npx mcp-remote URL --header "Authorization: Bearer T"`,
as mcp-remote documents) was shown whole in the name, `repr` and every error; so was a short
token after a credential flag (`--token abc123`), and a token in a URL's fragment
(`#access_token=`). A server's stderr quoted in `MCPConnectionError` kept its ANSI escapes.
"""

from __future__ import annotations

import logging
import sys
import traceback

import anyio
import pytest

from llm_worker import MCPConnectionError
from llm_worker._secrets import Scrubber
from llm_worker.mcp import MCPServer

pytestmark = pytest.mark.anyio

TOKEN = "ghp_Canary0123456789abcdefGHIJKLmn"


@pytest.mark.parametrize(
    ("args", "kept"),
    [
        (
            ["mcp-remote", "https://x.test/mcp", "--header", f"Authorization: Bearer {TOKEN}"],
            "Bearer",
        ),
        (
            ["mcp-remote", "https://x.test/mcp", "--header", f"Authorization:Bearer {TOKEN}"],
            "--header",
        ),
        (["-H", f"X-Api-Key: {TOKEN}"], "X-Api-Key"),
        (["--header", "Authorization:", "Bearer", TOKEN], "Bearer"),
        ([f"https://x.test/cb#access_token={TOKEN}&state=1"], "x.test"),
    ],
    ids=["header-bearer", "header-no-space", "api-key-header", "header-split", "url-fragment"],
)
def test_a_header_or_fragment_token_is_not_in_the_name(args: list[str], kept: str) -> None:
    server = MCPServer.stdio("npx", args)
    for text in (server.name, repr(server)):
        assert TOKEN[4:16] not in text and "***" in text and kept in text, text
    assert server._scrubber.scrub(f"error: sent {TOKEN}") == "error: sent ***"  # pyright: ignore[reportPrivateUsage]


@pytest.mark.parametrize("flag", ["--token", "--password", "--api-key"])
def test_a_short_token_after_a_credential_flag_is_masked_in_the_name(flag: str) -> None:
    server = MCPServer.stdio("srv", ["--user-dir", "/tmp/x", flag, "ab12cd"])
    assert "ab12cd" not in server.name and "ab12cd" not in repr(server)
    # Only that word: the other words of the command line are kept as they are.
    assert server.name == f"srv --user-dir /tmp/x {flag} ***"


def test_a_token_in_an_http_url_fragment_is_scrubbed() -> None:
    url = f"https://x.test/mcp#access_token={TOKEN}"
    server = MCPServer.http(url)
    assert TOKEN not in server.name
    assert server._scrubber.scrub(f"GET {url}") == "GET https://x.test/mcp#access_token=***"  # pyright: ignore[reportPrivateUsage]


# A server that writes hostile stderr (ANSI escapes, invalid UTF-8, a 1 MB line) and exits.
_HOSTILE = (
    "import sys\n"
    "err = sys.stderr.buffer\n"
    "err.write(b'\\x1b[2J\\x1b]0;owned\\x07red \\x1b[31mal' + b'ert\\x1b[0m\\n')\n"
    "err.write(b'bad utf-8 \\xff\\xfe\\xc3 e' + b'nd\\n')\n"
    "err.write(b'z' * 1_000_000 + b'\\n')\n"
    "err.write(b'fatal: cannot start\\n')\n"
    "err.flush()\n"
    "sys.exit(3)\n"
)


async def test_hostile_stderr_is_quoted_printable_and_bounded() -> None:
    server = MCPServer.stdio(sys.executable, ["-c", _HOSTILE], init_timeout=10)
    with anyio.fail_after(30), pytest.raises(MCPConnectionError) as caught:
        async with server:
            pass
    text = str(caught.value)
    assert "fatal: cannot start" in text
    assert "\x1b" not in text and "\x07" not in text, repr(text[:300])
    tail = text.partition("stderr ended with:")[2]
    # The lines before the 1 MB one are still quoted: that line is kept once, cut short.
    assert "red ?[31malert?[0m" in tail and "bad utf-8 \ufffd\ufffd\ufffd end" in tail, tail[:400]
    assert tail.count("z" * 500) == 1 and len(tail) < 20 * 510, len(tail)


# A server that echoes its short token on stderr, then exits.
_ECHOES = (
    "import sys\nprint('auth with ' + sys.argv[-1] + ' failed', file=sys.stderr)\nsys.exit(3)\n"
)


async def test_a_short_token_is_masked_in_stderr_errors_and_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    server = MCPServer.stdio(sys.executable, ["-c", _ECHOES, "--token", "ab12cd"], init_timeout=10)
    with anyio.fail_after(30), pytest.raises(MCPConnectionError) as caught:
        async with server:
            pass
    text = "".join(traceback.format_exception(caught.value))
    assert "auth with *** failed" in text and "ab12cd" not in text, text
    logged = [r.getMessage() for r in caplog.records]
    assert any("auth with *** failed" in m for m in logged), logged
    assert not [m for m in logged if "ab12cd" in m]


def test_a_short_secret_is_masked_only_as_a_whole_word() -> None:
    scrub = Scrubber(["ab12"], words=["ab12", "xy"]).scrub
    assert (
        scrub("key ab12, not ab123 or xab12; xy stays") == "key ***, not ab123 or xab12; xy stays"
    )


SHORT_TOKEN = "tok-Abcdefghij0123456"  # 21 characters: no run of 12 on both sides of a cut


@pytest.mark.parametrize("before", [8192 - 10, 8192 - 3, 8192 + 8192 - 12])
async def test_a_token_cut_between_two_pieces_of_a_long_line_is_masked(
    before: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="llm_worker.mcp")
    script = (
        "import sys\n"
        f"sys.stderr.write('\u00e9' * 3 + 'x' * {before - 6} + sys.argv[-1] + 'y' * 9000 + '\\n')\n"
        "sys.exit(3)\n"
    )
    server = MCPServer.stdio(
        sys.executable, ["-c", script, "--token", SHORT_TOKEN], init_timeout=10
    )
    with anyio.fail_after(30), pytest.raises(MCPConnectionError):
        async with server:
            pass
    logged = "".join(
        r.getMessage().partition("] ")[2] for r in caplog.records if r.name == "llm_worker.mcp"
    )
    key = SHORT_TOKEN.lower()
    runs = [key[i : i + 8] for i in range(len(key) - 7) if key[i : i + 8] in logged.lower()]
    assert not runs, runs
    assert "***" in logged and "\ufffd" not in logged  # whole characters on either side
