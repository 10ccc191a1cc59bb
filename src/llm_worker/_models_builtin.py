"""The model catalog's own table: the four providers' current models (November 2026).

What genai-prices' data does not carry (maximum output, input modalities, thinking) and a
fallback for its context windows and prices when the `cost` extra is not installed. Figures
from each provider's model pages; prices in US dollars per million tokens (the base tier).
A dated snapshot (`claude-sonnet-4-5-20250929`) takes its family's row (longest prefix).
"""

from __future__ import annotations

from typing import Final, NamedTuple

__all__ = ("BUILTIN", "Row")


class Row(NamedTuple):
    """One model: window, output, modalities, thinking, prices (in, out, cache read, write)."""

    context_window: int
    max_output_tokens: int
    modalities: tuple[str, ...]
    thinking: bool
    prices: tuple[str, str, str | None, str | None]


_CLAUDE = ("text", "image", "pdf")
_GPT = ("text", "image", "pdf")
_GEMINI = ("text", "image", "pdf", "audio", "video")

BUILTIN: Final[dict[str, dict[str, Row]]] = {
    "anthropic": {
        "claude-opus-4-5": Row(200_000, 64_000, _CLAUDE, True, ("5", "25", "0.5", "6.25")),
        "claude-sonnet-4-5": Row(200_000, 64_000, _CLAUDE, True, ("3", "15", "0.3", "3.75")),
        "claude-haiku-4-5": Row(200_000, 64_000, _CLAUDE, True, ("1", "5", "0.1", "1.25")),
        "claude-opus-4-1": Row(200_000, 32_000, _CLAUDE, True, ("15", "75", "1.5", "18.75")),
        "claude-opus-4": Row(200_000, 32_000, _CLAUDE, True, ("15", "75", "1.5", "18.75")),
        "claude-sonnet-4": Row(200_000, 64_000, _CLAUDE, True, ("3", "15", "0.3", "3.75")),
        "claude-3-7-sonnet": Row(200_000, 64_000, _CLAUDE, True, ("3", "15", "0.3", "3.75")),
        "claude-3-5-haiku": Row(200_000, 8_192, _CLAUDE, False, ("0.8", "4", "0.08", "1")),
    },
    "openai": {
        "gpt-5.1": Row(400_000, 128_000, _GPT, True, ("1.25", "10", "0.125", None)),
        "gpt-5": Row(400_000, 128_000, _GPT, True, ("1.25", "10", "0.125", None)),
        "gpt-5-mini": Row(400_000, 128_000, _GPT, True, ("0.25", "2", "0.025", None)),
        "gpt-5-nano": Row(400_000, 128_000, _GPT, True, ("0.05", "0.4", "0.005", None)),
        "gpt-4.1": Row(1_047_576, 32_768, _GPT, False, ("2", "8", "0.5", None)),
        "gpt-4.1-mini": Row(1_047_576, 32_768, _GPT, False, ("0.4", "1.6", "0.1", None)),
        "gpt-4.1-nano": Row(1_047_576, 32_768, _GPT, False, ("0.1", "0.4", "0.025", None)),
        "gpt-4o": Row(128_000, 16_384, _GPT, False, ("2.5", "10", "1.25", None)),
        "gpt-4o-mini": Row(128_000, 16_384, _GPT, False, ("0.15", "0.6", "0.075", None)),
        "o3": Row(200_000, 100_000, _GPT, True, ("2", "8", "0.5", None)),
        "o4-mini": Row(200_000, 100_000, _GPT, True, ("1.1", "4.4", "0.275", None)),
    },
    "google": {
        "gemini-3-pro": Row(1_048_576, 65_536, _GEMINI, True, ("2", "12", "0.2", None)),
        "gemini-2.5-pro": Row(1_048_576, 65_536, _GEMINI, True, ("1.25", "10", "0.125", None)),
        "gemini-2.5-flash": Row(1_048_576, 65_536, _GEMINI, True, ("0.3", "2.5", "0.03", None)),
        "gemini-2.5-flash-lite": Row(
            1_048_576, 65_536, _GEMINI, True, ("0.1", "0.4", "0.01", None)
        ),
        "gemini-2.0-flash": Row(1_048_576, 8_192, _GEMINI, False, ("0.1", "0.4", "0.025", None)),
    },
}
