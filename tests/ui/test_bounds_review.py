"""Review probes of the request bounds: hostile bodies the count of `{` let through, the
margin a legitimate body needs, and the caps at their exact values on both adapters."""

from __future__ import annotations

import types
from typing import Any

import anyio
import httpx
import orjson
import pytest

from llm_worker.ui import AGUIAdapter, VercelAIAdapter
from llm_worker.ui import _asgi as asgi  # pyright: ignore[reportPrivateUsage]

from .conftest import serve
from .test_bounds import agui_body, vercel_body

pytestmark = pytest.mark.anyio

ADAPTERS = [VercelAIAdapter, AGUIAdapter]


class Decodes:
    """Counts the bodies the adapters decode (the decoding holds the GIL: the cost)."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def loads(self, body: bytes | bytearray) -> Any:
        self.sizes.append(len(body))
        return orjson.loads(body)


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> Decodes:
    spy = Decodes()
    fake = types.SimpleNamespace(
        loads=spy.loads, dumps=orjson.dumps, JSONDecodeError=orjson.JSONDecodeError
    )
    monkeypatch.setattr(asgi, "orjson", fake)
    return spy


def hostile(kind: str) -> bytes:
    """A body under the 32 MiB cap with a single `{`, whose decoding builds millions of
    values (empty lists: 8.4 s with the GIL held on a busy host)."""
    count = {"lists": 10_000_000, "ints": 15_000_000, "keys": 1_000_000}[kind]
    if kind == "keys":
        return b'{"messages":[],"x":{' + b",".join(b'"k%d":1' % i for i in range(count)) + b"}}"
    item = {"lists": b"[]", "ints": b"0"}[kind]
    return b'{"messages":[],"x":[' + b",".join([item] * count) + b"]}"


@pytest.mark.parametrize("adapter_type", ADAPTERS, ids=["vercel", "ag-ui"])
@pytest.mark.parametrize("kind", ["lists", "ints", "keys"])
async def test_a_body_of_millions_of_values_without_braces_is_refused_undecoded(
    decodes: Decodes, adapter_type: type[VercelAIAdapter | AGUIAdapter], kind: str
) -> None:
    body = hostile(kind)
    assert body.count(b"{") <= 2 and len(body) < 32 << 20  # under the old checks
    adapter = adapter_type(lambda: None)  # type: ignore[arg-type, return-value]
    async with serve(adapter) as url, httpx.AsyncClient(timeout=60) as http:
        with anyio.fail_after(60):
            response = await http.post(url, content=body)
    assert response.status_code == 413
    assert "JSON items, over the limit of 400,000 (20 a part of max_parts)" in response.text
    assert decodes.sizes == []


async def test_deep_nesting_is_refused_by_its_count_or_by_the_decoder(decodes: Decodes) -> None:
    adapter = VercelAIAdapter(lambda: None)  # type: ignore[arg-type, return-value]
    deep = b"[" * 500_000 + b"]" * 500_000
    shallow_but_too_deep = b'{"messages":' + b"[" * 2_000 + b"]" * 2_000 + b"}"
    async with serve(adapter) as url, httpx.AsyncClient(timeout=30) as http:
        with anyio.fail_after(30):
            counted = await http.post(url, content=deep)
            decoded = await http.post(url, content=shallow_but_too_deep)
    assert counted.status_code == 413
    assert decoded.status_code == 400  # orjson's depth limit: an error, not a crash
    assert "not JSON" in decoded.json()["error"]
    assert decodes.sizes == [len(shallow_but_too_deep)]


@pytest.mark.parametrize("adapter_type", ADAPTERS, ids=["vercel", "ag-ui"])
async def test_a_pasted_text_full_of_braces_and_commas_passes_the_count(
    adapter_type: type[VercelAIAdapter | AGUIAdapter],
) -> None:
    # 300,000 `{` and 60,000 `,` in a message's text (a large JSON file pasted): over the
    # old count of 200,000 `{`, under the items' margin. The factory returns no Worker: a
    # 500 after the conversion, so every bound let it through.
    text = '{"a": [1, 2]}, ' * 20_000 + "{" * 280_000
    if adapter_type is VercelAIAdapter:
        body = vercel_body(1)
        body["messages"][0]["parts"][0]["text"] = text
    else:
        body = agui_body(1)
        body["messages"][0]["content"] = text
    adapter = adapter_type(lambda: None)  # type: ignore[arg-type, return-value]
    async with serve(adapter) as url, httpx.AsyncClient(timeout=30) as http:
        with anyio.fail_after(30):
            response = await http.post(url, json=body)
    assert response.status_code == 500, response.text


@pytest.mark.parametrize("adapter_type", ADAPTERS, ids=["vercel", "ag-ui"])
@pytest.mark.parametrize(
    ("messages", "parts", "status"), [(10, 5, 500), (10, 6, 413), (11, 1, 413)]
)
async def test_the_caps_at_their_exact_values(
    adapter_type: type[VercelAIAdapter | AGUIAdapter], messages: int, parts: int, status: int
) -> None:
    # max_messages=10, max_parts=50: 10 messages of 5 parts pass (500: after converting,
    # the factory gives no Worker); one part or one message more is refused.
    make = vercel_body if adapter_type is VercelAIAdapter else agui_body
    adapter = adapter_type(lambda: None, max_messages=10, max_parts=50)  # type: ignore[arg-type, return-value]
    async with serve(adapter) as url, httpx.AsyncClient(timeout=30) as http:
        with anyio.fail_after(30):
            response = await http.post(url, json=make(messages, parts))
    assert response.status_code == status, response.text
