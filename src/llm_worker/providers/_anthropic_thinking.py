"""Anthropic thinking settings per model family: adaptive or budgeted, and the effort levels.

What the Claude families accept (Anthropic's effort and adaptive-thinking docs):

- Claude 5 and later, Opus 4.7+, Mythos Preview: adaptive thinking only (a budget, or
  `disabled`, is refused); effort `low` to `max` (`xhigh` not on Mythos Preview);
- Opus 4.6, Sonnet 4.6: adaptive thinking, or a budget (deprecated); effort `low`, `medium`,
  `high`, `max`;
- Opus 4.5: a budget; effort `low`, `medium`, `high`;
- older models (Sonnet / Haiku 4.5, Opus 4.1, Claude 3.x): a budget; no effort (refused).

The adaptive-only models (Claude 5 and later, Opus 4.7+, Mythos Preview) also refuse the
sampling parameters `temperature`, `top_p` and `top_k` ("`temperature` is deprecated for this
model"), which older models take (see `_anthropic_request`).

A model name this module cannot read (a proxy's alias, a future naming) gets the settings as
asked: adaptive thinking for an effort, a budget otherwise.

The neutral effort maps to the nearest level the model accepts, never above the one asked
for: `minimal` is `low`; `xhigh` / `max` fall to the highest level the model has. `none`
turns thinking off where the model allows it and is the lowest effort (`low`, adaptive) on
models that always think. On models without effort, an effort becomes a thinking budget.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from llm_worker.errors import ConfigurationError
from llm_worker.messages import ThinkingConfig

__all__ = (
    "DEFAULT_THINKING_BUDGET",
    "Claude",
    "ThinkingPlan",
    "check_no_sampling",
    "claude",
    "takes_sampling",
    "thinking_plan",
)

DEFAULT_THINKING_BUDGET: Final = 4096
"""`budget_tokens` when thinking is asked for with neither a budget nor an effort."""

_LEVELS: Final = ("low", "medium", "high", "xhigh", "max")
_ALL: Final = frozenset(_LEVELS)
_NO_XHIGH: Final = frozenset(_ALL - {"xhigh"})
_BASIC: Final = frozenset({"low", "medium", "high"})

# An effort on a model that takes only a budget: the budget it becomes.
_EFFORT_BUDGETS: Final = {
    "minimal": 1024,
    "low": 1024,
    "medium": DEFAULT_THINKING_BUDGET,
    "high": 16384,
    "xhigh": 32768,
    "max": 32768,
}

# `claude-<family>-<major>[-<minor>]` (claude-opus-4-6, claude-sonnet-4-5-20250929) or the
# older `claude-<major>[-<minor>]-<family>` (claude-3-7-sonnet-20250219), found anywhere in the
# id (Bedrock's `us.anthropic.claude-…-v1:0`, Vertex's `claude-…@date`), read in lower case.
# Proxies write the minor after a dot (claude-opus-4.7). A minor has one or two digits: an
# 8-digit date is not a version.
_NEW: Final = re.compile(r"claude-([a-z]+)-(\d+)(?:[-.](\d\d?)(?!\d))?")
_OLD: Final = re.compile(r"claude-(\d+)(?:[-.](\d\d?)(?!\d))?-([a-z]+)")


@dataclass(slots=True, frozen=True)
class Claude:
    """What one Claude model accepts.

    Attributes:
        adaptive: It takes `thinking: {"type": "adaptive"}`.
        budget: It takes `thinking: {"type": "enabled", "budget_tokens": n}`.
        levels: The `output_config.effort` values it accepts (empty: no effort at all).
        sampling: It takes `temperature`, `top_p` and `top_k`.
    """

    adaptive: bool
    budget: bool
    levels: frozenset[str]
    sampling: bool = True


def claude(model: str) -> Claude | None:
    """The capabilities of a Claude model, from its name; `None` when the name is not known."""
    model = model.lower()
    if "mythos-preview" in model:
        return Claude(adaptive=True, budget=False, levels=_NO_XHIGH, sampling=False)
    match = _NEW.search(model)
    if match is not None:
        family, major, minor = match.group(1), int(match.group(2)), int(match.group(3) or 0)
    else:
        match = _OLD.search(model)
        if match is None:
            return None
        family, major, minor = match.group(3), int(match.group(1)), int(match.group(2) or 0)
    return _capabilities(family, (major, minor))


def _capabilities(family: str, version: tuple[int, int]) -> Claude:
    if version >= (5, 0) or (family == "opus" and version >= (4, 7)):
        return Claude(adaptive=True, budget=False, levels=_ALL, sampling=False)
    if family in ("opus", "sonnet") and version >= (4, 6):
        return Claude(adaptive=True, budget=True, levels=_NO_XHIGH)
    if family == "opus" and version >= (4, 5):
        return Claude(adaptive=False, budget=True, levels=_BASIC)
    return Claude(adaptive=False, budget=True, levels=frozenset())


@dataclass(slots=True, frozen=True)
class ThinkingPlan:
    """The `thinking` object and the effort to send (either may be absent)."""

    thinking: dict[str, Any] | None
    effort: str | None

    @property
    def budget(self) -> int | None:
        """The thinking budget, when thinking is budgeted."""
        value = (self.thinking or {}).get("budget_tokens")
        return value if isinstance(value, int) else None


def thinking_plan(config: ThinkingConfig, model: str) -> ThinkingPlan:
    """The thinking settings `model` accepts for `config` (see the module docstring).

    A budget gives budgeted thinking, an effort without one adaptive thinking, neither a
    budget of `DEFAULT_THINKING_BUDGET`; each where the model takes it. `include_thoughts`
    maps to `display`: `"omitted"` when it is `False`, else `"summarized"` (newer models omit
    the thinking text unless asked).
    """
    display = "omitted" if config.include_thoughts is False else "summarized"
    model_caps = claude(model)
    mode = _mode(config, model_caps)
    effort = _effort(config.effort, model_caps)
    if mode == "adaptive":
        return ThinkingPlan({"type": "adaptive", "display": display}, effort)
    if mode == "budget":
        budget = _budget(config)
        thinking = {"type": "enabled", "budget_tokens": budget, "display": display}
        return ThinkingPlan(thinking, effort)
    return ThinkingPlan(None, effort)


def _mode(config: ThinkingConfig, caps: Claude | None) -> str | None:
    if caps is not None and not caps.budget:
        return "adaptive"  # it always thinks: `none` is the lowest effort, a budget ignored
    if config.effort == "none" and config.budget_tokens is None:
        return None
    if config.budget_tokens is None and config.effort is not None:
        return "adaptive" if caps is None or caps.adaptive else "budget"
    return "budget"


def _effort(effort: str | None, caps: Claude | None) -> str | None:
    if effort is None:
        return None
    if effort == "none":
        # Off where thinking can be off; the lowest effort where the model always thinks.
        return "low" if caps is not None and not caps.budget else None
    wanted = "low" if effort == "minimal" else effort
    if caps is None or wanted in caps.levels:
        return wanted
    below = [level for level in _LEVELS[: _LEVELS.index(wanted)] if level in caps.levels]
    return below[-1] if below else None


def _budget(config: ThinkingConfig) -> int:
    if config.budget_tokens is not None:
        return config.budget_tokens
    if config.effort is not None and config.effort in _EFFORT_BUDGETS:
        return _EFFORT_BUDGETS[config.effort]
    return DEFAULT_THINKING_BUDGET


def takes_sampling(model: str) -> bool:
    """Whether `model` takes `temperature`, `top_p` and `top_k` (a name not read: yes)."""
    caps = claude(model)
    return caps is None or caps.sampling


def check_no_sampling(body: dict[str, Any], model: str) -> None:
    """Refuse the sampling parameters a newer Claude model refuses (see `_anthropic_request`).

    Raises:
        ConfigurationError: Naming the parameter.
    """
    if body.get("temperature") == 1:
        del body["temperature"]  # the default they run at, from `options`: left out
    for name in ("temperature", "top_p", "top_k"):
        if body.get(name) is not None:
            raise ConfigurationError(
                f"{name}={body[name]} is not accepted by {model}: Claude models from Opus 4.7 "
                f"and Claude 5 on take no sampling parameters (temperature, top_p, top_k); "
                f"leave {name} unset, or steer the answer with the prompt or the effort"
            )
