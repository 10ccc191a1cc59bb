"""The request a run sends: built from the history, and checked as the hooks leave it.

Each step does only what changed since the conversation's last request (`Conversation`): the
history's repair and the sent messages' check look at the new messages only, and the prompt
cache's watch compares the new request with the last one by identity — and both look again
at the messages the on_message_send hooks edited in place (`_lent.Lent`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_worker._log import logger
from llm_worker.worker._context import compacted
from llm_worker.worker._enabled import only_offered
from llm_worker.worker._lent import Lent, edited_in

if TYPE_CHECKING:
    from llm_worker.errors import ProviderError
    from llm_worker.messages import Message, Request
    from llm_worker.worker._turn import Run

__all__ = ("prepared", "rechecked", "sending")

_log = logger("llm_worker")

_REJECTED = 400  # the HTTP status of a request the provider refuses as malformed


async def prepared(run: Run) -> Request:
    """The request for the run's history (repaired), before the on_message_send hooks.

    With hooks, its messages are a `Lent`: `sending` tells what the hooks edited in place.
    """
    cfg = run.cfg
    run.conversation.repair(run.history)
    await cfg.registry.refresh()  # toolsets (MCP servers) whose tools changed
    await run.offer(run.history)
    request = cfg.build_request(list(run.history))
    request.tools = only_offered(request.tools, run.offered)
    if cfg.prompt_cache:
        request.prompt_cache = run.conversation.cache.key_for(run.history)
    _chain(request, run.response_ids[-1] if run.response_ids else run.chain_from)
    if cfg.context is not None:
        await compacted(cfg, run.history, request)
    if cfg.hooks.on_message_send:  # the hooks' list notes what they read, to see edits
        request.messages = Lent(request.messages)
    return request


def sending(
    run: Run, request: Request, messages: list[Message], lent: list[Message] | None = None
) -> None:
    """Set `request.messages` to `messages` repaired; tell a `CacheMiss` where one comes.

    `lent`: the list the hooks got (a `Lent`, from `prepared`): the messages they edited.
    """
    edited = None
    if isinstance(lent, Lent):
        changed = lent.returned()
        if isinstance(messages, Lent):
            messages = messages.copy()  # a plain list again (at C speed, unlike list())
        edited = edited_in(messages, changed) if changed else None
    miss = run.conversation.sending(request, messages, run.requests, edited)
    run.sent = request.messages
    if miss is not None:
        run.cache_misses.append(miss)
        for sink in run.cfg.sinks:
            sink(miss)


def rechecked(run: Run, request: Request, error: ProviderError) -> bool:
    """After the provider refused `request` (HTTP 400): whether a full check repaired it.

    The per-request checks cost nothing per turn because they look at new messages only; a
    message edited in place further back is the one thing they miss. The provider's refusal
    is the cheap detection: every message is checked again (the history too, so later
    requests start from a valid one), and the request may go once more if that changed it.
    """
    if error.status_code != _REJECTED:
        return False
    if run.conversation.recheck(run.history, request):
        run.sent = request.messages
        _log.warning(
            "request %d was refused (HTTP 400) over a history edited in place; sent again "
            "after a full check",
            run.requests,
        )
        return True
    return False


def _chain(request: Request, last: str | None) -> None:
    # A stored conversation (`options={"previous_response_id": ...}`) sends only what is new
    # since the answer it names: after the first answer, that is this Worker's last answer,
    # not the id the application gave once (which would lose the calls now being answered).
    if last is not None and request.options.get("previous_response_id"):
        request.options["previous_response_id"] = last
