"""From a Python function to a tool's JSON Schema and argument validator (used by `@tool`).

The parameters become one pydantic model, built once at decoration: its JSON Schema is what the
model is offered, and `Arguments.parse` validates each call's JSON text against it in one pass
(`model_validate_json`), then hands back the positional and keyword arguments for the function.

Model fields get safe internal names (`p0`, `p1`, …) with the parameter name as alias, so a
parameter may be called `json`, `copy`, `schema` or `_hidden` without shadowing a `BaseModel`
attribute. Unknown arguments are refused (`extra="forbid"`): a misspelt or invented argument
gets an error the model can act on instead of being silently dropped, and the schema says
`"additionalProperties": false`, which OpenAI's strict mode requires.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from docstring_parser import parse as parse_docstring
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import from_json, to_json

from llm_worker._strict_schema import drop_optional_nulls, strict_schema
from llm_worker._tool_messages import invalid_arguments
from llm_worker.errors import ConfigurationError, ToolError

__all__ = ("Arguments", "FunctionShape", "describe_function")

_SKIPPED_FIRST = ("self", "cls")


class _NoFieldTitles(GenerateJsonSchema):
    """Leaves out the per-field `title` pydantic derives from each name: noise for a model."""

    def field_title_should_be_set(self, schema: Any) -> bool:  # any core schema
        return False


class Arguments:
    """Validates a call's JSON arguments and turns them into a function's arguments."""

    __slots__ = ("_fields", "_model", "_names", "_optional_nulls", "tool_name")

    def __init__(
        self,
        model: type[BaseModel],
        fields: list[tuple[str, str, bool]],
        tool_name: str,
        *,
        optional_nulls: dict[str, Any] | None = None,
    ) -> None:
        self._model = model
        # (model field, parameter name, positional-only) in signature order
        self._fields = fields
        self._names = tuple(name for _, name, _ in fields)
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
            values = self._model.model_validate_json(text)
        except ValidationError as exc:
            values = self._without_optional_nulls(text, exc)
        given = values.model_fields_set
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for field, name, positional in self._fields:
            if positional:
                args.append(getattr(values, field))
            elif field in given:
                kwargs[name] = getattr(values, field)
        return args, kwargs

    def _without_optional_nulls(self, text: str, error: ValidationError) -> BaseModel:
        # Only strict tools, and only after a failure: the common path validates once.
        if self._optional_nulls is not None:
            try:
                data = from_json(text)
            except ValueError:
                pass  # not JSON: report the first error
            else:
                drop_optional_nulls(data, self._optional_nulls)
                try:
                    return self._model.model_validate_json(to_json(data))
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
    """

    description: str
    input_schema: dict[str, Any]
    arguments: Arguments
    takes_self: bool


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
        strict: Give the schema the form OpenAI's strict mode requires (`_strict_schema`).

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
    doc = parse_docstring(inspect.getdoc(fn) or "")
    param_docs = {p.arg_name: " ".join((p.description or "").split()) for p in doc.params}
    fields, definitions = _fields(params, param_docs, name)
    try:
        model = create_model(  # pyright: ignore[reportCallIssue, reportUnknownVariableType]
            name, __config__=ConfigDict(extra="forbid"), **definitions
        )
        schema = model.model_json_schema(schema_generator=_NoFieldTitles)
    except Exception as exc:  # pydantic raises several types for an unsupported annotation
        raise ConfigurationError(f"tool {name!r}: cannot build its input schema: {exc}") from exc
    _drop_model_titles(schema)
    if description is None:
        description = _description(doc.short_description, doc.long_description, doc)
    if strict:
        arguments = Arguments(model, fields, name, optional_nulls=schema)
        return FunctionShape(description, strict_schema(schema, name), arguments, takes_self)
    return FunctionShape(description, schema, Arguments(model, fields, name), takes_self)


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


def _fields(
    params: list[inspect.Parameter], param_docs: dict[str, str], tool_name: str
) -> tuple[list[tuple[str, str, bool]], dict[str, Any]]:
    fields: list[tuple[str, str, bool]] = []
    definitions: dict[str, Any] = {}
    for i, param in enumerate(params):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigurationError(
                f"tool {tool_name!r}: parameter {param.name!r} is *args or **kwargs; a tool "
                "takes named parameters only"
            )
        field = f"p{i}"
        annotation = Any if param.annotation is param.empty else param.annotation
        extra: dict[str, Any] = {"alias": param.name}
        doc = param_docs.get(param.name)
        if doc and not _has_description(annotation):
            extra["description"] = doc
        default = ... if param.default is param.empty else param.default
        definitions[field] = (Annotated[annotation, Field(**extra)], default)
        fields.append((field, param.name, param.kind is param.POSITIONAL_ONLY))
    return fields, definitions


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
