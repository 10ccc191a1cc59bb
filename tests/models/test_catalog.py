"""The model catalog: genai-prices' data merged with the built-in table, registrations first."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal

import pytest

from llm_worker.errors import ConfigurationError, UnknownModelError
from llm_worker.models import ModelPrices, model_info, register_model, unregister_model


@pytest.fixture
def registered() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        unregister_model(name)


def test_a_current_model_has_its_window_output_modalities_thinking_and_prices() -> None:
    info = model_info("anthropic:claude-sonnet-4-5")
    assert info.context_window == 200_000
    assert info.max_output_tokens == 64_000
    assert info.input_modalities is not None and "image" in info.input_modalities
    assert info.thinking is True
    assert info.prices is not None
    assert info.prices.input == Decimal(3) and info.prices.output == Decimal(15)
    assert info.sources == ("genai-prices", "built-in")


def test_a_dated_snapshot_takes_its_familys_row_and_prefixes_name_providers() -> None:
    info = model_info("gpt-5-mini-2025-08-07", provider="openai_chat")
    assert (info.provider, info.max_output_tokens) == ("openai", 128_000)
    assert model_info("openai-responses:gpt-5-mini").context_window == 400_000
    assert model_info("google:gemini-2.5-flash") == model_info("gemini:gemini-2.5-flash")


def test_genai_prices_alone_gives_window_and_prices_for_a_model_the_table_lacks() -> None:
    info = model_info("openai:gpt-3.5-turbo")
    assert info.sources == ("genai-prices",)
    assert info.context_window is not None and info.prices is not None
    assert info.max_output_tokens is None and info.thinking is None


def test_without_genai_prices_the_built_in_table_stands_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices.data_snapshot", None)  # import fails
    info = model_info("gemini:gemini-2.5-pro")
    assert info.sources == ("built-in",)
    assert info.context_window == 1_048_576
    assert info.prices == ModelPrices(Decimal("1.25"), Decimal(10), Decimal("0.125"), None)


def test_an_unknown_model_names_both_fixes() -> None:
    with pytest.raises(UnknownModelError) as caught:
        model_info("anthropic:my-own-claude")
    message = str(caught.value)
    assert "register_model('anthropic:my-own-claude'" in message
    assert "ContextPolicy(window_tokens=" in message
    assert caught.value.model == "anthropic:my-own-claude"
    assert isinstance(caught.value, ConfigurationError)


def test_register_model_adds_and_overrides_then_unregister_restores(
    registered: list[str],
) -> None:
    registered.append("openai:ft:gpt-4.1-mini:acme")
    info = register_model("openai:ft:gpt-4.1-mini:acme", context_window=32_000, thinking=False)
    assert model_info("openai_chat:ft:gpt-4.1-mini:acme") == info
    registered.append("anthropic:claude-sonnet-4-5")
    register_model("anthropic:claude-sonnet-4-5", context_window=1_000_000)
    assert model_info("anthropic:claude-sonnet-4-5").context_window == 1_000_000
    unregister_model("anthropic:claude-sonnet-4-5")
    assert model_info("anthropic:claude-sonnet-4-5").context_window == 200_000


def test_a_bare_registered_name_matches_every_provider(registered: list[str]) -> None:
    registered.append("llama-local")
    register_model("llama-local", context_window=8_192)
    assert model_info("openai:llama-local").context_window == 8_192
    assert model_info("llama-local", provider="scripted").provider == "scripted"


@pytest.mark.parametrize("window", [0, -5, 1.5, "8k"])
def test_register_model_refuses_a_window_that_is_not_a_positive_int(window: object) -> None:
    with pytest.raises(ConfigurationError, match="context_window"):
        register_model("x:y", context_window=window)  # type: ignore[arg-type]


def test_importing_the_catalog_loads_no_data() -> None:
    code = (
        "import sys, llm_worker, llm_worker.models\n"
        "print('genai_prices' in sys.modules, 'llm_worker.models' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.split() == ["False", "True"]
