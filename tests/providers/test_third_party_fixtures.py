"""The third-party stream shapes say where their shape is documented, and that they were
written to it rather than recorded; the folder's README lists each."""

from __future__ import annotations

import pytest

from support.third_party import fixture_names, fixtures_dir, load

APIS = ("openai_chat", "openai_responses", "gemini")


@pytest.mark.parametrize("api", APIS)
def test_every_shape_names_its_documentation(api: str) -> None:
    readme = (fixtures_dir() / "README.md").read_text()
    for name in fixture_names(api):
        doc = load(api, name)
        source = doc["source"]
        assert source["kind"] == "written", name
        assert source["shape_of"] and source["documented_by"], name
        assert "not recorded" in source["notes"], name
        assert doc["response"]["body_verbatim"] is False, name
        assert f"`{api}/{name}.json`" in readme, name
