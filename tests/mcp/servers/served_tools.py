"""llm-worker tools served over MCP on stdio, by `llm_worker.mcp.serve`."""

import sys
from typing import Literal

import anyio

from llm_worker.errors import ToolError
from llm_worker.mcp import serve
from llm_worker.tools import tool


@tool(effect="read_only")
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(effect="idempotent")
def forecast(city: str, unit: Literal["C", "F"] = "C") -> dict[str, object]:
    """The weather forecast of a city.

    Args:
        city: The city's name.
        unit: The temperature's unit.
    """
    return {"city": city, "temperature": 21 if unit == "C" else 70, "unit": unit}


@tool
def refuse(reason: str) -> str:
    """Always fails, saying why."""
    raise ToolError(f"refused: {reason}")


tools = [add, forecast, refuse]

if __name__ == "__main__":
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    anyio.run(lambda: serve(tools, name="served-tools"))
