"""How DBOS stores a durable run's values: JSON, in an envelope; never a pickle.

DBOS serializes every workflow input and output, step output, event, message and stream
entry through the serializer it is configured with, but it reads a row by the format the row
names: a row saying `py_pickle` is unpickled whatever the configuration, and unpickling runs
code. `refuse_pickles` closes that path in this process (llm-worker's DBOS is the process's
DBOS), so a tampered row is a `RecordError`, not a shell command.

A value is stored as `{"json": value}`; an exception as `{"error": {"type", "args",
"state"}}`, rebuilt as its own type when that is llm-worker's, DBOS's or a builtin one
(without calling `__init__`, as `LLMWorkerError.__reduce__` does for pickles), else as a
`RecordedError` naming the type.
"""

from __future__ import annotations

import builtins
import json
import sys
from typing import Any, cast

from llm_worker._json import as_dict, as_list
from llm_worker.durable._errors import RecordedError, RecordError
from llm_worker.errors import ConfigurationError

__all__ = ("NAME", "JsonSerializer", "error_from", "error_record", "refuse_pickles")

NAME = "llm-worker.json"
"""The format name DBOS writes beside each value this serializer stored."""
_REBUILT_MODULES = ("llm_worker.", "dbos.")


class JsonSerializer:
    """The DBOS serializer of durable runs (DBOS's `Serializer` interface, duck-typed)."""

    def name(self) -> str:
        """The format's name, stored beside each value."""
        return NAME

    def serialize(self, data: Any) -> str:
        """`data` as JSON text in its envelope.

        Raises:
            ConfigurationError: `data` is not JSON data (a `durable.step` value must be).
        """
        if isinstance(data, BaseException):
            return json.dumps({"error": _error_record(data)})
        try:
            return json.dumps({"json": data})
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(
                f"a durable run stores JSON data only, not {type(data).__name__}: {exc}"
            ) from exc

    def deserialize(self, serialized_data: str) -> Any:
        """The value stored as `serialized_data`.

        Raises:
            RecordError: The text is not an envelope this serializer wrote.
        """
        try:
            envelope = json.loads(serialized_data)
        except (TypeError, ValueError) as exc:
            raise RecordError(f"it is not JSON ({exc})") from None
        except RecursionError:  # a forged row nested past the parser's depth
            raise RecordError("it is JSON nested too deep to read") from None
        if isinstance(envelope, dict) and "json" in envelope and len(envelope) == 1:  # pyright: ignore[reportUnknownArgumentType]
            return cast("dict[str, Any]", envelope)["json"]
        if isinstance(envelope, dict) and "error" in envelope and len(envelope) == 1:  # pyright: ignore[reportUnknownArgumentType]
            return _error_from(cast("dict[str, Any]", envelope)["error"])
        raise RecordError("it is JSON, but not a value llm-worker wrote")


def _json_or_str(value: object) -> object:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


def _error_record(error: BaseException) -> dict[str, Any]:
    cls = type(error)
    state = (
        {k: v for k, v in vars(error).items() if _json_or_str(v) is v}
        if hasattr(error, "__dict__")
        else {}
    )
    return {
        "type": f"{cls.__module__}:{cls.__qualname__}",
        "args": [_json_or_str(a) for a in error.args],
        "state": state,
        "message": str(error),
    }


def _error_from(data: object) -> BaseException:
    record = as_dict(data)
    type_name = str(record.get("type", ""))
    args = tuple(as_list(record.get("args")))
    cls = _error_class(type_name)
    if cls is None:
        return RecordedError(str(record.get("message", "")), type_name=type_name.replace(":", "."))
    try:
        error = cls.__new__(cls, *args)
        error.args = args
        error.__dict__.update(as_dict(record.get("state")))
    except Exception:  # an error type whose state does not rebuild: its name and message
        return RecordedError(str(record.get("message", "")), type_name=type_name.replace(":", "."))
    return error


def _error_class(type_name: str) -> type[BaseException] | None:
    """The exception class `module:qualname` names, if it is one the serializer rebuilds.

    Only classes already imported, of llm-worker, DBOS or builtins: nothing is imported or
    called by name from a record.
    """
    module_name, _, qualname = type_name.partition(":")
    if module_name == "builtins":
        found: object = getattr(builtins, qualname, None)
    elif module_name.startswith(_REBUILT_MODULES) and module_name in sys.modules:
        found = sys.modules[module_name]
        for part in qualname.split("."):
            found = getattr(found, part, None)
    else:
        return None
    if isinstance(found, type) and issubclass(found, Exception):
        return found
    return None


def _refused(*_: object) -> Any:
    raise RecordError("it is a pickle (py_pickle), and llm-worker reads JSON only")


def refuse_pickles(dbos: Any) -> None:
    """Make DBOS refuse to read or write a pickle in this process (see the module's docstring).

    DBOS reads a row through the format it names, so its pickle serializer itself is replaced.
    """
    default = dbos._serialization.DBOSDefaultSerializer  # pyright: ignore[reportPrivateUsage]
    default.deserialize = _refused
    default.serialize = _refused


def error_record(error: BaseException) -> dict[str, Any]:
    """An exception as JSON data: its type, arguments, JSON-able attributes and message."""
    return _error_record(error)


def error_from(data: object) -> BaseException:
    """The exception `error_record` made, rebuilt as its type when that is one it rebuilds."""
    return _error_from(data)
