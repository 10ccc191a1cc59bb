"""Structured output: the schema a request asks for, in the form every client sends.

`sent_schema` gives the strict form (`llm_worker._strict`: closed objects, every property
required, optional ones nullable) when the schema asks for strictness and that form can express
it, else the schema as it is with `strict` off: a model with free-form keys still gets a JSON
answer, just not an enforced one. Each client then wraps it in its own field.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson

from llm_worker._strict import strict_schema
from llm_worker.errors import ConfigurationError
from llm_worker.messages import OutputSchema

__all__ = ("SentSchema", "sent_schema")


@dataclass(slots=True, frozen=True)
class SentSchema:
    """A structured output's schema as sent: its name, JSON Schema and strictness."""

    name: str
    schema: dict[str, Any]
    strict: bool
    description: str | None


def sent_schema(output: OutputSchema) -> SentSchema:
    """The schema a client sends for `output` (strict where it can be)."""
    if not output.strict:
        return SentSchema(output.name, output.schema, False, output.description)
    schema, strict = _strict_form(orjson.dumps(output.schema), output.name)
    return SentSchema(output.name, orjson.loads(schema), strict, output.description)


# One request after another sends the same schema: its strict form is made once (keyed by its
# JSON text, so a schema edited in place is seen as the new schema it is).
@lru_cache(maxsize=64)
def _strict_form(schema_json: bytes, name: str) -> tuple[bytes, bool]:
    schema: dict[str, Any] = orjson.loads(schema_json)
    try:
        return orjson.dumps(strict_schema(schema, name, kind="output")), True
    except ConfigurationError:
        return schema_json, False
