"""Review of resumable runs under a hostile client (issue 39's web path: memory per run)."""

from __future__ import annotations

import pytest

from llm_worker.ui import ResumableStreams
from llm_worker.ui._auth import chat_key


@pytest.mark.xfail(
    strict=True,
    reason="a resumable run outlives its connection and 'running runs are never dropped': "
    "one owner POSTing runs of new chat ids and hanging up at once keeps every one running "
    "(a Worker, a model stream and a log of up to max_bytes each); nothing bounds them per "
    "owner — under serve only --limit-concurrency does (uvicorn counts the request tasks a "
    "run's produce keeps alive), so one owner takes every slot and the others get 503s",
)
def test_an_owners_live_resumable_runs_are_bounded() -> None:
    streams = ResumableStreams(max_runs=4)
    for n in range(50):  # each log open and not done: its run still going
        streams.open(chat_key("mallory", f"c{n}"), f"r{n}")
    assert len(streams) <= 4
