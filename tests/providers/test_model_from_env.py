"""`model_from_env`: which model an example or the demo runs live, from the API keys set."""

from __future__ import annotations

import pytest

from llm_worker.providers import DEFAULT_MODELS, from_string, model_from_env


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for env in DEFAULT_MODELS:
        monkeypatch.delenv(env, raising=False)


def test_no_key_means_no_live_model() -> None:
    assert model_from_env() is None
    assert model_from_env("") is None


def test_an_explicit_model_wins_over_any_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert model_from_env("gemini:gemini-2.5-pro") == "gemini:gemini-2.5-pro"


def test_the_first_provider_with_a_key_is_picked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "g-test")
    assert model_from_env() == "gemini:gemini-2.5-flash"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = model_from_env()
    assert model == "openai:gpt-4.1-mini"
    assert from_string(model).provider == "openai_chat"
