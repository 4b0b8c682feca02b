"""CONTRIBUTING's layering, kept true: the import graph of ``xlasdk`` read from the source.

Every ``import`` of an xlasdk module counts, inside functions too (a function-local import is
still a dependency, only a later one); imports under ``if TYPE_CHECKING:`` do not (they are
types only). Importing ``xlasdk.a.b`` also runs ``xlasdk/a/__init__.py``, so it depends on the
package ``xlasdk.a`` as well.

The checks:

* imports point down the layers (:data:`LAYERS`), except the few in :data:`UPWARD`, each
  commented where it is written;
* no import circle among xlasdk's modules (a strongly connected component of more than one
  module), none at all;
* package faces (``__init__.py``) export their ``__all__`` and nothing else, and no module
  imports a private name from a face;
* no module rewrites a class's ``__module__``;
* tests patch the module that defines a name (:func:`misplaced_patch`): ``monkeypatch.setattr``
  / ``delattr``, ``mock.patch("xlasdk.a.b")`` and ``patch.object`` on a package face that
  re-exports the name, or on a module that imported it, would not reach the code that uses it.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import sys
import textwrap
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

PKG = Path(__file__).resolve().parent.parent / "xlasdk"
TESTS = Path(__file__).resolve().parent

#: Layers, lowest first: a module may import its own layer and the layers below. A module belongs
#: to the layer of the longest prefix that names it.
LAYERS: tuple[tuple[str, ...], ...] = (
    # leaf modules: the vocabulary every layer uses
    ("errors", "types", "_where", "_atomic", "_version", "_cache", "_cache_trust", "_mlir_attrs", "_optable",
     "_metadata", "_proto", "_numbers", "shape", "attrs", "sharding"),
    ("_jaxlib",),  # the only code that touches jaxlib internals
    ("builder", "_graph"),  # the graph: XlaOp nodes, regions, the builder
    ("ops._core",),  # argument checks and tuple plumbing every op family needs
    ("ops",),  # the op families: rows, shape rules, wrappers
    ("program", "_emit", "_hlo_emit"),  # the program model's parts (origins, import, graph walker) and its emitters
    ("formats",),  # each format read into a computation's parts, and written
    ("program.computation", "program.static_interface"),  # the computation: made of a format's parts, saved by one
    ("formats.load", "formats.snapshot"),  # files: computations made of what the readers read
    ("runtime",),  # compile and run
    ("reference", "bisect", "reducer", "_reduce_text", "_reduce_graph", "_reduce_regions", "_reduce_against",
     "_reduce_partitions", "_reduce_condition",
     "_failure_signature", "_triage", "inputs", "_graph_layout",
     "distributed", "launch"),  # the tools
    ("cli", "xla_client", ""),  # the command line, the former xla_client surface, the package face
)

#: The imports that point up, as (importer, imported layer prefix): each is function-local and
#: commented where it is written.
UPWARD: dict[tuple[str, str], str] = {
    ("builder", "ops"): "XlaOp's Python operators: x + y is ops.Add(x, y)",
    ("builder", "program"): "XlaBuilder.build makes an XlaComputation of the graph",
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


@functools.cache
def lazy_face(face: str) -> dict[str, str]:
    """A package face's PEP 562 names (its ``_LAZY`` table) -> the module its ``__getattr__`` imports
    for each: ``from ..formats import load_computation`` imports ``formats.load`` at run time, and
    the import graph says so (a lazy face must not hide an edge)."""
    tree = ast.parse(MODULES[face].read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "_LAZY":
            assert node.value is not None
            table = ast.literal_eval(node.value)
            out = {}
            for public, where in table.items():
                sub = f"{face}.{where[0] if isinstance(where, tuple) else where}"
                if sub in MODULES:
                    out[public] = sub
            return out
    return {}


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
                    elif mod in MODULES and a.name in lazy_face(mod):  # the module a lazy face imports
                        yield Import(name, lazy_face(mod)[a.name], (a.name,), inner, ch.lineno, src)
                    elif mod in MODULES:
                        yield Import(name, mod, (a.name,), inner, ch.lineno, src)
            elif isinstance(ch, ast.Import):
                for a in ch.names:
                    if a.name in MODULES:
                        yield Import(name, a.name, (), inner, ch.lineno, src)
            yield from visit(ch, inner)

    yield from visit(tree, False)


@functools.cache
def all_imports() -> tuple[Import, ...]:
    """Every import between xlasdk's modules, read once, when a test first asks (not at collection,
    where each xdist worker would parse all of xlasdk: ~1.5 s of CPU each)."""
    return tuple(i for m in MODULES for i in imports_of(m) if i.target != m)


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


def _upward_key(importer: str, target_prefix: str) -> tuple[str, str] | None:
    """The :data:`UPWARD` entry that allows ``importer`` to import a module of the layer prefix
    ``target_prefix`` (an entry names a package: ``("builder", "program")`` allows every
    ``program.*``)."""
    short = _short(importer)
    return next((k for k in UPWARD
                 if short == k[0] and (target_prefix == k[1] or target_prefix.startswith(k[1] + "."))), None)


def _allowed_upward(i: Import) -> bool:
    (li, _), (lt, tp) = layer_of(i.importer), layer_of(i.target)
    return lt > li and _upward_key(i.importer, tp) is not None


def graph() -> dict[str, set[str]]:
    """The import graph, without the allowed upward imports (which close a circle by design: they
    are what the layer below calls on the layer above, at run time)."""
    g: dict[str, set[str]] = {m: set() for m in MODULES}
    for i in all_imports():
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
    for i in all_imports():
        (li, _), (lt, tp) = layer_of(i.importer), layer_of(i.target)
        if lt <= li:
            continue
        key = (_short(i.importer).split(".")[0] if li == 0 else _short(i.importer), tp)
        allowed = _upward_key(i.importer, tp)
        if allowed is None:
            bad.append(f"{i.importer}:{i.line} imports {i.target} (layer {lt} above {li}): {i.source.strip()}")
        elif not i.lazy or "#" not in i.source:
            bad.append(f"{i.importer}:{i.line}: the upward import {key} must be function-local and commented")
        seen.add(allowed)
    assert not bad, "\n".join(bad)
    assert len(UPWARD) <= 2
    assert seen == set(UPWARD), f"UPWARD lists imports that no longer exist: {set(UPWARD) - seen}"


def test_a_lazy_face_hides_no_import() -> None:
    """``from xlasdk.formats import load_computation`` (the face imports ``formats.load`` when the name
    is first used, PEP 562) is read as an import of ``formats.load``, not of the face, whose static
    imports are empty: the layering and the circles see what runs."""
    assert lazy_face("xlasdk.formats")["load_computation"] == "xlasdk.formats.load"
    assert lazy_face("xlasdk.formats")["computation_from_hlo_text"] == "xlasdk.formats.load"
    got = {(i.target, i.names) for i in imports_of("xlasdk.cli._inspect")}
    assert ("xlasdk.formats.load", ("load_computation",)) in got, got
    assert ("xlasdk.formats.hlo_text", ("hlo_opcode_counts",)) in got, got
    assert not any(t == "xlasdk.formats" for t, _ in got), got


def test_no_import_circles() -> None:
    circles = sorted(sorted(c) for c in strongly_connected(graph()) if len(c) > 1)
    assert not circles, f"import circles: {circles}"


def _largest_circle(package_edges: bool) -> int:
    """The size of the largest import circle when the allowed upward imports count too: the
    modules that a run-time call up the layers ties together (module edges only, or with the
    package faces each import runs first)."""
    g: dict[str, set[str]] = {m: set() for m in MODULES}
    for i in all_imports():
        g[i.importer].add(i.target)
        if package_edges:
            g[i.importer].update(p for p in _packages_of(i.target)
                                 if p != i.importer and not i.importer.startswith(p + "."))
    return max(len(c) for c in strongly_connected(g))


def test_the_upward_imports_tie_few_modules_together() -> None:
    """Counting the upward imports (:data:`UPWARD`) and what a lazy package face imports at run time
    (:func:`lazy_face`), what they close stays as small as the API allows: the builder, every op
    family, the computation and its origins, the graph import and edit, and the readers a
    computation's file methods call (their shape-rule check runs every family's rule): 35 modules.
    Issue 44: the bound was 14 while the ``formats`` face's PEP 562 table hid the file methods'
    imports (``from ..formats import computation_from_hlo_text``); read through the face, that tree
    closed the same 35 modules with 3 upward imports, now 2. The program model's API ties them:
    ``XlaBuilder.build`` makes a computation, ``XlaComputation.from_hlo_text`` reads a module,
    the read checks every op row's shape rule, and the op families build with the builder. It
    does not grow back."""
    size = _largest_circle(package_edges=False)
    print(f"largest import circle with the upward imports: {size} modules "
          f"({_largest_circle(package_edges=True)} with package edges)")
    assert size <= 35


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
    for i in all_imports():  # nobody takes from a face what it does not export
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


@pytest.mark.parametrize("module", ["xlasdk.builder", "xlasdk._optable", "xlasdk.shape", "xlasdk.program.computation",
                                    "xlasdk.program.graph_edit", "xlasdk.program._worker"])
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


# -- tests patch the defining module ---------------------------------------------------------------


@dataclass(frozen=True)
class Patch:
    line: int
    target: str  # the dotted path of the patched object (a module or a class), as the test names it
    name: str  # the attribute patched on it
    source: str


def _import_bindings(node: ast.AST, package: str) -> dict[str, str]:
    """The names bound by the imports directly in ``node``'s scope (not in nested functions), as
    dotted paths."""
    out: dict[str, str] = {}

    def visit(n: ast.AST) -> None:
        for ch in ast.iter_child_nodes(n):
            if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(ch, ast.Import):
                for a in ch.names:
                    if a.asname:
                        out[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        out[top] = top
            elif isinstance(ch, ast.ImportFrom):
                base = ch.module or ""
                if ch.level:
                    parts = package.split(".")[: len(package.split(".")) - (ch.level - 1)]
                    base = ".".join([*parts, *([ch.module] if ch.module else [])])
                for a in ch.names:
                    out[a.asname or a.name] = f"{base}.{a.name}"
            visit(ch)

    visit(node)
    return out


def _dotted(expr: ast.expr, scope: dict[str, str]) -> str | None:
    """``a.b.c`` with ``a`` resolved through the imports in scope; None for anything else."""
    if isinstance(expr, ast.Name):
        return scope.get(expr.id)
    if isinstance(expr, ast.Attribute):
        base = _dotted(expr.value, scope)
        return None if base is None else f"{base}.{expr.attr}"
    return None


def _str(expr: ast.expr | None) -> str | None:
    return expr.value if isinstance(expr, ast.Constant) and isinstance(expr.value, str) else None


def _is_patch(func: ast.expr) -> bool:
    """``patch`` or ``<anything>.patch`` (``mock.patch``, ``unittest.mock.patch``)."""
    return (isinstance(func, ast.Name) and func.id == "patch") or (isinstance(func, ast.Attribute) and
                                                                   func.attr == "patch")


def patch_targets(source: str, package: str = "tests") -> list[Patch]:
    """Every patch a test file makes whose target can be read from the source: the dotted path
    of the patched object (resolved through the file's imports, the enclosing functions' first)
    and the name patched on it.

    The forms: ``monkeypatch.setattr(obj, "name", value)`` (and ``delattr``),
    ``monkeypatch.setattr("pkg.mod.name", value)``, ``patch("pkg.mod.name")`` (``mock.patch``,
    as a call, a decorator or a context manager) and ``patch.object(obj, "name")``.
    """
    tree = ast.parse(source)
    lines = source.splitlines()
    out: list[Patch] = []

    def visit(node: ast.AST, scope: dict[str, str]) -> None:
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)):
            scope = {**scope, **_import_bindings(node, package)}
        if isinstance(node, ast.Call):
            f, args = node.func, node.args
            path: str | None = None
            name: str | None = None
            if isinstance(f, ast.Attribute) and f.attr in ("setattr", "delattr") and args:
                text = _str(args[0])
                if text is not None and (len(args) == (2 if f.attr == "setattr" else 1)):
                    path, _, name = text.rpartition(".")
                elif len(args) >= 2:
                    path, name = _dotted(args[0], scope), _str(args[1])
            elif isinstance(f, ast.Attribute) and f.attr == "object" and _is_patch(f.value) and len(args) >= 2:
                path, name = _dotted(args[0], scope), _str(args[1])
            elif _is_patch(f) and args and _str(args[0]) is not None:
                path, _, name = (_str(args[0]) or "").rpartition(".")
            if path and name:
                out.append(Patch(node.lineno, path, name, lines[node.lineno - 1].strip()))
        for ch in ast.iter_child_nodes(node):
            visit(ch, scope)

    visit(tree, {})
    return out


def _resolve_object(path: str) -> Any:
    """The object ``path`` names: the longest importable module prefix, then attributes."""
    parts = path.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for p in parts[k:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(path)


def _assigned_in(module: types.ModuleType, name: str) -> bool:
    """``name`` is bound at module level by something other than an import (an assignment, a
    ``def``, a ``class``), in the module's source."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):
        return True  # no source to read: nothing to say
    def binds(node: ast.AST) -> bool:
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if ch.name == name:
                    return True
                continue
            if isinstance(ch, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = ch.targets if isinstance(ch, ast.Assign) else [ch.target]
                for t in targets:
                    if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(t)):
                        return True
            elif not isinstance(ch, (ast.Import, ast.ImportFrom)) and binds(ch):
                return True
        return False
    return binds(tree)


def misplaced_patch(path: str, name: str) -> str | None:
    """Why patching ``name`` on the object ``path`` names misses the code that uses it (None
    when it does not): the object is an xlasdk module that does not define ``name`` (a face
    re-exporting it, or a module that imported it), or an xlasdk class that inherits it.

    A function's or class's home is its ``__module__``; any other value's is the module whose
    source assigns it. A module value (``monkeypatch.setattr(mod, "os", ...)``) is the importing
    module's own binding, and objects outside xlasdk are not checked.
    """
    try:
        obj = _resolve_object(path)
    except (ImportError, AttributeError):
        return None  # not importable here: the test itself says so when it runs
    if isinstance(obj, types.ModuleType):
        if not obj.__name__.startswith("xlasdk"):
            return None
        if not hasattr(obj, name):
            return None  # the patch itself fails (monkeypatch and mock.patch refuse a missing name)
        value = inspect.unwrap(getattr(obj, name)) if callable(getattr(obj, name)) else getattr(obj, name)
        if isinstance(value, types.ModuleType):
            return None
        home = getattr(value, "__module__", None) if isinstance(value, (type, types.FunctionType)) else None
        if home is not None:
            if home != obj.__name__:
                return f"{name} is defined in {home}, not {obj.__name__}: patch {home}.{name}"
            return None
        if not _assigned_in(obj, name):
            return f"{obj.__name__} does not assign {name} (it imports it): patch the module that defines it"
        return None
    if isinstance(obj, type) and obj.__module__.startswith("xlasdk"):
        if name not in vars(obj):
            owner = next((c for c in obj.__mro__ if name in vars(c)), None)
            where = f"{owner.__module__}.{owner.__qualname__}" if owner else "no class"
            return f"{obj.__qualname__} does not define {name} ({where} does): patch the class that defines it"
    return None


def _test_files() -> list[Path]:
    return sorted(TESTS.rglob("*.py"))


def test_tests_patch_the_defining_module() -> None:
    bad = []
    for path in _test_files():
        rel = path.relative_to(TESTS.parent)
        package = ".".join(rel.with_suffix("").parts[:-1])
        for p in patch_targets(path.read_text(encoding="utf-8"), package):
            why = misplaced_patch(p.target, p.name)
            if why:
                bad.append(f"{rel}:{p.line}: {why}: {p.source}")
    assert not bad, "\n".join(bad)


_PLANTED = textwrap.dedent('''
    from unittest import mock
    from unittest.mock import patch

    import xlasdk.attrs as A
    from xlasdk import ops
    from xlasdk.ops import _core, elementwise
    from xlasdk.sharding import _hlo_sharding


    def test_bad(monkeypatch):
        monkeypatch.setattr(A, "OpSharding", object)  # the face re-exports it
        monkeypatch.setattr("xlasdk.ops.Add", None)  # the ops face re-exports it
        monkeypatch.setattr(_hlo_sharding, "_int_list", None)  # imported from xlasdk._proto
        monkeypatch.setattr(_core, "PRED", None)  # assigned in _core: fine
        with mock.patch("xlasdk.ops.elementwise.Add"):  # defined there: fine
            pass
        with patch.object(ops, "Mul"):  # re-exported
            pass


    @mock.patch("xlasdk.attrs.make_replica_groups")  # re-exported by the face
    def test_decorated(m):
        from xlasdk.attrs import _replica_groups as rg
        monkeypatch.setattr(rg, "make_replica_groups", None)  # defined there: fine
        monkeypatch.setattr(rg, "_dim", None)  # imported from attrs._base
        monkeypatch.setattr(elementwise.XlaOp, "__add__", None)  # builder.XlaOp defines it: fine
        monkeypatch.setattr(_hlo_sharding.OpSharding, "__eq__", None)  # inherited from _ProtoLike
        monkeypatch.setattr("xlasdk.sharding._spmd.TUPLE", None)  # a value _spmd imports from _optable
        monkeypatch.setattr("xlasdk._optable.TUPLE", None)  # assigned there: fine
''')


def test_the_patch_check_catches_planted_patches() -> None:
    found = [(p.line, p.target, p.name, misplaced_patch(p.target, p.name)) for p in patch_targets(_PLANTED)]
    flagged = sorted((line, target, name) for line, target, name, why in found if why)
    assert flagged == [
        (12, "xlasdk.attrs", "OpSharding"),
        (13, "xlasdk.ops", "Add"),
        (14, "xlasdk.sharding._hlo_sharding", "_int_list"),
        (18, "xlasdk.ops", "Mul"),
        (22, "xlasdk.attrs", "make_replica_groups"),
        (26, "xlasdk.attrs._replica_groups", "_dim"),
        (28, "xlasdk.sharding._hlo_sharding.OpSharding", "__eq__"),
        (29, "xlasdk.sharding._spmd", "TUPLE"),
    ], found
    assert len(found) == 13  # the fine ones were read too, and passed
