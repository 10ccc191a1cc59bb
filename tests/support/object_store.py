"""A real S3 for the tests: moto's server in a subprocess, and a proxy that counts and breaks.

`MotoServer` runs `python -m moto.server` on 127.0.0.1 (a free port, read from its first
line); `FaultProxy` forwards each request to it, counts the bytes of what it answers, and on
request answers 503 SlowDown or drops the connection in the middle of an upload, the faults a
real S3 produces and moto cannot.
"""

from __future__ import annotations

import http.client
import os
import queue
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import httpx

ACCESS_KEY = "AKIAMOTOTESTKEY00001"
SECRET_KEY = "moto-secret-never-shown-0123456789"
Fault = Literal["slowdown", "drop", "denied"]
Rule = Callable[[str, str], Any]


class MotoServer:
    """moto's S3 server in a subprocess on 127.0.0.1; `stop()` ends it."""

    def __init__(self, *, auth: bool = False) -> None:
        env = dict(os.environ)
        if auth:  # every request is checked against moto's IAM: unknown keys are refused
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", "0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        ports: queue.Queue[int] = queue.Queue()
        self._drainer = threading.Thread(target=self._drain, args=(ports,), daemon=True)
        self._drainer.start()
        try:
            port = ports.get(timeout=60)
        except queue.Empty:
            self.stop()
            raise RuntimeError("moto's server did not start within 60 s") from None
        self.endpoint = f"http://127.0.0.1:{port}"

    def _drain(self, ports: queue.Queue[int]) -> None:
        # Reads every line (the request log too): a full pipe would block the server.
        assert self._proc.stderr is not None
        for raw in self._proc.stderr:
            found = re.search(rb"Running on http://127\.0\.0\.1:(\d+)", raw)
            if found:
                ports.put(int(found.group(1)))

    def create_bucket(self, name: str) -> None:
        httpx.put(f"{self.endpoint}/{name}", timeout=10).raise_for_status()

    def stop(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=10)
        self._drainer.join(timeout=10)  # it reads to the end of the pipe, then the pipe closes
        if self._proc.stderr is not None:
            self._proc.stderr.close()


def s3_options(endpoint: str, **extra: Any) -> dict[str, Any]:
    """obstore's options for moto at `endpoint`, with quick retries."""
    from datetime import timedelta

    return {
        "endpoint": endpoint,
        "region": "us-east-1",
        "access_key_id": ACCESS_KEY,
        "secret_access_key": SECRET_KEY,
        "client_options": {"allow_http": True, "timeout": "20s"},
        "retry_config": {
            "max_retries": 3,
            "backoff": {
                "init_backoff": timedelta(milliseconds=10),
                "max_backoff": timedelta(milliseconds=50),
                "base": 2,
            },
            "retry_timeout": timedelta(seconds=20),
        },
        **extra,
    }


class FaultProxy:
    """An HTTP proxy in front of `upstream` that counts bytes answered and injects faults.

    `fail(method, count, fault)` makes the next `count` requests of that method fail with
    `fault`; `bytes_out` counts the body bytes of every answer (what a client fetched).
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.removeprefix("http://")
        self.bytes_out = 0
        self.requests: list[tuple[str, str]] = []
        self._faults: list[tuple[str, Fault]] = []
        self._lock = threading.Lock()
        self.gate: threading.Event | None = None  # set: completing a multipart upload waits
        # Which requests wait at the gate (default: completing a multipart upload).
        self.gate_when: Rule = lambda method, path: method == "POST" and "uploadId=" in path
        self.held = threading.Event()  # a completion is waiting at the gate
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                proxy.handle(self)

            do_PUT = do_POST = do_HEAD = do_DELETE = do_GET

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def fail(self, method: str, count: int, fault: Fault) -> None:
        with self._lock:
            self._faults.extend((method, fault) for _ in range(count))

    @property
    def faults_left(self) -> int:
        """Faults asked for and not yet served."""
        with self._lock:
            return len(self._faults)

    def reset(self) -> None:
        with self._lock:
            self._faults.clear()
            self.bytes_out = 0
            self.requests.clear()

    def _take_fault(self, method: str) -> Fault | None:
        with self._lock:
            for i, (wanted, fault) in enumerate(self._faults):
                if wanted == method:
                    del self._faults[i]
                    return fault
        return None

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        length = int(req.headers.get("Content-Length") or 0)
        with self._lock:
            self.requests.append((req.command, req.path))
        fault = self._take_fault(req.command)
        if fault == "drop":  # read half the body, then hang up
            req.rfile.read(length // 2)
            req.connection.shutdown(socket.SHUT_RDWR)
            req.close_connection = True
            return
        body = req.rfile.read(length) if length else b""
        gate = self.gate
        if gate is not None and self.gate_when(req.command, req.path):
            self.held.set()
            gate.wait(timeout=30)
        if fault == "slowdown":
            self._answer(req, 503, {"Content-Type": "application/xml"}, _SLOW_DOWN)
            return
        if fault == "denied":  # as S3 answers an unknown key: the key id echoed in the body
            key = re.search(r"Credential=([^/]+)/", req.headers.get("Authorization", ""))
            body = _DENIED % (key.group(1) if key else "").encode()
            self._answer(req, 403, {"Content-Type": "application/xml"}, body)
            return
        conn = http.client.HTTPConnection(self.upstream, timeout=60)
        try:
            headers = {k: v for k, v in req.headers.items() if k.lower() != "connection"}
            conn.request(req.command, req.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            kept = {k: v for k, v in resp.getheaders() if k.lower() not in _HOP}
            self._answer(req, resp.status, kept, data, head=req.command == "HEAD")
        finally:
            conn.close()

    def _answer(
        self,
        req: BaseHTTPRequestHandler,
        status: int,
        headers: dict[str, str],
        data: bytes,
        *,
        head: bool = False,
    ) -> None:
        req.send_response(status)
        for key, value in headers.items():
            if key.lower() != "content-length":
                req.send_header(key, value)
        given = {k.lower(): v for k, v in headers.items()}.get("content-length")
        req.send_header("Content-Length", given if head and given else str(len(data)))
        req.end_headers()
        if not head:
            req.wfile.write(data)
            with self._lock:
                self.bytes_out += len(data)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


_HOP = {"connection", "transfer-encoding", "keep-alive"}
_DENIED = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InvalidAccessKeyId</Code>'
    b"<Message>The AWS Access Key Id you provided does not exist in our records.</Message>"
    b"<AWSAccessKeyId>%s</AWSAccessKeyId></Error>"
)
_SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
