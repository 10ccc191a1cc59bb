"""ToolRegistry: tools by name, duplicates refused, specs for the request."""

from typing import Any

import pytest

import llm_worker
from llm_worker import ConfigurationError, ToolSpec
from llm_worker.tools import ToolMeta, ToolRegistry, tool


@tool(effect="read_only")
def get_weather(city: str) -> str:
    """Weather of a city."""
    return city


@tool
async def send_mail(to: str) -> str:
    """Send a mail."""
    return to


class Handwritten:
    name = "handwritten"
    description = "By hand."
    input_schema: dict[str, Any] = {"type": "object", "properties": {}}  # noqa: RUF012
    exclusive = True

    async def execute(self, input_json: str) -> str:
        return input_json


class App:
    def __init__(self) -> None:
        self.users = {"7": "Ann"}

    @tool
    def get_user(self, user_id: str) -> str:
        """A user by id."""
        return self.users[user_id]


def test_registry_holds_tools_by_name_in_order() -> None:
    hand = Handwritten()
    app = App()
    registry = ToolRegistry([get_weather, send_mail, hand, app.get_user])
    assert registry.names == ("get_weather", "send_mail", "handwritten", "get_user")
    assert len(registry) == 4
    assert list(registry) == [get_weather, send_mail, hand, app.get_user]
    assert registry.get("send_mail") is send_mail
    assert registry.get("nope") is None
    assert "get_weather" in registry
    assert "nope" not in registry
    assert 3 not in registry
    assert registry.meta("get_weather") is get_weather.meta
    assert registry.meta("nope") is None
    metas = registry.metas
    assert list(metas) == list(registry.names)
    assert metas["handwritten"].exclusive
    with pytest.raises(TypeError):
        metas["x"] = get_weather.meta  # type: ignore[index]
    assert "ToolRegistry(['get_weather'" in repr(registry)


def test_specs_are_what_the_model_is_offered() -> None:
    registry = ToolRegistry()
    registry.add(get_weather)
    registry.add(Handwritten())
    specs = registry.specs()
    assert specs == [
        ToolSpec("get_weather", "Weather of a city.", get_weather.input_schema),
        ToolSpec("handwritten", "By hand.", {"type": "object", "properties": {}}),
    ]
    specs.clear()  # the caller's list; the registry keeps its own
    assert len(registry.specs()) == 2


def test_two_tools_with_one_name_are_refused() -> None:
    @tool(name="get_weather")
    def other(city: str) -> str:
        """Another."""
        return city

    registry = ToolRegistry([get_weather])
    with pytest.raises(ConfigurationError, match="two tools are named 'get_weather'"):
        registry.add(other)
    with pytest.raises(ConfigurationError, match="'send_mail'"):
        ToolRegistry([send_mail, send_mail])
    assert registry.names == ("get_weather",)  # the refused one left no trace


def test_two_instances_of_one_method_tool_clash_by_name() -> None:
    with pytest.raises(ConfigurationError, match="'get_user'"):
        ToolRegistry([App().get_user, App().get_user])


def test_things_that_are_not_tools_are_refused() -> None:
    def plain(city: str) -> str:
        return city

    with pytest.raises(ConfigurationError, match="decorate the function with @tool"):
        ToolRegistry([plain])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="register it through an instance"):
        ToolRegistry([App.get_user])

    class BadName(Handwritten):
        name = "bad name"

    with pytest.raises(ConfigurationError, match="'bad name'"):
        ToolRegistry([BadName()])


def test_public_names() -> None:
    for name in ("tool", "Tool", "ToolMeta", "ToolResult", "FunctionTool", "ToolRegistry"):
        assert name in llm_worker.__all__
        assert getattr(llm_worker, name) is getattr(llm_worker.tools, name)
    assert isinstance(get_weather, llm_worker.Tool)
    assert isinstance(Handwritten(), llm_worker.Tool)
    assert isinstance(ToolMeta("a", "b", {}), ToolMeta)
