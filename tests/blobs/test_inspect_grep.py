"""inspect's grep: selector, its bounds against a hostile pattern, and what summaries say."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import anyio
import pytest

from llm_worker import (
    BlobStore,
    Content,
    MemoryBlobStore,
    OutputPolicy,
    RunStatus,
    ToolError,
    ToolUsePart,
    Worker,
    tool,
)
from llm_worker.blobs import InspectTool, summarize
from llm_worker.testing import ScriptedModelServer, ScriptedRequest, ScriptedResponse

pytestmark = pytest.mark.anyio

ID = "0192f0c4-5a1e-7c3d-9b2a-3f4e5d6c7b8a"
RECORDS = [
    {"doi": f"10.1000/{n}", "open_access": n % 250 == 0, "title": f"Paper {n}"}
    for n in range(5_000)
]
LOG = "".join(f"{n:05d} {'ERROR disk full' if n % 1000 == 7 else 'ok'}\n" for n in range(20_000))


@pytest.fixture
def store(any_store: BlobStore) -> BlobStore:
    """Every store: memory, folder, obstore's local files, S3 (moto)."""
    return any_store


async def inspect(store: BlobStore, content: Content, selector: str, cap: int = 16_000) -> str:
    blob_id = await store.store(content)
    tool = InspectTool(store, OutputPolicy(inspect_max_chars=cap))
    with anyio.fail_after(30):
        return await tool.execute(json.dumps({"blob_id": blob_id, "selector": selector}))


def matches(out: str) -> list[str]:
    """The lines of the page's body: between the section title and the notes."""
    body = out.split(" ──\n", 1)[1] if " ──\n" in out else ""
    return body.split("\n── note ──", 1)[0].splitlines()


async def test_grep_finds_array_entries_with_their_index_and_a_count(store: BlobStore) -> None:
    out = await inspect(store, Content.Structured(RECORDS), 'grep:"open_access":true')
    assert "json_array | 5000 entries | grep '\"open_access\":true': 20 matching entries" in out
    lines = matches(out)
    assert lines[0] == '0: {"doi":"10.1000/0","open_access":true,"title":"Paper 0"}'
    assert lines[19].startswith("4750: ")
    assert len(lines) == 20


async def test_grep_finds_text_lines_with_their_numbers(store: BlobStore) -> None:
    out = await inspect(store, Content.Text(LOG), "grep:(?i)error")
    assert "text | 20000 lines | grep '(?i)error': 20 matching lines" in out
    assert "\n8: 00007 ERROR disk full\n" in out
    assert out.rstrip().endswith("19008: 19007 ERROR disk full")


async def test_grep_over_an_object_matches_keys_and_values(store: BlobStore) -> None:
    data = {"alpha": {"host": "web-1"}, "beta": [1, 2], "web-cache": True}
    out = await inspect(store, Content.Structured(data), "grep:web")
    assert "json_object | 3 keys | grep 'web': 2 matching keys" in out
    assert 'alpha: {"host":"web-1"}' in out and "web-cache: true" in out
    assert not any("beta" in line for line in matches(out))


async def test_nothing_matching_says_so(store: BlobStore) -> None:
    out = await inspect(store, Content.Text(LOG), "grep:panic")
    assert ": 0 matching lines" in out and "Nothing matches in the lines" in out


async def test_many_matches_are_bounded_and_paged_to_the_end(store: BlobStore) -> None:
    out = await inspect(store, Content.Text(LOG), "grep:ok", cap=2_000)
    assert len(out) <= 2_000 and ": 19980 matching lines" in out
    seen: list[str] = []
    selector: str | None = "grep:ok"
    pages = 0
    while selector is not None and pages < 1_000:
        out = await inspect(store, Content.Text(LOG), selector, cap=50_000)
        assert len(out) <= 50_000
        seen.extend(re.findall(r"^(\d+): \d+ ok$", out, re.MULTILINE))
        found = re.search(r'Next part: selector "(.*)"\.$', out)
        selector = found.group(1) if found else None
        pages += 1
    assert len(seen) == 19_980 and len(set(seen)) == 19_980


@pytest.mark.parametrize("kind", ["text", "array"])
async def test_a_catastrophic_pattern_is_stopped_by_the_time_budget(kind: str) -> None:
    # `(x+x+)+y` backtracks exponentially on a run of x without a y: one line would take
    # longer than the universe's age with `re`. The budget ends the search instead.
    line = "x" * 3_000
    content = (
        Content.Text((line + "\n") * 30) if kind == "text" else Content.Structured([line] * 30)
    )
    started = time.monotonic()
    out = await inspect(MemoryBlobStore(), content, "grep:(x+x+)+y")
    assert time.monotonic() - started < 15
    assert "ran out of time" in out and "simpler pattern" in out


async def test_bad_patterns_are_error_results(store: BlobStore) -> None:
    with pytest.raises(ToolError, match="not a valid regular expression"):
        await inspect(store, Content.Text(LOG), "grep:([")
    with pytest.raises(ToolError, match="over 500 characters"):
        await inspect(store, Content.Text(LOG), "grep:" + "a" * 501)
    with pytest.raises(ToolError, match="grep: needs a regular expression"):
        await inspect(store, Content.Text(LOG), "grep:")
    with pytest.raises(ToolError, match="single JSON string"):
        await inspect(store, Content.Structured("s" * 2_000), "grep:s")


async def test_a_huge_line_is_searched_in_its_first_characters_only(store: BlobStore) -> None:
    text = "start " + "z" * 200_000 + " needle\nshort needle\n"
    out = await inspect(store, Content.Text(text), "grep:needle")
    assert ": 1 matching line" in out and "2: short needle" in out
    assert "only their first 20000 were searched" in out
    assert len(out) <= 16_000


# -- summaries ---------------------------------------------------------------------------


def test_an_array_summary_drops_sample_entries_before_it_cuts_the_schema() -> None:
    record = {
        "doi": "10.1000/xyz",
        "openalex_id": "W1",
        "title": "t" * 300,
        "authors": ["a"],
        "year": 2021,
        "venue": "v",
        "open_access": True,
        "cited_by": 12,
        "license": "cc-by",
        "pdf_url": "https://example.org/x.pdf",
    }
    schema = (
        "doi: string, openalex_id: string, title: string, authors: array, year: integer, "
        "venue: string, open_access: boolean, cited_by: integer, license: string, "
        "pdf_url: string"
    )
    summary = summarize(ID, Content.Structured([record] * 5_000))
    assert f"── schema ──\n{schema}\n" in summary + "\n"
    assert len(summary.encode()) <= 400
    hinted = summarize(ID, Content.Structured([record] * 5_000), inspect="inspect")
    assert f"── schema ──\n{schema}\n" in hinted
    assert hinted.endswith("── inspect: grep:REGEX ──")
    assert "── head ──" in hinted  # what room is left still shows a sample
    assert len(hinted.encode()) <= 400


def test_summaries_name_the_inspect_tool_and_grep_when_asked() -> None:
    obj = summarize(ID, Content.Structured({f"k{n}": n for n in range(300)}), inspect="read_blob")
    assert obj.endswith("── read_blob: grep:REGEX ──") and "more keys" in obj
    assert len(obj.encode()) <= 400
    # A text keeps its head and tail lines whole (the tool's description names grep).
    assert "grep" not in summarize(ID, Content.Text(LOG), inspect="inspect")
    assert "grep" not in summarize(ID, Content.Structured(RECORDS))  # no name, no hint


# -- end to end ---------------------------------------------------------------------------


@tool(effect="read_only")
def search_papers() -> list[dict[str, Any]]:
    """Every paper of the index."""
    return RECORDS


@pytest.mark.parametrize("provider", ["openai_chat", "gemini"])
async def test_a_model_greps_a_5000_record_blob_in_one_call(provider: str) -> None:
    def grep_it(request: ScriptedRequest) -> ScriptedResponse:
        (summary,) = request.tool_results
        assert "── inspect: grep:REGEX ──" in summary.content  # the summary says grep exists
        blob = re.search(r"\[blob:([0-9a-f-]{36})\]", summary.content)
        assert blob is not None
        args = {"blob_id": blob.group(1), "selector": 'grep:"open_access":true'}
        return ScriptedResponse([ToolUsePart("c2", "inspect", args)])

    script: list[Any] = [
        ScriptedResponse([ToolUsePart("c1", "search_papers", {})]),
        grep_it,
        ScriptedResponse.text("20 open-access papers."),
    ]
    async with ScriptedModelServer(provider, script) as server, server.client() as client:
        worker = Worker(client, tools=[search_papers], blob_store=MemoryBlobStore())
        with anyio.fail_after(20):
            result = await worker.run("Which papers are open access?")
    assert result.status is RunStatus.FINISHED
    (found,) = worker.history[-2].tool_results
    assert "20 matching entries" in found.content and "4750: " in found.content
