"""Issue 32's "Tested" run at its full length: 1,000 turns on the anthropic wire.

One wire a file, so xdist (`--dist loadfile`) runs the four wires side by side; the run and its
checks are `support.long_runs.a_thousand_turns_on` (a 6,000-token window, ~1 KB pages: ~4 s a
wire on an idle machine). test_context_wires.py runs the issue's 16,000 tokens and 4 KB pages
on each wire for 100 turns.
"""

from __future__ import annotations

import pytest

from support.long_runs import a_thousand_turns_on

pytestmark = pytest.mark.anyio


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_a_thousand_turns_on_anthropic_stay_inside_the_window() -> None:
    await a_thousand_turns_on("anthropic")
