"""A feature whose optional extra is missing says which extra to install."""

from __future__ import annotations

import json

import pytest

import llm_worker
from llm_worker._extras import require_extra
from llm_worker.errors import ConfigurationError, MissingExtraError


def test_an_installed_module_is_returned() -> None:
    assert require_extra("json", "none", feature="JSON") is json


def test_a_missing_module_names_the_extra_and_the_feature() -> None:
    with pytest.raises(MissingExtraError) as caught:
        require_extra("llm_worker_no_such_module", "mcp", feature="MCPServer")
    error = caught.value
    assert (error.extra, error.feature) == ("mcp", "MCPServer")
    assert "pip install 'llm-worker[mcp]'" in str(error)
    assert "MCPServer" in str(error)
    assert "llm_worker_no_such_module" in str(error)  # the import that failed, for a person
    # both a caller mistake and an ImportError, so either `except` catches it
    assert isinstance(error, ConfigurationError)
    assert isinstance(error, ImportError)
    assert isinstance(error.__cause__, ImportError)


def test_exported_from_the_package() -> None:
    assert llm_worker.MissingExtraError is MissingExtraError
