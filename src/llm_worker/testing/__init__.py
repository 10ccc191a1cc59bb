"""Test doubles for applications built on llm-worker, and for llm-worker's own tests.

- `ScriptedClient`: a client that answers from a script, no network — for testing hooks and
  tools.
- `WireServer`: a real HTTP server on 127.0.0.1 that plays answers byte for byte, with
  injected faults (cut, reset, delay, status codes), so the real provider clients can be tested.
- `ScriptedModelServer`: a `WireServer` playing a scripted model in a real provider's wire
  format (OpenAI Chat, OpenAI Responses, Anthropic, Gemini), for end-to-end tests and demos.

Both scripted doubles play the same steps: a fixed `ScriptedResponse`, or a callable that is
given the `ScriptedRequest` (the neutral `Request`, decoded from the wire by the server) and
returns one; one step alone answers every request. An answer without `usage` reports the
rough count `prompt_tokens` (4 characters a token) of the request it answers as its input.
`decode_request` reads any recorded request body back into a neutral `Request`.

- `Cassette`: a test's exchanges with a real model, recorded once into a reviewable file
  (keys scrubbed), then replayed byte for byte through a `WireServer` to the real client;
  requests matched by their neutral form, a miss failing with a diff. The `cassette` pytest
  fixture (`--llm-record`) comes with it.
- `run_cases` / `EvalCase`: a Worker run over named cases, live or from cassettes, into
  results and a table (`llm-worker eval cases.py`); scoring is left to a scorer of your own.
"""

from llm_worker.testing._cassette import Cassette, CassetteMode, CassetteUnusedError
from llm_worker.testing._cassette_file import CassetteError, CassetteFileError, Exchange
from llm_worker.testing._cassette_match import CassetteMissError
from llm_worker.testing._decode import decode_request
from llm_worker.testing._eval import CaseResult, EvalCase, format_table, run_cases
from llm_worker.testing._model_server import WIRE_PROVIDERS, ScriptedModelServer
from llm_worker.testing._script import (
    ScriptedClient,
    ScriptedRequest,
    ScriptedResponse,
    ScriptExhaustedError,
    ScriptStep,
    ScriptStepError,
    prompt_tokens,
)
from llm_worker.testing._server import Chunking, RecordedRequest, WireResponse, WireServer

__all__ = (
    "WIRE_PROVIDERS",
    "CaseResult",
    "Cassette",
    "CassetteError",
    "CassetteFileError",
    "CassetteMissError",
    "CassetteMode",
    "CassetteUnusedError",
    "Chunking",
    "EvalCase",
    "Exchange",
    "RecordedRequest",
    "ScriptExhaustedError",
    "ScriptStep",
    "ScriptStepError",
    "ScriptedClient",
    "ScriptedModelServer",
    "ScriptedRequest",
    "ScriptedResponse",
    "WireResponse",
    "WireServer",
    "decode_request",
    "format_table",
    "prompt_tokens",
    "run_cases",
)
