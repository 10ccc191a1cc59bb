"""A tiny MCP server over stdio (stdlib only) that misbehaves on request, for fault tests.

Usage: scripted_server.py MODE [LOG]. MODE: `normal`; `silent` (never answers `initialize`);
`malformed` (answers a tools/call with bytes that are not JSON-RPC); `dies` (exits in the
middle of every tools/call); `dies-once` (exits in the middle of the first tools/call of all
its runs, which LOG remembers). Notifications it receives (`notifications/cancelled`) are
appended to LOG as JSON lines.

Tools: `echo` (read-only), `slow` (answers after 60 s, reporting progress first),
`add_tool` (adds the tool `extra` and sends `notifications/tools/list_changed`).
"""

import base64
import json
import os
import sys
import threading

MODE = sys.argv[1]
LOG = sys.argv[2] if len(sys.argv) > 2 else None
_lock = threading.Lock()
_tools = ["echo", "slow", "add_tool"]
_READ_ONLY = {"readOnlyHint": True}


def send(message: dict) -> None:
    with _lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def log(entry: dict) -> None:
    if LOG:
        with open(LOG, "a") as f:
            f.write(json.dumps(entry) + "\n")


def tool_listing(name: str) -> dict:
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    annotations = _READ_ONLY if name in ("echo", "extra") else {"destructiveHint": True}
    return {
        "name": name,
        "description": f"The {name} tool.",
        "inputSchema": schema,
        "annotations": annotations,
    }


def text_result(request_id: object, text: str) -> None:
    send(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {"content": [{"type": "text", "text": text}]},
        }
    )


def slow(request_id: object, params: dict) -> None:
    token = params.get("_meta", {}).get("progressToken")
    if token is not None:
        send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": token, "progress": 1, "total": 3, "message": "working"},
            }
        )
    threading.Event().wait(60)
    text_result(request_id, "slow done")


def died_before() -> bool:
    return LOG is not None and os.path.exists(LOG + ".died")


def call(request_id: object, params: dict) -> None:
    if MODE == "dies" or (MODE == "dies-once" and not died_before()):
        if LOG:
            open(LOG + ".died", "w").close()
        os._exit(3)
    if MODE == "malformed":
        sys.stdout.write("{this is not json-rpc\n")
        sys.stdout.flush()
        return
    name = params.get("name")
    if name == "slow":
        threading.Thread(target=slow, args=(request_id, params), daemon=True).start()
    elif name == "add_tool":
        if "extra" not in _tools:
            _tools.append("extra")
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        text_result(request_id, "added")
    elif name == "echo" and str(params.get("arguments", {}).get("text", "")).startswith("!"):
        hostile(request_id, params["arguments"]["text"][1:])
    else:
        text_result(request_id, f"{name}: {params.get('arguments', {}).get('text', '')}")


_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9"
    "awAAAABJRU5ErkJggg=="
)


def png_of_base64_size(size: int) -> str:
    """A PNG (a real header, then zeros) whose base64 is `size` characters (a multiple of 4)."""
    raw = base64.b64decode(_PNG)
    return base64.b64encode(raw + bytes(size * 3 // 4 - len(raw))).decode()


def hostile(request_id: object, what: str) -> None:
    """`echo` with text `!WHAT`: a result built to test the client (big, bad blocks)."""
    kind, _, size = what.partition(":")
    if kind == "hang":
        return
    if kind == "hugeimg":
        image = {"type": "image", "data": png_of_base64_size(int(size)), "mimeType": "image/png"}
        send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [image]}})
        return
    blocks = {
        "big": [{"type": "text", "text": "x" * int(size or 0)}],
        "bigimg": [
            {"type": "text", "text": "y" * int(size or 0)},
            {"type": "image", "data": _PNG, "mimeType": "image/png"},
        ],
        "bigerr": [{"type": "text", "text": "z" * int(size or 0)}],
        "badblock": [{"type": "video", "data": "AAAA"}],
        "badimg": [{"type": "image", "data": "not base64 at all!!", "mimeType": "image/png"}],
        "svg": [{"type": "image", "data": "PHN2Zy8+", "mimeType": "image/svg+xml"}],
        "notcontent": "a string where a list belongs",
    }[kind]
    result = {"content": blocks, "isError": kind == "bigerr"}
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def handle(message: dict) -> None:
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        log({"notification": method, "params": message.get("params")})
    elif method == "initialize":
        if MODE == "silent":
            return
        send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "result": {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {"listChanged": True}},
                    "serverInfo": {"name": "scripted", "version": "1"},
                },
            }
        )
    elif method == "tools/list":
        names = _tools + (["a.b", "a_b", "\u5de5\u5177", ""] if MODE == "clash" else [])
        listing = [tool_listing(n) for n in names]
        send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": listing}})
    elif method == "tools/call":
        log({"request": "tools/call", "id": request_id, "name": message["params"].get("name")})
        call(request_id, message["params"])
    else:
        send({"jsonrpc": "2.0", "id": request_id, "result": {}})


for line in sys.stdin:
    if line.strip():
        handle(json.loads(line))
