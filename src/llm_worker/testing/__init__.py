"""Test doubles for applications built on llm-worker, and for llm-worker's own tests.

- `ScriptedClient`: a client that answers from a script, no network — for testing hooks and
  tools.
- `WireServer`: a real HTTP server on 127.0.0.1 that plays answers byte for byte, with
  injected faults (cut, reset, delay, status codes), so the real provider clients can be tested.
- `ScriptedModelServer`: a `WireServer` playing a scripted model in a real provider's wire
  format (OpenAI Chat, OpenAI Responses, Anthropic, Gemini), for end-to-end tests and demos.
"""

from llm_worker.testing._model_server import WIRE_PROVIDERS, ScriptedModelServer, ScriptStep
from llm_worker.testing._script import ScriptedClient, ScriptedResponse, ScriptExhaustedError
from llm_worker.testing._server import Chunking, RecordedRequest, WireResponse, WireServer

__all__ = (
    "WIRE_PROVIDERS",
    "Chunking",
    "RecordedRequest",
    "ScriptExhaustedError",
    "ScriptStep",
    "ScriptedClient",
    "ScriptedModelServer",
    "ScriptedResponse",
    "WireResponse",
    "WireServer",
)
