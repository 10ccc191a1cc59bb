"""From a Python function to a tool's JSON Schema and argument validator (used by `@tool`).

The parameters become one `TypedDict` with a pydantic `TypeAdapter`, built once at decoration:
its JSON Schema is what the model is offered, and `Arguments.parse` validates each call's JSON
text against it in one pass (`validate_json`), which hands back the keyword arguments as they
are. A `TypedDict` rather than a model: any parameter name works (`json`, `copy`, `_hidden`
would shadow `BaseModel` attributes), a parameter with a default is simply left out when the
call does not give it (so the function's own default applies), and validation costs about
half as much as building a model instance.

Unknown arguments are refused (`extra="forbid"`): a misspelt or invented argument gets an
error the model can act on instead of being silently dropped, and the schema says
`"additionalProperties": false`, which OpenAI's strict mode requires. Nested models and
dataclasses keep their own configuration.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired

from docstring_parser import parse as parse_docstring
from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, with_config
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import PydanticSerializationError, from_json, to_json, to_jsonable_python

# pydantic reads `TypedDict` from typing_extensions on Python < 3.12 (pydantic depends on it).
from typing_extensions import TypedDict

from llm_worker._strict import drop_optional_nulls, strict_schema
from llm_worker.errors import ConfigurationError, ToolError
from llm_worker.tools._context import is_tool_context
from llm_worker.tools._messages import invalid_arguments

__all__ = ("Arguments", "FunctionShape", "describe_function")

_SKIPPED_FIRST = ("self", "cls")


class _NoFieldTitles(GenerateJsonSchema):
    """Leaves out the per-field `title` pydantic derives from each name: noise for a model."""

    def field_title_should_be_set(self, schema: Any) -> bool:  # any core schema
        return False


class Arguments:
    """Validates a call's JSON arguments and turns them into a function's arguments."""

    __slots__ = ("_adapter", "_names", "_optional_nulls", "_positional", "tool_name")

    def __init__(
        self,
        adapter: TypeAdapter[dict[str, Any]],
        names: tuple[str, ...],
        positional: tuple[tuple[str, Any], ...],
        tool_name: str,
        *,
        optional_nulls: dict[str, Any] | None = None,
    ) -> None:
        self._adapter = adapter
        self._names = names
        # Positional-only parameters, in order, with their defaults (`...`: none).
        self._positional = positional
        self.tool_name = tool_name
        # Strict tools: the original schema, to read `null` for an optional value as "absent".
        self._optional_nulls = optional_nulls

    def parse(self, input_json: str) -> tuple[list[Any], dict[str, Any]]:
        """Validate `input_json` (empty text means no arguments).

        Returns:
            The positional-only arguments and the keyword arguments. A keyword parameter the
            call left out is not passed, so the function's own default applies.

        Raises:
            ToolError: The text is not a JSON object or does not match the parameters; the
                message lists each problem for the model.
        """
        text = input_json if input_json.strip() else "{}"
        try:
            kwargs = self._adapter.validate_json(text)
        except ValidationError as exc:
            kwargs = self._without_optional_nulls(text, exc)
        if not self._positional:
            return [], kwargs
        return [kwargs.pop(name, default) for name, default in self._positional], kwargs

    def _without_optional_nulls(self, text: str, error: ValidationError) -> dict[str, Any]:
        # Only strict tools, and only after a failure: the common path validates once.
        if self._optional_nulls is not None:
            try:
                data = from_json(text)
            except ValueError:
                pass  # not JSON: report the first error
            else:
                drop_optional_nulls(data, self._optional_nulls)
                try:
                    return self._adapter.validate_json(to_json(data))
                except ValidationError as exc:
                    error = exc
        raise ToolError(invalid_arguments(error, self.tool_name, self._names)) from None


@dataclass(frozen=True, slots=True)
class FunctionShape:
    """What `describe_function` learnt from a function.

    Attributes:
        description: The docstring's summary and body, without its Args/Returns sections.
        input_schema: JSON Schema of the parameters (an object schema).
        arguments: The validator for a call's JSON arguments.
        takes_self: The first parameter (`self` / `cls`) is the bound object, not an argument.
        context: The parameter that receives the call's `ToolContext` (never in the schema).
    """

    description: str
    input_schema: dict[str, Any]
    arguments: Arguments
    takes_self: bool
    context: str | None = None


def describe_function(
    fn: Callable[..., Any],
    *,
    name: str,
    description: str | None,
    takes_self: bool | None,
    localns: Mapping[str, Any] | None,
    strict: bool = False,
) -> FunctionShape:
    """Build the schema, validator and description of a tool from `fn`.

    Args:
        fn: The plain function (a method's underlying function).
        name: The tool's name (used in messages and as the schema's model name).
        description: A description that replaces the docstring's, if given.
        takes_self: Whether the first parameter is the bound object; `None` guesses from its
            name (`self` / `cls`) and from `fn` being defined in a class.
        localns: Names to resolve string annotations with, after the function's globals.
        strict: Give the schema the form OpenAI's strict mode requires (`_strict`).

    Raises:
        ConfigurationError: An annotation does not resolve, a parameter is `*args` /
            `**kwargs`, pydantic cannot build a schema for a parameter type, or (strict) a
            type strict mode cannot express.
    """
    signature = _signature(fn, name, localns)
    params = list(signature.parameters.values())
    if takes_self is None:
        takes_self = _looks_like_method(fn, params)
    if takes_self:
        params = params[1:]
    context = _context_parameter(params, name)
    params = [p for p in params if p.name != context]
    doc = parse_docstring(inspect.getdoc(fn) or "")
    param_docs = {p.arg_name: " ".join((p.description or "").split()) for p in doc.params}
    adapter, schema = _adapter(name, params, param_docs)
    if description is None:
        description = _description(doc.short_description, doc.long_description, doc)
    names = tuple(p.name for p in params)
    positional = tuple(
        (p.name, p.default if p.default is not p.empty else ...)
        for p in params
        if p.kind is p.POSITIONAL_ONLY
    )
    if strict:
        arguments = Arguments(adapter, names, positional, name, optional_nulls=schema)
        schema = strict_schema(schema, name)
    else:
        arguments = Arguments(adapter, names, positional, name)
    return FunctionShape(description, schema, arguments, takes_self, context)


def _context_parameter(params: list[inspect.Parameter], name: str) -> str | None:
    """The one parameter annotated `ToolContext`: the Worker passes it, the model never sees it."""
    found = [p for p in params if is_tool_context(p.annotation)]
    if not found:
        return None
    if len(found) > 1 or found[0].kind is found[0].POSITIONAL_ONLY:
        raise ConfigurationError(
            f"tool {name!r}: declare one ToolContext parameter, passable by name "
            f"(found {', '.join(p.name for p in found)})"
        )
    return found[0].name


def _adapter(
    name: str, params: list[inspect.Parameter], param_docs: dict[str, str]
) -> tuple[TypeAdapter[dict[str, Any]], dict[str, Any]]:
    fields = {param.name: _field(param, param_docs, name) for param in params}
    try:
        arguments: Any = TypedDict(name, fields)  # pyright: ignore[reportArgumentType]
        adapter: TypeAdapter[dict[str, Any]] = TypeAdapter(
            with_config(ConfigDict(extra="forbid"))(arguments)
        )
        schema = adapter.json_schema(schema_generator=_NoFieldTitles)
    except Exception as exc:  # pydantic raises several types for an unsupported annotation
        raise ConfigurationError(f"tool {name!r}: cannot build its input schema: {exc}") from exc
    _drop_model_titles(schema)
    properties: dict[str, Any] = schema.get("properties", {})
    for param in params:
        if param.default is not param.empty:
            _set_default(properties[param.name], param.default)
    return adapter, schema


def _set_default(prop: dict[str, Any], default: object) -> None:
    # A TypedDict has no defaults; the schema shows the function's, as the model should see
    # them. A default without a JSON form is left out rather than shown wrong.
    with contextlib.suppress(PydanticSerializationError):
        prop["default"] = to_jsonable_python(default)


def _signature(
    fn: Callable[..., Any], name: str, localns: Mapping[str, Any] | None
) -> inspect.Signature:
    # String annotations (`from __future__ import annotations`) are resolved against the
    # function's globals first, then against the scope the decorator ran in (a class body or
    # a function defining the types it uses).
    try:
        return inspect.signature(fn, eval_str=True)
    except NameError:
        if localns is None:
            raise ConfigurationError(_unresolved(name)) from None
    try:
        return inspect.signature(fn, eval_str=True, locals=localns)
    except NameError as exc:
        raise ConfigurationError(f"{_unresolved(name)}: {exc}") from None


def _unresolved(name: str) -> str:
    return f"tool {name!r}: an annotation names a type that is not defined where the tool is"


def _looks_like_method(fn: Callable[..., Any], params: list[inspect.Parameter]) -> bool:
    if not params or params[0].name not in _SKIPPED_FIRST:
        return False
    # "App.get_user" is a method; "test.<locals>.get_user" and "get_user" are not.
    scopes = getattr(fn, "__qualname__", "").split(".")
    return len(scopes) > 1 and scopes[-2] != "<locals>"


def _field(param: inspect.Parameter, param_docs: dict[str, str], tool_name: str) -> Any:
    if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
        raise ConfigurationError(
            f"tool {tool_name!r}: parameter {param.name!r} is *args or **kwargs; a tool "
            "takes named parameters only"
        )
    annotation: Any = Any if param.annotation is param.empty else param.annotation
    doc = param_docs.get(param.name)
    if doc and not _has_description(annotation):
        annotation = Annotated[annotation, Field(description=doc)]
    return annotation if param.default is param.empty else NotRequired[annotation]


def _has_description(annotation: object) -> bool:
    # `Annotated[int, Field(description=...)]` wins over the docstring's Args entry.
    metadata: tuple[object, ...] = getattr(annotation, "__metadata__", ())
    return any(getattr(m, "description", None) for m in metadata)


def _drop_model_titles(schema: dict[str, Any]) -> None:
    # pydantic titles the top model and every `$defs` entry with its class name; a model reads
    # the tool name and the descriptions, so these are noise. Titles set on purpose with
    # `Field(title=...)` sit inside `properties` and stay.
    schema.pop("title", None)
    definitions: dict[str, Any] = schema.get("$defs", {})
    for definition in definitions.values():
        if isinstance(definition, dict):
            definition.pop("title", None)  # pyright: ignore[reportUnknownMemberType]


def _description(short: str | None, long: str | None, doc: Any) -> str:
    if not short:
        return long or ""
    if not long:
        return short
    separator = "\n\n" if doc.blank_after_short_description else "\n"
    return f"{short}{separator}{long}"
