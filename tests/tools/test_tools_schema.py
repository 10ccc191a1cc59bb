"""@tool: names, descriptions, input schemas, metadata; ToolMeta and tool_meta.

This module uses postponed annotations on purpose: users' modules often do, and `@tool` must
resolve string annotations, including types defined in the scope it is applied in.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from llm_worker import ConfigurationError, ToolSpec
from llm_worker.tools import FunctionTool, ToolMeta, tool, tool_meta


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    """A postal address."""

    street: str
    zip_code: int | None = None


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


# -- names and descriptions ---------------------------------------------------------------


def test_google_docstring_gives_description_and_parameter_descriptions() -> None:
    @tool
    def get_user(user_id: str, verbose: bool = False) -> str:
        """Get a user.
        Looks the user up in the database.

        Args:
            user_id: The user's id,
                as stored.
            verbose: Say more.

        Returns:
            The user.
        """
        return user_id

    assert get_user.name == "get_user"
    assert get_user.description == "Get a user.\nLooks the user up in the database."
    props = get_user.input_schema["properties"]
    assert props["user_id"] == {"type": "string", "description": "The user's id, as stored."}
    assert props["verbose"] == {"type": "boolean", "default": False, "description": "Say more."}


def test_numpy_docstring() -> None:
    @tool
    def search(query: str, limit: int = 10) -> list[str]:
        """Search the index.

        Runs a full-text query.

        Parameters
        ----------
        query : str
            What to look for.
        limit : int, optional
            At most this many hits.

        Returns
        -------
        list of str
        """
        return []

    assert search.description == "Search the index.\n\nRuns a full-text query."
    props = search.input_schema["properties"]
    assert props["query"]["description"] == "What to look for."
    assert props["limit"]["description"] == "At most this many hits."


def test_sphinx_docstring() -> None:
    @tool
    def search(query: str, limit: int = 10) -> list[str]:
        """Search the index.

        :param query: What to look for.
        :type query: str
        :param int limit: At most this many hits.
        :returns: the hits
        """
        return []

    assert search.description == "Search the index."
    props = search.input_schema["properties"]
    assert props["query"]["description"] == "What to look for."
    assert props["limit"]["description"] == "At most this many hits."


def test_field_description_wins_over_docstring() -> None:
    @tool
    def f(a: Annotated[int, Field(description="From Field.")], b: int) -> None:
        """Do it.

        Args:
            a: From the docstring.
            b: Only in the docstring.
        """

    props = f.input_schema["properties"]
    assert props["a"]["description"] == "From Field."
    assert props["b"]["description"] == "Only in the docstring."


def test_explicit_name_and_description_and_no_docstring() -> None:
    @tool(name="lookup-v2", description="Look it up.")
    def lookup(key: str) -> str:
        """Ignored."""
        return key

    def bare(key: str) -> str:
        return key

    assert (lookup.name, lookup.description) == ("lookup-v2", "Look it up.")
    assert tool(bare).description == ""


# -- schemas ------------------------------------------------------------------------------


def test_schema_covers_defaults_optionals_enums_literals_models_dataclasses_lists_dicts() -> None:
    @tool
    def ship(  # noqa: PLR0917
        to: Address,
        items: list[str],
        where: Point,
        color: Color = Color.RED,
        speed: Literal["slow", "fast"] = "slow",
        note: str | None = None,
        extra: dict[str, int] | None = None,
    ) -> str:
        """Ship items."""
        return "ok"

    assert ship.input_schema == {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "to": {"$ref": "#/$defs/Address"},
            "items": {"type": "array", "items": {"type": "string"}},
            "where": {"$ref": "#/$defs/Point"},
            "color": {"$ref": "#/$defs/Color", "default": "red"},
            "speed": {"enum": ["slow", "fast"], "type": "string", "default": "slow"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "extra": {
                "anyOf": [
                    {"type": "object", "additionalProperties": {"type": "integer"}},
                    {"type": "null"},
                ],
                "default": None,
            },
        },
        "required": ["to", "items", "where"],
        "$defs": {
            "Address": {
                "type": "object",
                "description": "A postal address.",
                "properties": {
                    "street": {"type": "string"},
                    "zip_code": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
                },
                "required": ["street"],
            },
            "Color": {"enum": ["red", "blue"], "type": "string"},
            "Point": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "x": {"type": "integer"},
                    "y": {"type": "integer", "default": 0},
                },
                "required": ["x"],
            },
        },
    }


def test_no_title_noise_but_explicit_titles_stay() -> None:
    @tool
    def f(title: Annotated[str, Field(title="The Title")], n: int) -> None:
        """F."""

    schema = f.input_schema
    assert "title" not in schema
    assert schema["properties"] == {
        "title": {"type": "string", "title": "The Title"},
        "n": {"type": "integer"},
    }


def test_parameter_names_that_shadow_pydantic_attributes() -> None:
    @tool
    def f(json: str, copy: int, schema: bool, model_config: str, _hidden: int = 0) -> None:
        """F."""

    assert list(f.input_schema["properties"]) == [
        "json",
        "copy",
        "schema",
        "model_config",
        "_hidden",
    ]
    assert f.input_schema["required"] == ["json", "copy", "schema", "model_config"]


def test_unannotated_parameter_accepts_anything() -> None:
    @tool
    def f(x) -> None:  # type: ignore[no-untyped-def]
        """F."""

    assert f.input_schema["properties"] == {"x": {}}


def test_local_types_in_string_annotations_resolve() -> None:
    class Local(BaseModel):
        value: int

    @tool
    def f(item: Local) -> int:
        """F."""
        return item.value

    assert f.input_schema["properties"]["item"] == {"$ref": "#/$defs/Local"}


def test_schema_is_computed_once() -> None:
    @tool
    def f(a: int) -> None:
        """F."""

    assert f.input_schema is f.input_schema is f.meta.input_schema


def test_self_and_cls_are_not_parameters() -> None:
    class App:
        @tool
        def method(self, a: int) -> int:
            """M."""
            return a

        @tool
        @classmethod
        def klass(cls, b: int) -> int:
            """C."""
            return b

        @tool
        @staticmethod
        def static(c: int) -> int:
            """S."""
            return c

    assert list(App.method.input_schema["properties"]) == ["a"]
    assert list(App.klass.input_schema["properties"]) == ["b"]
    assert list(App.static.input_schema["properties"]) == ["c"]


def test_a_plain_function_whose_first_parameter_is_named_self_keeps_it() -> None:
    def f(self: int) -> int:
        return self

    assert list(tool(f).input_schema["properties"]) == ["self"]


# -- refused at decoration ----------------------------------------------------------------


def test_var_args_and_kwargs_are_refused() -> None:
    def star(*args: int) -> None: ...
    def stars(**kwargs: int) -> None: ...

    with pytest.raises(ConfigurationError, match=r"'star'.*\*args or \*\*kwargs"):
        tool(star)
    with pytest.raises(ConfigurationError, match="'stars'"):
        tool(stars)


def test_names_providers_reject_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="'<lambda>'"):
        tool(lambda: None)
    with pytest.raises(ConfigurationError, match="'has space'"):
        tool(name="has space")(lambda: None)
    with pytest.raises(ConfigurationError, match="at most 64"):
        tool(name="x" * 65)(lambda: None)


def test_unresolvable_annotation_is_refused() -> None:
    def f(a: Missing) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(ConfigurationError, match=r"'f'.*not defined"):
        tool(f)


def test_unsupported_annotation_is_refused() -> None:
    class Opaque:
        pass

    def f(a: Opaque) -> None: ...

    with pytest.raises(ConfigurationError, match="'f': cannot build its input schema"):
        tool(f)


def test_invalid_metadata_is_refused() -> None:
    def f() -> None: ...

    with pytest.raises(ConfigurationError, match="effect 'sometimes'"):
        tool(effect="sometimes")(f)  # type: ignore[arg-type]
    for bad in (0, -1.0, float("inf"), float("nan"), True, "5"):
        with pytest.raises(ConfigurationError, match="timeout"):
            tool(timeout=bad)(f)  # type: ignore[arg-type]


# -- ToolMeta -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("effect", "exclusive", "early", "parallel", "rerun"),
    [
        ("read_only", False, True, True, True),
        ("idempotent", False, True, True, True),
        ("side_effect", False, False, True, False),
        ("read_only", True, False, False, True),
        ("side_effect", True, False, False, False),
    ],
)
def test_derived_permissions(
    effect: Any, exclusive: bool, early: bool, parallel: bool, rerun: bool
) -> None:
    meta = ToolMeta("t", "T.", {"type": "object"}, effect=effect, exclusive=exclusive)
    assert (meta.may_start_early, meta.may_run_parallel, meta.may_rerun) == (
        early,
        parallel,
        rerun,
    )


def test_decorator_metadata_and_spec() -> None:
    @tool(effect="read_only", exclusive=True, timeout=2.5, strict=True)
    def f(a: int) -> int:
        """F."""
        return a

    assert f.meta == ToolMeta(
        "f",
        "F.",
        f.input_schema,
        effect="read_only",
        exclusive=True,
        timeout=2.5,
        strict=True,
    )
    assert tool_meta(f) is f.meta
    assert f.meta.spec() == ToolSpec("f", "F.", f.input_schema, strict=True)
    assert tool(f.__wrapped__).meta.effect == "side_effect"  # the default


def test_tool_meta_of_a_hand_written_tool() -> None:
    class Minimal:
        name = "minimal"
        description = "Minimal."
        input_schema: dict[str, Any] = {"type": "object"}  # noqa: RUF012

        async def execute(self, input_json: str) -> str:
            return input_json

    class Declared(Minimal):
        effect = "idempotent"
        exclusive = True
        timeout = 3
        strict = True

    meta = tool_meta(Minimal())
    assert meta == ToolMeta("minimal", "Minimal.", {"type": "object"})
    declared = tool_meta(Declared())
    assert (declared.effect, declared.exclusive, declared.timeout, declared.strict) == (
        "idempotent",
        True,
        3,
        True,
    )


def test_tool_meta_prefers_a_meta_attribute_and_reads_once() -> None:
    own = ToolMeta("own", "Own.", {"type": "object"}, effect="read_only")

    class WithMeta:
        name = "ignored"
        description = "Ignored."
        input_schema: dict[str, Any] = {}  # noqa: RUF012
        meta = own

        async def execute(self, input_json: str) -> str:
            return input_json

    class Counting:
        reads = 0
        name = "counting"
        description = "C."

        @property
        def input_schema(self) -> dict[str, Any]:
            Counting.reads += 1
            return {"type": "object"}

        async def execute(self, input_json: str) -> str:
            return input_json

    assert tool_meta(WithMeta()) is own
    counting = Counting()
    assert tool_meta(counting) is tool_meta(counting)
    assert Counting.reads == 1


def test_tool_meta_of_a_non_tool() -> None:
    with pytest.raises(ConfigurationError, match="is not a tool"):
        tool_meta(object())  # type: ignore[arg-type]

    class BadMeta:
        meta = "nope"

    with pytest.raises(ConfigurationError, match="not a ToolMeta"):
        tool_meta(BadMeta())  # type: ignore[arg-type]


def test_function_tool_keeps_the_function_identity() -> None:
    def get_weather(city: str) -> str:
        """Weather."""
        return city

    t = tool(get_weather)
    assert isinstance(t, FunctionTool)
    assert t.__wrapped__ is get_weather
    assert t.__name__ == "get_weather"
    assert t.__doc__ == "Weather."
    assert "FunctionTool 'get_weather'" in repr(t)
