"""@tool(strict=True): a schema OpenAI's strict mode accepts, and `null` meaning "the default"."""

from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel, Field

from llm_worker import ConfigurationError, ToolError
from llm_worker.tools import tool

pytestmark = pytest.mark.anyio


class Filters(BaseModel):
    city: str
    radius_km: int = 10


def _objects(node: Any) -> list[dict[str, Any]]:
    """Every object schema in `node`, at any depth."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if node.get("type") == "object":
            found.append(node)
        for value in node.values():
            found.extend(_objects(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_objects(value))
    return found


@tool(strict=True)
def search(
    query: Annotated[str, Field(description="What to look for.")],
    filters: Filters | None = None,
    limit: Annotated[int, Field(description="At most this many.")] = 5,
    pages: list[Filters] | None = None,
) -> str:
    """Search."""
    return f"{query}|{filters}|{limit}|{pages}"


def test_every_object_is_closed_and_lists_all_properties_as_required() -> None:
    schema = search.input_schema
    objects = _objects(schema)
    assert len(objects) == 2  # the arguments and Filters
    for node in objects:
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])
    assert "default" not in str(schema)


def test_optional_parameters_become_nullable() -> None:
    props = search.input_schema["properties"]
    assert props["query"] == {"type": "string", "description": "What to look for."}
    assert props["limit"] == {
        "anyOf": [{"type": "integer"}, {"type": "null"}],
        "description": "At most this many.",
    }
    assert props["filters"] == {"anyOf": [{"$ref": "#/$defs/Filters"}, {"type": "null"}]}
    assert search.input_schema["$defs"]["Filters"]["properties"]["radius_km"] == {
        "anyOf": [{"type": "integer"}, {"type": "null"}]
    }
    assert search.meta.strict
    assert search.meta.spec().strict


async def test_null_for_an_optional_value_means_its_default() -> None:
    with anyio.fail_after(5):
        text = await search.execute(
            '{"query": "tea", "filters": {"city": "Kyoto", "radius_km": null}, "limit": null,'
            ' "pages": [{"city": "Nara", "radius_km": null}]}'
        )
    assert text == ("tea|city='Kyoto' radius_km=10|5|[Filters(city='Nara', radius_km=10)]")
    with anyio.fail_after(5):
        assert await search.execute('{"query": "tea", "filters": null}') == "tea|None|5|None"


async def test_null_for_a_required_value_is_still_an_error() -> None:
    with anyio.fail_after(5), pytest.raises(ToolError) as info:
        await search.execute('{"query": null, "limit": "x"}')
    assert str(info.value).splitlines()[1:] == [
        "- query: Input should be a valid string (got None)",
        "- limit: Input should be a valid integer, unable to parse string as an integer (got 'x')",
    ]


def test_the_non_strict_schema_is_left_as_pydantic_gives_it() -> None:
    @tool
    def f(a: int = 1) -> None:
        """F."""

    assert f.input_schema["properties"]["a"] == {"type": "integer", "default": 1}
    assert "required" not in f.input_schema


def test_types_strict_mode_cannot_express_are_refused() -> None:
    def free_keys(counts: dict[str, int]) -> None: ...
    def anything(value: Any) -> None: ...

    with pytest.raises(ConfigurationError, match=r"'free_keys'.*free-form keys"):
        tool(strict=True)(free_keys)
    with pytest.raises(ConfigurationError, match=r"'anything'.*any value"):
        tool(strict=True)(anything)
