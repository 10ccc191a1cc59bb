"""Serve a Worker's run to a web front end: the Vercel AI SDK UI message stream and AG-UI.

- `VercelAIAdapter(worker_factory)`: an ASGI app answering the POST that the `ai` package's
  `useChat` / `DefaultChatTransport` sends, with the UI message stream (protocol `v1`).
- `to_vercel_stream`, `messages_from_ui`, `messages_to_ui`: the same pieces for your own server.
- `AGUIAdapter(worker_factory)`, `to_agui_events`, `messages_from_agui`, `messages_to_agui`:
  the AG-UI 1.0 protocol.
- `PauseStore`, `MemoryPauseStore`: where a run paused for approval waits for the browser's
  decision, keyed by the owner and the chat (thread) id.
- `Authorize`: who may act on a chat (the adapters' `authorize`).
- `SessionFrom`: the chat's `Session` (the adapters' `session_from`): the server keeps it.
- `ToolRecord`, `MemoryToolRecord`, `RecordedResult`: the server's record of the tools it ran,
  which wins over the browser's history; `signing_key`: the key signing what the browser
  carries back.
- `ResumableStreams`: runs that outlive their connection, read again on reconnect.
- `safe_error_text`: the default `on_error`, what a browser is told of a failed run.
- `web_app`, `chat_routes`: an adapter as a Starlette app (what `llm-worker serve` runs), or
  as the two routes to add to your own Starlette / FastAPI app.

The `ui` layer sits above the worker, beside `testing`: it imports the model, providers,
timeline, blobs, tools and worker layers, never the test doubles. Starlette (the `web` extra)
is imported only by the adapters, through `require_extra`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llm_worker.ui._agui import to_agui_events
    from llm_worker.ui._agui_app import AGUIAdapter
    from llm_worker.ui._agui_messages import messages_from_agui, messages_to_agui
    from llm_worker.ui._auth import Authorize
    from llm_worker.ui._errors import GENERIC_ERROR, safe_error_text
    from llm_worker.ui._record import MemoryToolRecord, RecordedResult, ToolRecord
    from llm_worker.ui._resumable import ResumableStreams
    from llm_worker.ui._serve import chat_routes, web_app
    from llm_worker.ui._session import SessionFrom
    from llm_worker.ui._sign import signing_key
    from llm_worker.ui._store import MemoryPauseStore, PauseStore
    from llm_worker.ui._vercel import to_vercel_stream
    from llm_worker.ui._vercel_app import VercelAIAdapter
    from llm_worker.ui._vercel_messages import messages_from_ui, messages_to_ui

__all__ = (
    "GENERIC_ERROR",
    "AGUIAdapter",
    "Authorize",
    "MemoryPauseStore",
    "MemoryToolRecord",
    "PauseStore",
    "RecordedResult",
    "ResumableStreams",
    "SessionFrom",
    "ToolRecord",
    "VercelAIAdapter",
    "chat_routes",
    "messages_from_agui",
    "messages_from_ui",
    "messages_to_agui",
    "messages_to_ui",
    "safe_error_text",
    "signing_key",
    "to_agui_events",
    "to_vercel_stream",
    "web_app",
)

_LAZY = {
    "AGUIAdapter": "llm_worker.ui._agui_app",
    "to_agui_events": "llm_worker.ui._agui",
    "messages_from_agui": "llm_worker.ui._agui_messages",
    "messages_to_agui": "llm_worker.ui._agui_messages",
    "GENERIC_ERROR": "llm_worker.ui._errors",
    "safe_error_text": "llm_worker.ui._errors",
    "ResumableStreams": "llm_worker.ui._resumable",
    "chat_routes": "llm_worker.ui._serve",
    "web_app": "llm_worker.ui._serve",
    "Authorize": "llm_worker.ui._auth",
    "SessionFrom": "llm_worker.ui._session",
    "MemoryToolRecord": "llm_worker.ui._record",
    "RecordedResult": "llm_worker.ui._record",
    "ToolRecord": "llm_worker.ui._record",
    "signing_key": "llm_worker.ui._sign",
    "MemoryPauseStore": "llm_worker.ui._store",
    "PauseStore": "llm_worker.ui._store",
    "to_vercel_stream": "llm_worker.ui._vercel",
    "VercelAIAdapter": "llm_worker.ui._vercel_app",
    "messages_from_ui": "llm_worker.ui._vercel_messages",
    "messages_to_ui": "llm_worker.ui._vercel_messages",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'llm_worker.ui' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
