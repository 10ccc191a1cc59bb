"""The package's shape: one-way layers, no import cycle, no module or function too long.

The layer order is the one docs/internals.md draws. A module imports only its own layer or a
lower one; `llm_worker/__init__.py` is the lazy facade over every layer and stands outside.
The checker itself is tested below on small synthetic packages, so a failure of the real tree
is known to be reported.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

import llm_worker
from support.architecture import (
    Layers,
    cycles,
    layer_violations,
    long_functions,
    oversized_modules,
    scan,
)

SRC = Path(llm_worker.__file__).parent

MODEL = ("llm_worker.errors", "llm_worker.events", "llm_worker.messages", "llm_worker._json")
LAYERS: Layers = (
    (
        "model",
        ("llm_worker.errors", "llm_worker.events", "llm_worker.messages", "llm_worker._json"),
    ),
    ("providers", ("llm_worker.providers",)),
    ("timeline", ("llm_worker.timeline", "llm_worker.collectors")),
    ("blobs", ("llm_worker.blobs",)),
    ("tools", ("llm_worker.tools",)),
    ("worker", ("llm_worker.worker", "llm_worker.hooks", "llm_worker.state")),
    ("testing", ("llm_worker.testing",)),
    ("cli", ("llm_worker.cli",)),
)
FACADE = ("llm_worker",)


# -- the real tree ----------------------------------------------------------------------------


def test_no_import_cycle_among_imports_that_run() -> None:
    assert cycles(scan(SRC)) == []


def test_every_module_sits_in_a_layer_and_imports_only_its_own_or_lower() -> None:
    assert layer_violations(scan(SRC), LAYERS, FACADE) == []


def test_no_module_over_600_lines() -> None:
    assert oversized_modules(scan(SRC)) == []


def test_no_function_over_60_lines() -> None:
    assert long_functions(scan(SRC)) == []


def test_the_scan_sees_the_real_imports() -> None:
    imports = {(i.source, i.target, i.type_checking) for i in scan(SRC).imports}
    # function level, through the lazy top-level package, and TYPE_CHECKING only
    assert ("llm_worker.worker._worker", "llm_worker.providers", False) in imports
    assert ("llm_worker.cli._chat", "llm_worker.worker", False) in imports
    assert ("llm_worker.worker._turn", "llm_worker.worker._config", True) in imports


def test_a_cycle_hidden_in_a_function_of_the_real_tree_is_reported(tmp_path: Path) -> None:
    copy = tmp_path / "llm_worker"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))
    scan_module = copy / "blobs" / "_json_scan.py"
    scan_module.write_text(
        scan_module.read_text()
        + "\n\ndef _late() -> object:\n    from llm_worker.blobs import _store\n\n"
        + "    return _store\n"
    )
    found = cycles(scan(copy))
    assert len(found) == 1
    assert {"llm_worker.blobs._json_scan", "llm_worker.blobs._store"} <= set(found[0])


# -- the checker, on synthetic packages -------------------------------------------------------

TYPE_CHECKING = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"


def make(root: Path, files: dict[str, str]) -> Path:
    """Write a package `pkg` under `root` from `relative path -> source`."""
    package = root / "pkg"
    for relative, source in {"__init__.py": "", **files}.items():
        path = package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    return package


def test_a_module_level_cycle_is_reported_as_a_path(tmp_path: Path) -> None:
    package = make(
        tmp_path,
        {"a.py": "from pkg import b\n", "b.py": "from pkg.c import x\n", "c.py": "import pkg.a\n"},
    )
    assert cycles(scan(package)) == [["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]


def test_a_cycle_behind_a_function_level_import_counts(tmp_path: Path) -> None:
    package = make(
        tmp_path,
        {
            "a.py": "from pkg.b import y\nx = 1\n",
            "b.py": "y = 2\n\ndef late():\n    from pkg.a import x\n    return x\n",
        },
    )
    assert cycles(scan(package)) == [["pkg.a", "pkg.b", "pkg.a"]]


def test_a_cycle_through_type_checking_imports_only_is_fine(tmp_path: Path) -> None:
    package = make(
        tmp_path,
        {
            "a.py": "from pkg.b import y\nx = 1\n",
            "b.py": TYPE_CHECKING + "    from pkg.a import x\ny = 2\n",
        },
    )
    assert cycles(scan(package)) == []


def test_importing_a_sibling_through_the_own_package_is_a_cycle(tmp_path: Path) -> None:
    package = make(
        tmp_path,
        {
            "sub/__init__.py": "from pkg.sub._one import One\n",
            "sub/_one.py": "from pkg.sub import _two\nclass One: ...\n",
            "sub/_two.py": "from pkg.sub import One\n",
        },
    )
    found = cycles(scan(package))
    assert found == [["pkg.sub", "pkg.sub._one", "pkg.sub._two", "pkg.sub"]]


def test_a_submodule_reaching_its_parent_package_implicitly_is_no_cycle(tmp_path: Path) -> None:
    package = make(
        tmp_path,
        {
            "sub/__init__.py": "from pkg.sub._one import One\n",
            "sub/_one.py": "import pkg.sub._two as two\nclass One: ...\n",
            "sub/_two.py": "x = 1\n",
        },
    )
    assert cycles(scan(package)) == []


LOW_HIGH: Layers = (("low", ("pkg.low",)), ("high", ("pkg.high",)))


def test_an_import_of_a_higher_layer_is_reported_type_checking_included(tmp_path: Path) -> None:
    package = make(
        tmp_path,
        {
            "low.py": TYPE_CHECKING + "    from pkg.high import H\n",
            "high.py": "from pkg import low\nclass H: ...\n",
        },
    )
    found = layer_violations(scan(package), LOW_HIGH, ("pkg",))
    assert found == ["pkg.low (layer low) imports pkg.high (layer high) at line 3"]


def test_a_module_in_no_layer_is_reported(tmp_path: Path) -> None:
    package = make(tmp_path, {"low.py": "", "stray.py": ""})
    assert layer_violations(scan(package), LOW_HIGH, ("pkg",)) == ["pkg.stray is in no layer"]


def test_a_lazy_name_of_a_facade_resolves_to_its_module(tmp_path: Path) -> None:
    facade = """\
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from pkg.high import H
        def __getattr__(name):
            import importlib
            return getattr(importlib.import_module("pkg.high"), name)
        """
    package = make(
        tmp_path,
        {"__init__.py": facade, "low.py": "def f():\n    from pkg import H\n", "high.py": ""},
    )
    found = layer_violations(scan(package), LOW_HIGH, ("pkg",))
    assert found == ["pkg.low (layer low) imports pkg.high (layer high) at line 2"]


@pytest.mark.parametrize(("lines", "reported"), [(600, False), (601, True)])
def test_a_module_over_the_limit_is_reported(tmp_path: Path, lines: int, reported: bool) -> None:
    package = make(tmp_path, {"big.py": "x = 1\n" * lines})
    assert oversized_modules(scan(package)) == (["pkg.big: 601 lines"] if reported else [])


@pytest.mark.parametrize(("body", "reported"), [(58, False), (59, True)])
def test_a_function_over_the_limit_is_reported(tmp_path: Path, body: int, reported: bool) -> None:
    source = "@staticmethod\ndef f():\n" + "    x = 1\n" * body
    package = make(tmp_path, {"long.py": source})
    expected = [f"pkg.long.f (line 2): {body + 2} lines"] if reported else []
    assert long_functions(scan(package)) == expected
