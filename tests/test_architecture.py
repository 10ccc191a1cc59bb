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

MODEL = (
    "llm_worker.errors",
    "llm_worker.events",
    "llm_worker.messages",
    "llm_worker._json",
    "llm_worker._wide_json",
    "llm_worker._extras",
    "llm_worker._media",
    "llm_worker._sniff",
    "llm_worker._strict",
    "llm_worker._retries",
    "llm_worker._log",
    "llm_worker._fieldwise",
    "llm_worker._cost",
    "llm_worker._secrets",
    "llm_worker._tokens",
    "llm_worker._media_tokens",
    "llm_worker._models_builtin",
    "llm_worker.models",
)
LAYERS: Layers = (
    (
        "model",
        MODEL,
    ),
    ("providers", ("llm_worker.providers",)),
    ("timeline", ("llm_worker.timeline", "llm_worker.collectors")),
    ("blobs", ("llm_worker.blobs",)),
    ("tools", ("llm_worker.tools",)),
    ("mcp", ("llm_worker.mcp",)),
    (
        "worker",
        (
            "llm_worker.worker",
            "llm_worker.limits",
            "llm_worker.sessions",
            "llm_worker.hooks",
            "llm_worker.state",
            "llm_worker.guardrails",
            "llm_worker.otel",
            "llm_worker._pause_checks",
            "llm_worker._pause_json",
            "llm_worker._pause_outputs",
            "llm_worker._run_events",
        ),
    ),
    ("testing", ("llm_worker.testing",)),
    ("ui", ("llm_worker.ui",)),
    ("durable", ("llm_worker.durable",)),
    ("cli", ("llm_worker.cli",)),
)
FACADE = ("llm_worker",)
# What each package's docstring allows: layers side by side in the order stay apart (the blob
# layer never imports the timeline or providers, the timeline never imports providers).
LOWER = ("model", "providers", "timeline", "blobs", "tools", "mcp", "worker", "testing")
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "model": (),
    "providers": ("model",),
    "timeline": ("model",),
    "blobs": ("model",),
    "tools": ("model", "timeline", "blobs"),
    "mcp": ("model", "timeline", "blobs", "tools"),
    "worker": ("model", "providers", "timeline", "blobs", "tools"),
    "testing": LOWER[:-1],
    "ui": LOWER[:-1],  # beside testing: the web adapters never import the test doubles
    "durable": LOWER[:-1],  # beside testing: never the test doubles
    "cli": (*LOWER, "ui"),
}


# -- the real tree ----------------------------------------------------------------------------


def test_no_import_cycle_among_imports_that_run() -> None:
    assert cycles(scan(SRC)) == []


def test_every_module_sits_in_a_layer_and_imports_only_its_own_or_lower() -> None:
    assert layer_violations(scan(SRC), LAYERS, FACADE, MAY_IMPORT) == []


def test_no_module_over_600_lines() -> None:
    assert oversized_modules(scan(SRC)) == []


def test_no_function_over_60_lines() -> None:
    assert long_functions(scan(SRC)) == []


def test_the_scan_sees_the_real_imports() -> None:
    imports = {(i.source, i.target, i.type_checking) for i in scan(SRC).imports}
    # function level, through the lazy top-level package, and TYPE_CHECKING only
    assert ("llm_worker.worker._owned", "llm_worker.providers", False) in imports
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


# -- imports the statements do not spell -----------------------------------------------------

DYNAMIC = {
    "import_module": "import importlib\nm = importlib.import_module('pkg.high')\n",
    "bare import_module": "from importlib import import_module\nm = import_module('pkg.high')\n",
    "relative import_module": "import importlib\nm = importlib.import_module('.high', 'pkg')\n",
    "__import__": "m = __import__('pkg.high')\n",
    "__import__ in a decorator": "@__import__('pkg.high').high.deco\ndef f(): ...\n",
    "__import__ in a default": "def f(m=__import__('pkg.high')): ...\n",
    "f-string head": "import importlib\ndef f(x):\n    importlib.import_module(f'pkg.hi{x}')\n",
}


@pytest.mark.parametrize("source", DYNAMIC.values(), ids=list(DYNAMIC))
def test_an_import_by_name_is_an_import(tmp_path: Path, source: str) -> None:
    package = make(tmp_path, {"low.py": source, "high.py": "def deco(f): return f\n"})
    found = layer_violations(scan(package), LOW_HIGH, ("pkg",))
    assert len(found) == 1
    assert found[0].startswith("pkg.low (layer low) imports pkg.high (layer high) at line ")


def test_a_cycle_behind_an_import_by_name_counts(tmp_path: Path) -> None:
    late = (
        "def late(name):\n    import importlib\n    return importlib.import_module(f'pkg.{name}')\n"
    )
    package = make(tmp_path, {"a.py": "import pkg.b\n", "b.py": late})
    assert cycles(scan(package)) == [["pkg.a", "pkg.b", "pkg.a"]]


FACADE_INIT = """\
    from typing import TYPE_CHECKING
    if TYPE_CHECKING:
        from {module} import H
    def __getattr__(name):
        import importlib
        return getattr(importlib.import_module("pkg.high"), name)
    """


@pytest.mark.parametrize(
    "low",
    [
        "import pkg\ndef f():\n    return pkg.H\n",
        "import pkg as p\ndef f():\n    return p.H\n",
        "from pkg import H\n",
    ],
    ids=["import pkg; pkg.H", "import pkg as p; p.H", "from pkg import H"],
)
@pytest.mark.parametrize("module", ["pkg.high", ".high"], ids=["absolute", "relative"])
def test_a_lazy_name_read_through_the_facade_resolves_to_its_module(
    tmp_path: Path, low: str, module: str
) -> None:
    init = FACADE_INIT.format(module=module)
    package = make(tmp_path, {"__init__.py": init, "low.py": low, "high.py": "H = 1\n"})
    found = layer_violations(scan(package), LOW_HIGH, ("pkg",))
    assert [f.rsplit(" at line ", 1)[0] for f in found] == [
        "pkg.low (layer low) imports pkg.high (layer high)"
    ]


SIDE_BY_SIDE: Layers = (
    ("model", ("pkg.model",)),
    ("left", ("pkg.left",)),
    ("right", ("pkg.right",)),
)


def test_a_layer_imports_only_the_lower_layers_it_may(tmp_path: Path) -> None:
    package = make(
        tmp_path,
        {
            "model.py": "",
            "left.py": "from pkg import model\n",
            "right.py": "from pkg import left\n",
        },
    )
    tree = scan(package)
    assert layer_violations(tree, SIDE_BY_SIDE, ("pkg",)) == []
    may_import = {"model": (), "left": ("model",), "right": ("model",)}
    assert layer_violations(tree, SIDE_BY_SIDE, ("pkg",), may_import) == [
        "pkg.right (layer right) imports pkg.left (layer left) at line 1"
    ]


@pytest.mark.parametrize(
    "guard", ["if TYPE_CHECKING:", "if typing.TYPE_CHECKING:"], ids=["name", "attribute"]
)
def test_both_spellings_of_type_checking_keep_a_cycle_out(tmp_path: Path, guard: str) -> None:
    b = f"import typing\nfrom typing import TYPE_CHECKING\n{guard}\n    import pkg.a\n"
    package = make(tmp_path, {"a.py": "import pkg.b\n", "b.py": b})
    assert cycles(scan(package)) == []


@pytest.mark.parametrize(
    "guarded",
    [
        "import sys\nif sys.version_info >= (3, 12):\n    import pkg.high\n",
        "try:\n    import pkg.high\nexcept ImportError:\n    pass\n",
        "class C:\n    import pkg.high\n",
        "from . import high\n",
        "import pkg.high as h\n",
    ],
    ids=["version", "try", "class body", "relative", "import as"],
)
def test_every_statement_form_is_seen(tmp_path: Path, guarded: str) -> None:
    package = make(tmp_path, {"low.py": guarded, "high.py": ""})
    found = layer_violations(scan(package), LOW_HIGH, ("pkg",))
    assert [f.rsplit(" at line ", 1)[0] for f in found] == [
        "pkg.low (layer low) imports pkg.high (layer high)"
    ]


def test_the_decoders_loaded_by_name_import_no_module_that_loads_them() -> None:
    imports = {(i.source, i.target) for i in scan(SRC).imports}
    assert ("llm_worker.testing._decode", "llm_worker.testing._decode_gemini") in imports
    assert ("llm_worker.testing._model_server", "llm_worker.testing._wire_gemini") in imports
