"""A static checker of a package's shape: import cycles, layer order, module and function size.

It reads the source with `ast` and never imports it. Every import statement counts wherever it
sits (module level or inside a function: a cycle hidden behind a function-level import is still
a cycle at run time); imports under `if TYPE_CHECKING:` never run, so they count for the layer
order but not for cycles.

An import resolves to the modules that run because of it: `import a.b.c` and `from a.b import c`
run `a.b.c` and every package above it that is not already a parent of the importer (a module's
own parent packages are loaded before it, so reaching them is no edge). `from pkg import Name`
through a package that loads names lazily (a module-level `__getattr__`) resolves to the module
its `if TYPE_CHECKING:` block imports `Name` from; so does `pkg.Name` read after `import pkg`.
`importlib.import_module("a.b")` and `__import__("a.b")` with a literal name count as
`import a.b`; with an f-string (`f"a._wire_{x}"`), as imports of every module its literal
head starts.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

Layers = Sequence[tuple[str, Sequence[str]]]
"""Layers from the lowest up: (name, module prefixes). A module may import its layer or lower."""


@dataclass(frozen=True, slots=True)
class Import:
    """One resolved import: `source` runs `target` (line `line` of `source`)."""

    source: str
    target: str
    line: int
    type_checking: bool


@dataclass(slots=True)
class Tree:
    """A package's modules (dotted name -> file) and the imports between them."""

    package: str
    files: dict[str, Path] = field(default_factory=dict[str, Path])
    packages: set[str] = field(default_factory=set[str])
    imports: list[Import] = field(default_factory=list[Import])


def scan(root: Path) -> Tree:
    """Read every module under the package folder `root` (its name is the folder's name)."""
    tree = Tree(root.name)
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
            tree.packages.add(".".join(parts))
        tree.files[".".join(parts)] = path
    lazy = {name: _lazy_names(tree, name) for name in tree.packages}
    for name, path in tree.files.items():
        module = ast.parse(path.read_text())
        statements = [
            *_imports(module, type_checking=False),
            *((node, False) for node in _lazy_attributes(tree, lazy, name, module)),
        ]
        for node, type_checking in statements:
            for target in _resolve(tree, lazy, name, node):
                tree.imports.append(Import(name, target, node.lineno, type_checking))
    return tree


def _is_type_checking(node: ast.If) -> bool:
    return ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _imports(
    node: ast.AST, *, type_checking: bool
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, type_checking
        elif isinstance(child, ast.Call) and (dynamic := _dynamic_import(child)):
            yield dynamic, type_checking
            yield from _imports(child, type_checking=type_checking)
        elif isinstance(child, ast.If) and _is_type_checking(child):
            for stmt in child.body:
                yield from _imports(ast.Module([stmt], []), type_checking=True)
            for stmt in child.orelse:
                yield from _imports(ast.Module([stmt], []), type_checking=type_checking)
        else:
            yield from _imports(child, type_checking=type_checking)


_DYNAMIC = ("importlib.import_module", "import_module", "__import__")


def _dynamic_import(call: ast.Call) -> ast.Import | ast.ImportFrom | None:
    """`import_module("a.b")` or `__import__("a.b")` as the statement it amounts to.

    A relative name (`".b"`, given the importer's package) becomes `from . import b`; an
    f-string with a literal head (`f"a._wire_{x}"`) imports every module the head starts
    (`import a._wire_*`): one of them runs, the checker cannot know which.
    """
    if ast.unparse(call.func) not in _DYNAMIC or not call.args:
        return None
    arg = call.args[0]
    if isinstance(arg, ast.JoinedStr) and arg.values:
        arg, wildcard = arg.values[0], "*"
    else:
        wildcard = ""
    if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
        return None
    module = arg.value.lstrip(".")
    level = len(arg.value) - len(module)
    if level:
        parent, _, name = module.rpartition(".")
        found = ast.ImportFrom(parent or None, [ast.alias(name + wildcard)], level)
    else:
        found = ast.Import([ast.alias(module + wildcard)])
    return ast.copy_location(found, call)


def _lazy_names(tree: Tree, package: str) -> dict[str, str]:
    """`Name -> module` of a package with a module-level `__getattr__`, else empty."""
    body = ast.parse(tree.files[package].read_text()).body
    if not any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in body):
        return {}
    found: dict[str, str] = {}
    for node in body:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom):
                    module = _absolute(tree, package, stmt)
                    found.update({a.asname or a.name: module for a in stmt.names})
    return found


def _lazy_attributes(
    tree: Tree, lazy: dict[str, dict[str, str]], source: str, module: ast.Module
) -> Iterator[ast.ImportFrom]:
    """`pkg.Name` read through a lazily loading package the module imported, as the
    `from pkg import Name` it amounts to (`import llm_worker` then `llm_worker.Worker`)."""
    bound: dict[str, str] = {}
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                names = [".".join(parts[:n]) for n in range(1, len(parts) + 1)]
                bound.update({alias.asname: alias.name} if alias.asname else {n: n for n in names})
        elif isinstance(node, ast.ImportFrom):
            package = _absolute(tree, source, node)
            bound.update({a.asname or a.name: f"{package}.{a.name}" for a in node.names})
    for node in ast.walk(module):
        if isinstance(node, ast.Attribute):
            package = bound.get(ast.unparse(node.value), "")
            if node.attr in lazy.get(package, {}):
                yield ast.copy_location(ast.ImportFrom(package, [ast.alias(node.attr)], 0), node)


def _absolute(tree: Tree, source: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = source.split(".")
    if source not in tree.packages:
        base.pop()
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _resolve(
    tree: Tree, lazy: dict[str, dict[str, str]], source: str, node: ast.Import | ast.ImportFrom
) -> set[str]:
    targets: set[str] = set()
    if isinstance(node, ast.Import):
        for alias in node.names:
            for name in _matching(tree, alias.name):
                targets |= _run_by(tree, source, name)
        return targets
    module = _absolute(tree, source, node)
    for alias in node.names:
        star = alias.name == "*"  # `from a import *`: the names of `a`, not its modules
        submodules = [] if star else _matching(tree, f"{module}.{alias.name}")
        if any(name in tree.files for name in submodules):
            for name in submodules:
                targets |= _run_by(tree, source, name)
        elif alias.name in lazy.get(module, {}):
            targets |= _run_by(tree, source, module) | _run_by(
                tree, source, lazy[module][alias.name]
            )
        else:  # a name defined in `module` itself: it must have run, parent or not
            targets |= _run_by(tree, source, module)
            targets |= {module} if module in tree.files and module != source else set()
    return targets


def _matching(tree: Tree, name: str) -> list[str]:
    """`[name]`, or for a head with a wildcard (`a._wire_*`) every module it starts."""
    if not name.endswith("*"):
        return [name]
    return sorted(m for m in tree.files if m.startswith(name[:-1]))


def _run_by(tree: Tree, source: str, module: str) -> set[str]:
    """`module` and the packages above it that are not already parents of `source`."""
    parts = module.split(".")
    chain = {".".join(parts[:n]) for n in range(1, len(parts) + 1)}
    own = {".".join(source.split(".")[:n]) for n in range(1, source.count(".") + 1)}
    return {m for m in chain - own if m in tree.files and m != source}


# -- the checks -------------------------------------------------------------------------------


def cycles(tree: Tree) -> list[list[str]]:
    """Every import cycle among imports that run, each as a path `[a, b, …, a]`."""
    graph: dict[str, set[str]] = {name: set() for name in tree.files}
    for imp in tree.imports:
        if not imp.type_checking:
            graph[imp.source].add(imp.target)
    return [_cycle_through(graph, scc) for scc in _strongly_connected(graph) if len(scc) > 1]


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    # Kosaraju: a DFS finishing order, then a sweep of the reversed graph in reverse order.
    order: list[str] = []
    seen: set[str] = set()
    for start in sorted(graph):
        _finish(graph, start, seen, order)
    reverse: dict[str, set[str]] = {name: set() for name in graph}
    for name, targets in graph.items():
        for target in targets:
            reverse[target].add(name)
    found: list[set[str]] = []
    assigned: set[str] = set()
    for start in reversed(order):
        if start not in assigned:
            component: list[str] = []
            _finish(reverse, start, assigned, component)
            found.append(set(component))
    return found


def _finish(graph: dict[str, set[str]], start: str, seen: set[str], out: list[str]) -> None:
    if start in seen:
        return
    seen.add(start)
    stack = [(start, iter(sorted(graph[start])))]
    while stack:
        node, children = stack[-1]
        child = next((c for c in children if c not in seen), None)
        if child is None:
            stack.pop()
            out.append(node)
        else:
            seen.add(child)
            stack.append((child, iter(sorted(graph[child]))))


def _cycle_through(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        node = frontier.pop(0)
        for child in sorted(graph[node] & component):
            if child == start:
                return [*paths[node], start]
            if child not in paths:
                paths[child] = [*paths[node], child]
                frontier.append(child)
    raise AssertionError(f"no cycle through {start}")


def oversized_modules(tree: Tree, limit: int = 600) -> list[str]:
    """Modules over `limit` lines, as `name: N lines`."""
    sizes = {name: len(path.read_text().splitlines()) for name, path in tree.files.items()}
    return [f"{name}: {n} lines" for name, n in sorted(sizes.items()) if n > limit]


def long_functions(tree: Tree, limit: int = 60) -> list[str]:
    """Functions and methods over `limit` lines (decorators included), as `module.name: N`."""
    found: list[str] = []
    for name, path in sorted(tree.files.items()):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                size = (node.end_lineno or node.lineno) - first + 1
                if size > limit:
                    found.append(f"{name}.{node.name} (line {node.lineno}): {size} lines")
    return found


def layer_of(layers: Layers, module: str) -> int | None:
    """The rank of `module`'s layer (0 the lowest): its longest matching prefix decides."""
    best: tuple[int, int] | None = None
    for rank, (_, prefixes) in enumerate(layers):
        for prefix in prefixes:
            matches = module == prefix or module.startswith(prefix + ".")
            if matches and (best is None or len(prefix) > best[0]):
                best = (len(prefix), rank)
    return None if best is None else best[1]


def layer_violations(
    tree: Tree,
    layers: Layers,
    exempt: Sequence[str] = (),
    may_import: Mapping[str, Sequence[str]] | None = None,
) -> list[str]:
    """Modules in no layer, and imports (TYPE_CHECKING ones too) of a higher layer.

    With `may_import` (layer -> the lower layers it may import), layers side by side in the
    order stay apart too: an import of a lower layer not listed is reported as well.
    """
    found = [
        f"{name} is in no layer"
        for name in sorted(tree.files)
        if name not in exempt and layer_of(layers, name) is None
    ]
    for imp in tree.imports:
        if imp.source in exempt or imp.target in exempt:
            continue
        low, high = layer_of(layers, imp.source), layer_of(layers, imp.target)
        if low is None or high is None or high == low:
            continue
        allowed = may_import is None or layers[high][0] in may_import[layers[low][0]]
        if high > low or not allowed:
            found.append(
                f"{imp.source} (layer {layers[low][0]}) imports {imp.target} "
                f"(layer {layers[high][0]}) at line {imp.line}"
            )
    return found
