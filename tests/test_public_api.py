"""The public API's invariants: lazy maps, `__all__`, typing imports, and a light import.

The exact list of names is not pinned here (it grows); what every name must satisfy is.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import orjson
import pytest

import llm_worker
import llm_worker.providers

PACKAGES = [llm_worker, llm_worker.providers]
HEAVY = ("httpx", "httpcore", "aiohttp", "pydantic", "pydantic_core", "anyio")


def lazy_map(module: ModuleType) -> dict[str, str]:
    lazy: dict[str, str] = vars(module)["_LAZY"]
    return lazy


def type_checking_imports(module: ModuleType) -> dict[str, str]:
    """`name -> module` for the `from X import name` statements under `if TYPE_CHECKING:`."""
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom), ast.unparse(stmt)
                for alias in stmt.names:
                    found[alias.asname or alias.name] = stmt.module or ""
    return found


@pytest.mark.parametrize("package", PACKAGES, ids=lambda m: m.__name__)
def test_all_is_a_duplicate_free_tuple(package: ModuleType) -> None:
    assert isinstance(package.__all__, tuple)
    assert len(set(package.__all__)) == len(package.__all__)
    assert all(isinstance(n, str) and n and not n.startswith("_") for n in package.__all__)


@pytest.mark.parametrize("package", PACKAGES, ids=lambda m: m.__name__)
def test_every_lazy_name_is_public_and_every_public_name_resolves(package: ModuleType) -> None:
    lazy = lazy_map(package)
    assert set(lazy) <= set(package.__all__)
    eager = set(package.__all__) - set(lazy)
    for name in package.__all__:
        value = getattr(package, name)
        if name in lazy:
            assert value is getattr(importlib.import_module(lazy[name]), name)
        else:
            assert name in eager
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__name__ == name, name
            assert value.__module__.startswith("llm_worker"), name


def test_the_top_level_package_defines_nothing_eagerly() -> None:
    assert set(llm_worker.__all__) == set(lazy_map(llm_worker))


@pytest.mark.parametrize("package", PACKAGES, ids=lambda m: m.__name__)
def test_dir_lists_every_public_name_before_any_is_loaded(package: ModuleType) -> None:
    # In a fresh interpreter: here the names may already sit in the module's globals.
    listed = run_and_print(f"import {package.__name__} as m", "dir(m)")
    assert set(package.__all__) <= set(listed)


@pytest.mark.parametrize("package", PACKAGES, ids=lambda m: m.__name__)
def test_an_unknown_name_is_an_attribute_error(package: ModuleType) -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        getattr(package, "no_such_name")  # noqa: B009


@pytest.mark.parametrize("package", PACKAGES, ids=lambda m: m.__name__)
def test_type_checkers_see_every_lazy_name_from_its_module(package: ModuleType) -> None:
    # Without the TYPE_CHECKING import, pyright types a lazily loaded name as Any.
    imports = type_checking_imports(package)
    lazy = lazy_map(package)
    missing = sorted(set(lazy) - set(imports))
    assert not missing, f"add to the TYPE_CHECKING imports of {package.__name__}: {missing}"
    wrong = {n: (imports[n], m) for n, m in lazy.items() if imports[n] != m}
    assert not wrong, f"TYPE_CHECKING import and _LAZY disagree (imported, lazy): {wrong}"


@pytest.mark.parametrize("package", PACKAGES, ids=lambda m: m.__name__)
def test_star_import_gives_every_public_name(package: ModuleType) -> None:
    namespace: dict[str, object] = {}
    exec(f"from {package.__name__} import *", namespace)
    assert set(package.__all__) <= set(namespace)


@pytest.mark.parametrize("package", PACKAGES, ids=lambda m: m.__name__)
def test_public_classes_and_functions_have_docstrings(package: ModuleType) -> None:
    undocumented = []
    for name in package.__all__:
        value = getattr(package, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            doc = inspect.getdoc(value) or ""
            # A dataclass without a docstring gets its signature as one.
            if not doc or doc.startswith(f"{name}("):
                undocumented.append(name)
    assert not undocumented


def run_and_print(code: str, expression: str) -> list[str]:
    """Run `code` in a fresh interpreter and return the JSON list `expression` evaluates to."""
    result = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys, json\nprint(json.dumps({expression}))"],
        capture_output=True,
        check=True,
        timeout=60,
    )
    return orjson.loads(result.stdout)


def modules_after(code: str) -> list[str]:
    return run_and_print(code, "sorted(sys.modules)")


def heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in HEAVY or m.startswith("llm_worker.providers")]


def test_import_llm_worker_stays_light() -> None:
    modules = modules_after("import llm_worker")
    assert "llm_worker" in modules
    assert heavy(modules) == []


def test_the_event_and_message_model_need_no_http_and_no_pydantic() -> None:
    modules = modules_after(
        "import llm_worker\nllm_worker.Message, llm_worker.TextDelta, llm_worker.ProviderError"
    )
    assert "llm_worker.messages" in modules
    assert heavy(modules) == []


def test_import_providers_loads_no_client_until_asked() -> None:
    modules = modules_after("import llm_worker.providers")
    assert [m for m in modules if m.split(".")[0] in HEAVY] == []
    assert [m for m in modules if m.startswith("llm_worker.providers.")] == []
