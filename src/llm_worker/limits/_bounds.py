"""The Worker's own loop bounds: `max_requests` (a per-run shorthand) and `max_continuations`."""

from __future__ import annotations

from llm_worker.errors import LimitExceededError

__all__ = ("check_continuations", "check_max_requests")


def check_max_requests(limit: int, made: int) -> None:
    """Refuse the next request of a run that made `limit` already.

    Raises:
        LimitExceededError: `limit="max_requests"`.
    """
    if made >= limit:
        raise LimitExceededError(
            f"the run reached max_requests={limit} without finishing; raise "
            "Worker(max_requests=...) if the task needs more steps",
            limit="max_requests",
            value=limit,
            used=made + 1,
        )


def check_continuations(limit: int, made: int) -> None:
    """Refuse one more on_turn_end continuation past `limit`.

    Raises:
        LimitExceededError: `limit="max_continuations"`.
    """
    if made >= limit:
        raise LimitExceededError(
            f"on_turn_end hooks asked to continue more than max_continuations={limit} times; "
            "the answer was never accepted",
            limit="max_continuations",
            value=limit,
            used=made + 1,
        )
