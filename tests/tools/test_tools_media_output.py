"""A tool's images inside JSON-like results (a dict, a dataclass, a mixed list) stay images."""

from __future__ import annotations

import json
from dataclasses import dataclass

import anyio
import pytest

from llm_worker import ImagePart, ToolUsePart, Worker, tool
from llm_worker.testing import ScriptedClient, ScriptedResponse
from llm_worker.tools._text import as_output
from support.media import png

pytestmark = pytest.mark.anyio

SHOT = ImagePart.from_bytes(png(3, 2))


@dataclass
class Capture:
    caption: str
    image: ImagePart


@tool(effect="read_only")
def annotated() -> dict[str, object]:
    """A screenshot with its caption and size."""
    return {"caption": "the page", "width": 3, "image": SHOT}


async def test_an_image_in_a_dict_result_reaches_the_model_as_an_image() -> None:
    client = ScriptedClient(
        [ScriptedResponse([ToolUsePart("c1", "annotated", {})]), ScriptedResponse.text("ok")]
    )
    with anyio.fail_after(5):
        await Worker(client, tools=[annotated]).run("look")
    [result] = client.requests[1].messages[-1].tool_results
    assert result.media == [SHOT]
    assert json.loads(result.content) == {
        "caption": "the page",
        "width": 3,
        "image": "[image 1: image/png]",
    }


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Capture("c", SHOT), {"caption": "c", "image": "[image 1: image/png]"}),
        ([SHOT, 5, None], ["[image 1: image/png]", 5, None]),
        ({"pages": [[SHOT]]}, {"pages": [["[image 1: image/png]"]]}),
    ],
)
def test_parts_inside_json_data_become_media_and_placeholders(value: object, text: object) -> None:
    out = as_output(value)
    assert isinstance(out, list)
    assert out[1:] == [SHOT]
    assert isinstance(out[0], str) and json.loads(out[0]) == text


def test_json_data_without_parts_stays_plain_json_text() -> None:
    assert as_output({"a": [1, 2], "b": Capture("c", None)}) == (  # type: ignore[arg-type]
        '{"a":[1,2],"b":{"caption":"c","image":null}}'
    )


def test_a_cycle_holding_a_part_neither_hangs_nor_loses_the_image() -> None:
    cycle: list[object] = [SHOT]
    cycle.append(cycle)
    out = as_output(cycle)
    assert isinstance(out, list) and SHOT in out[1:]
