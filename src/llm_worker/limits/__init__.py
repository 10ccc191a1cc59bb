"""Budgets for runs: `Limits` and what one has `Spent` (worker layer).

A run charged to a `Limits` is checked before each request, after each answer and before
each tool call; see `Limits`. Imports the model, providers' protocol and the cost table only.
"""

from llm_worker.limits._limits import LimitName, Limits, Spent

__all__ = ("LimitName", "Limits", "Spent")
