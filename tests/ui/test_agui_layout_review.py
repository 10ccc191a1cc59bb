"""Review of the AG-UI step layout (`layout_of`): `messages_to_agui`'s for every part kind.

Seeded assistant messages of every part kind, with every opaque field (signatures, item
ids, origins, citations, redacted thinking, a call's caller, a phase, provider data), hostile
text (U+FFFD, astral characters, NUL, empty) and media the layout does not hold:
the step's layout is the snapshot's, and the browser's copy reads back to the same parts.
"""

from __future__ import annotations

import random
from typing import Any

from llm_worker.messages import (
    Citation,
    ImagePart,
    Message,
    Origin,
    Part,
    ProviderPart,
    TextPart,
    ThinkingPart,
    ToolUsePart,
)
from llm_worker.ui._agui_messages import layout_of, messages_from_agui, messages_to_agui

_ORIGINS = [None, Origin("anthropic", "claude-x"), Origin("gemini", "g\u00e9")]
# (No lone surrogate: `messages_to_agui` refuses one, naming its place; tests/ui/
# test_surrogates_ui.py. U+FFFD is what one becomes where model or tool text enters.)
_TEXTS = ["", "plain", "\ufffd lone", "\U0001f600 astral", "nul\x00", "é" * 300, '"}{\\']


def _part(rng: random.Random, n: int) -> Part:
    text, origin = rng.choice(_TEXTS), rng.choice(_ORIGINS)
    kind = rng.randrange(5)
    if kind == 0:
        cited = [Citation({"type": "url_citation", "n": n}, url="u", start_index=0, end_index=1)]
        return TextPart(
            text,
            signature=rng.choice([None, "sig"]),
            item_id=rng.choice([None, f"it_{n}"]),
            origin=origin,
            citations=rng.choice([[], cited]),
            phase=rng.choice([None, "final_answer"]),
        )
    if kind == 1:
        redacted = rng.choice([None, "opaque-bytes"])
        return ThinkingPart(text, signature=rng.choice([None, "s"]), redacted=redacted)
    if kind == 2:
        caller = rng.choice([None, {"type": "code_execution", "tool_id": "x"}])
        args: dict[str, Any] = {"q": text, "n": [n, {"deep": None}]}
        return ToolUsePart(f"call_{n}", "tool", args, signature="s", origin=origin, caller=caller)
    if kind == 3:
        return ProviderPart({"type": "server_tool_use", "id": f"srv_{n}", "x": text}, origin=origin)
    return ImagePart(data=b"\x89PNG\r\n\x1a\n" + bytes(20), media_type="image/png")


def test_a_steps_layout_is_the_snapshots_for_every_part_kind_and_hostile_text() -> None:
    for case in range(300):
        rng = random.Random(f"layout-{case}")
        parts = [_part(rng, n) for n in range(rng.randint(0, 8))]
        [*_, message] = messages_to_agui(
            [Message("user", [TextPart("hi")]), Message("assistant", parts)]
        )
        assert layout_of(parts) == message["encryptedValue"], (case, parts)


def test_the_layout_reads_back_to_the_parts_it_holds() -> None:
    for case in range(100):
        rng = random.Random(f"layout-back-{case}")
        drawn = [_part(rng, n) for n in range(rng.randint(1, 6))]
        parts: list[Part] = [p for p in drawn if not isinstance(p, ImagePart)] or [TextPart("x")]
        history = [Message("user", [TextPart("hi")]), Message("assistant", parts)]
        sent = messages_to_agui(history)
        sent[-1]["encryptedValue"] = layout_of(parts)
        back = messages_from_agui(sent)
        # (An empty text with nothing opaque is nothing to keep: it is not read back.)
        kept = [p for p in parts if p != TextPart("")]
        assert back[-1].content == kept, case
