"""CONTRIBUTING's layering, kept true: the import graph of ``xlasdk`` read from the source.

Every ``import`` of an xlasdk module counts, inside functions too (a function-local import is
still a dependency, only a later one); imports under ``if TYPE_CHECKING:`` do not (they are
types only). Importing ``xlasdk.a.b`` also runs ``xlasdk/a/__init__.py``, so it depends on the
package ``xlasdk.a`` as well.

The checks:

* imports point down the layers (:data:`LAYERS`), except the few in :data:`UPWARD`, each
  commented where it is written;
* no import circle among xlasdk's modules (a strongly connected component of more than one
  module), apart from :data:`CIRCLES`, each with its reason;
* package faces (``__init__.py``) export their ``__all__`` and nothing else, and no module
  imports a private name from a face;
* no module rewrites a class's ``__module__``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "xlasdk"

#: Layers, lowest first: a module may import its own layer and the layers below. A module belongs
#: to the layer of the longest prefix that names it.
LAYERS: tuple[tuple[str, ...], ...] = (
    # leaf modules: the vocabulary every layer uses
    ("errors", "types", "_where", "_atomic", "_version", "_cache", "_mlir_attrs", "_optable", "_metadata",
     "shape", "attrs", "sharding"),
    ("_jaxlib",),  # the only code that touches jaxlib internals
    ("builder",),  # the graph: XlaOp nodes, regions, the builder
    ("ops._core",),  # argument checks and tuple plumbing every op family needs
    ("ops",),  # the op families: rows, shape rules, wrappers
    ("computation", "_emit", "_hlo_emit"),  # a program and its emitters
    ("formats",),  # files: load, save, import into the graph
    ("runtime",),  # compile and run
    ("reference", "bisect", "reducer", "inputs", "_graph_layout", "distributed", "launch"),  # the tools
    ("cli", "xla_client", ""),  # the command line, the former xla_client surface, the package face
)

#: The imports that point up, as (importer, imported layer prefix): each is function-local and
#: commented where it is written.
UPWARD: dict[tuple[str, str], str] = {
    ("builder", "ops"): "XlaOp's Python operators: x + y is ops.Add(x, y)",
    ("builder", "computation"): "XlaBuilder.build makes an XlaComputation of the graph",
    ("computation", "formats"): "XlaComputation's loaders, savers and instruction graph are the formats' code",
}

#: Import circles that stay, by their modules, with the reason.
CIRCLES: dict[frozenset[str], str] = {
    frozenset({"xlasdk.attrs", "xlasdk.attrs._sharding", "xlasdk.sharding", "xlasdk.sharding._hlo_sharding",
               "xlasdk.sharding._parse"}): (
        "an OpSharding (the proto-shaped attribute) converts to and from an HloSharding (the parsed form): each "
        "side imports the other inside the conversion, so neither re-implements the other's parser and printer"
    ),
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.parts[-1] == "__init__" else rel.parts
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


@dataclass(frozen=True)
class Import:
    importer: str
    target: str  # a module of MODULES
    names: tuple[str, ...]  # the names taken with ``from X import a, b`` (empty for ``import X``)
    lazy: bool  # inside a function
    line: int
    source: str  # the source line


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def _resolve(importer: str, node: ast.ImportFrom) -> str:
    is_pkg = MODULES[importer].name == "__init__.py"
    base = importer.split(".") if is_pkg else importer.split(".")[:-1]
    if node.level:
        base = base[: len(base) - (node.level - 1)]
        return ".".join([*base, *([node.module] if node.module else [])])
    return node.module or ""


def imports_of(name: str) -> Iterator[Import]:
    path = MODULES[name]
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    tree = ast.parse(text)

    def visit(node: ast.AST, lazy: bool) -> Iterator[Import]:
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, ast.If) and _is_type_checking(ch):
                continue
            inner = lazy or isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            src = lines[ch.lineno - 1] if hasattr(ch, "lineno") else ""
            if isinstance(ch, ast.ImportFrom):
                mod = _resolve(name, ch)
                for a in ch.names:
                    sub = f"{mod}.{a.name}"
                    if sub in MODULES:  # ``from . import x``: the submodule x
                        yield Import(name, sub, (), inner, ch.lineno, src)
                    elif mod in MODULES:
                        yield Import(name, mod, (a.name,), inner, ch.lineno, src)
            elif isinstance(ch, ast.Import):
                for a in ch.names:
                    if a.name in MODULES:
                        yield Import(name, a.name, (), inner, ch.lineno, src)
            yield from visit(ch, inner)

    yield from visit(tree, False)


IMPORTS: list[Import] = [i for m in MODULES for i in imports_of(m) if i.target != m]


def _short(module: str) -> str:
    return module.removeprefix("xlasdk").removeprefix(".")


def layer_of(module: str) -> tuple[int, str]:
    """(layer index, the prefix that placed it)."""
    short = _short(module)
    best: tuple[int, str] | None = None
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if short == p or (p and short.startswith(p + ".")) or (not p and not short):
                if best is None or len(p) > len(best[1]):
                    best = (i, p)
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best


def _packages_of(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:k]) for k in range(1, len(parts)) if ".".join(parts[:k]) in MODULES]


def _allowed_upward(i: Import) -> bool:
    (li, _), (lt, tp) = layer_of(i.importer), layer_of(i.target)
    return lt > li and (_short(i.importer), tp) in UPWARD


def graph() -> dict[str, set[str]]:
    """The import graph, without the allowed upward imports (which close a circle by design: they
    are what the layer below calls on the layer above, at run time)."""
    g: dict[str, set[str]] = {m: set() for m in MODULES}
    for i in IMPORTS:
        if _allowed_upward(i):
            continue
        g[i.importer].add(i.target)
        for pkg in _packages_of(i.target):  # importing a.b runs a/__init__.py first
            if pkg != i.importer and not i.importer.startswith(pkg + "."):
                g[i.importer].add(pkg)
    return g


def strongly_connected(g: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[set[str]] = []
    counter = 0
    for root in g:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                out.append(comp)
    return out


def test_every_module_has_a_layer() -> None:
    for m in MODULES:
        layer_of(m)


def test_imports_point_down() -> None:
    bad, seen = [], set()
    for i in IMPORTS:
        (li, _), (lt, tp) = layer_of(i.importer), layer_of(i.target)
        if lt <= li:
            continue
        key = (_short(i.importer).split(".")[0] if li == 0 else _short(i.importer), tp)
        allowed = next((k for k in UPWARD if _short(i.importer) == k[0] and tp == k[1]), None)
        if allowed is None:
            bad.append(f"{i.importer}:{i.line} imports {i.target} (layer {lt} above {li}): {i.source.strip()}")
        elif not i.lazy or "#" not in i.source:
            bad.append(f"{i.importer}:{i.line}: the upward import {key} must be function-local and commented")
        seen.add(allowed)
    assert not bad, "\n".join(bad)
    assert len(UPWARD) <= 3
    assert seen == set(UPWARD), f"UPWARD lists imports that no longer exist: {set(UPWARD) - seen}"


def test_no_import_circles() -> None:
    circles = [c for c in strongly_connected(graph()) if len(c) > 1]
    found = {frozenset(c) for c in circles}
    unexpected = [sorted(c) for c in found if c not in CIRCLES]
    assert not unexpected, f"import circles: {unexpected}"
    assert set(CIRCLES) <= found, f"CIRCLES lists circles that are gone: {set(CIRCLES) - found}"


def _all_of(tree: ast.Module) -> set[str] | None:
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
                value = ast.literal_eval(node.value)
                return set(value)
    return None


def test_package_faces_export_their_all_only() -> None:
    bad = []
    for name, path in MODULES.items():
        if path.name != "__init__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        exported = _all_of(tree)
        if exported is None:
            continue
        for node in tree.body:  # top-level imports bind names of the face
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    bound = a.asname or a.name
                    sub = f"{_resolve(name, node)}.{a.name}"
                    if sub in MODULES or not node.level or a.name == "*":  # submodules, other packages, star
                        continue
                    if bound.startswith("_"):
                        bad.append(f"{name}: binds the private name {bound!r} (from {node.module})")
    for i in IMPORTS:  # nobody takes from a face what it does not export
        path = MODULES[i.target]
        if path.name == "__init__.py":
            exported = _all_of(ast.parse(path.read_text(encoding="utf-8"))) or set()
            for n in i.names:
                if n not in exported and n != "__version__" and f"{i.target}.{n}" not in MODULES:
                    bad.append(f"{i.importer}:{i.line} imports {n!r} from the face {i.target}, which does "
                               "not export it")
    assert not bad, "\n".join(bad)


def test_no_module_rewrites_dunder_module() -> None:
    bad = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Attribute) and t.attr == "__module__":
                        bad.append(f"{name}:{node.lineno}")
    assert not bad, f"__module__ rewritten at {bad}"


@pytest.mark.parametrize("module", ["xlasdk.builder", "xlasdk._optable", "xlasdk.shape", "xlasdk.computation"])
def test_low_layers_import_without_the_upper_ones(module: str) -> None:
    """Importing a module alone loads nothing above its layer (checked in a fresh interpreter).
    (A module of a package loads its package's face first, so the op families load with
    ``ops._core``: that is the package, not a layer above.)"""
    import subprocess

    code = (
        f"import sys; import importlib; importlib.import_module({module!r}); "
        "print('\\n'.join(m for m in sys.modules if m.startswith('xlasdk')))"
    )
    # ``import xlasdk.builder`` runs xlasdk/__init__.py, which loads the public names lazily.
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    mine = layer_of(module)[0]
    above = [m for m in out if m in MODULES and layer_of(m)[0] > mine and m != "xlasdk"]
    assert not above, f"importing {module} loaded {above}"
