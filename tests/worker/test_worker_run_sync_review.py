"""Probes of Worker.run_sync: Ctrl-C mid-run, a pause resumed from sync code, leaks."""

from __future__ import annotations

import signal

import pytest

from llm_worker import Decision, RunStatus, ToolUsePart, Worker, tool
from llm_worker.hooks import ToolCallContext
from llm_worker.testing import ScriptedResponse
from llm_worker.testing._model_server import ScriptStep
from worker.test_worker_run_sync import leaked_sockets, model_in_a_thread

RAN: list[str] = []


@tool(requires_approval=True)
def pay(invoice: str) -> str:
    """Pay an invoice."""
    RAN.append(invoice)
    return f"{invoice} paid"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_ctrl_c_during_run_sync_cleans_up_and_leaks_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    aborts: list[str] = []

    def press_ctrl_c(ctx: ToolCallContext) -> None:
        signal.raise_signal(signal.SIGINT)  # as a person pressing Ctrl-C mid-run

    script: list[ScriptStep] = [
        ScriptedResponse([ToolUsePart("c1", "add", {"a": 1, "b": 2})]),
        ScriptedResponse.text("again"),
    ]
    with model_in_a_thread("anthropic", script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        worker = Worker("anthropic:claude-sonnet-4-5", tools=[add])
        worker.add_before_tool_call_hook(press_ctrl_c)
        worker.add_on_abort_hook(lambda ctx: aborts.append(ctx.kind))
        with pytest.raises(KeyboardInterrupt):
            worker.run_sync("1 + 2?")
        assert aborts == ["cancelled"]
        assert worker.history[-1].tool_results[0].is_error  # the call got its result
        worker._cfg.hooks.before_tool_call.clear()  # pyright: ignore[reportPrivateUsage]
        assert worker.run_sync("and now?").text == "again"  # the Worker is free again
        del worker
        assert leaked_sockets() == []


def test_a_pause_resumed_from_sync_code_runs_the_call_and_leaks_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    RAN.clear()
    script: list[ScriptStep] = [
        ScriptedResponse([ToolUsePart("", "pay", {"invoice": "INV-1"})]),
        ScriptedResponse.text("Paid."),
    ]
    with model_in_a_thread("gemini", script) as server:
        monkeypatch.setenv("GEMINI_API_KEY", "test-key")
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.base_url)
        worker = Worker("gemini:gemini-2.5-flash", tools=[pay])
        paused = worker.run_sync("pay INV-1")
        assert paused.status is RunStatus.PAUSED and paused.state is not None
        decisions = {p.call.id: Decision.approve() for p in paused.state.pending}
        done = worker.resume_sync(paused.state, decisions=decisions)
        assert done.text == "Paid."
        assert RAN == ["INV-1"]
        del worker
        assert leaked_sockets() == []
