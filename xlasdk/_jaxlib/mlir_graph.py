"""Read a verified MLIR module's ``main`` function op by op, through the MLIR bindings' typed API.

:func:`read_main` turns ``func.func @main`` of a parsed module into plain Python records
(:class:`OpRecord`, :class:`RegionRecord`, :class:`MainRecord`): op names, operand and result
value numbers, result types as :data:`xlasdk._jaxlib.mlir.TypeInfo`, each attribute's MLIR
spelling, regions, locations. Nothing here parses text: every field comes from the bindings
(``Operation.name``, ``operands``, ``results``, ``attributes``, ``regions``, ``location``), and
the spellings are MLIR's own printing of each attribute, type and location, which parses back
in a module. :mod:`xlasdk.program.graph_import` builds the typed graph from the records.

The module's other top-level ops (private functions, Shardy meshes) are kept whole as their
generic-syntax text, so a module rebuilt around an edited ``main`` calls them as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jaxlib.mlir import ir as _ir

from .mlir import TypeInfo, _type_info, context, string_value

__all__ = [
    "OpRecord", "RegionRecord", "MainRecord", "GraphReadError", "read_main", "attribute_value", "registered_op_names",
    "main_locations", "OpClaim", "ops_named",
]


class GraphReadError(ValueError):
    """The module has a construct the graph cannot hold (a region with several blocks, a value
    used before it is defined, no ``main``); the message says which and where."""


@dataclass
class RegionRecord:
    """One single-block region: its block arguments (value number, type, type text), its ops, and
    the operands of its terminator (``stablehlo.return`` / ``func.return``) as value numbers."""

    args: list[tuple[int, TypeInfo, str, str]]  # (value, type, type text, location text)
    ops: list[OpRecord]
    returns: list[int]
    terminator: str  # the terminator's op name
    captures: list[int] = field(default_factory=list)  # values of enclosing scopes its ops use


@dataclass
class OpRecord:
    """One op: ``name`` (``stablehlo.add``), operand value numbers, results (value number, type,
    type text), attributes (name, MLIR spelling) in the op's order, regions, location text."""

    name: str
    operands: list[int]
    results: list[tuple[int, TypeInfo, str]]
    attrs: list[tuple[str, str]]
    regions: list[RegionRecord]
    loc: str
    captures: list[int] = field(default_factory=list)  # values of enclosing scopes its regions use


@dataclass
class MainRecord:
    """``func.func @main`` of a module, and what surrounds it."""

    module_name: str | None
    module_attrs: list[tuple[str, str]]  # the module op's attributes but sym_name
    others: list[str]  # every other top-level op, generic syntax with locations
    body: RegionRecord  # main's block: arguments, ops, the func.return operands
    arg_attrs: list[list[tuple[str, str]]]  # each argument's attributes (name, MLIR spelling)
    res_attrs: list[list[tuple[str, str]]]
    result_types: list[tuple[TypeInfo, str]]
    meshes: list[tuple[str, str]] = field(default_factory=list)  # Shardy meshes: (name, #sdy.mesh<...>)


def _attrs(op: Any) -> list[tuple[str, str]]:
    attrs = op.attributes
    out: list[tuple[str, str]] = []
    printed: dict[str, str] | None = None
    for name in attrs:
        try:
            out.append((name, str(attrs[name])))
        except TypeError:  # an attribute the bindings cannot hand to Python (dense complex elements)
            if printed is None:
                printed = _printed_attrs(str(op.get_asm(print_generic_op_form=True, large_elements_limit=None)))
            if name not in printed:
                raise GraphReadError(f"{op.name}: attribute {name!r} cannot be read") from None
            out.append((name, printed[name]))
    return out


def _printed_attrs(text: str) -> dict[str, str]:
    """``name -> spelling`` of the properties / attribute dictionary of an op's generic form (only
    for attributes the bindings cannot return: their spelling is all there is)."""
    out: dict[str, str] = {}
    i = text.find("<{")
    if i < 0:
        i = text.find("{")
        if i < 0:
            return out
        i -= 1
    i += 2
    depth, start, key, in_str = 0, i, None, False
    j = i
    while j < len(text):
        c = text[j]
        if in_str:
            if c == "\\":
                j += 2
                continue
            if c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "<([{":
            depth += 1
        elif c in ">)]}":
            if depth == 0:
                if key is not None:
                    out[key] = text[start:j].strip()
                break
            depth -= 1
        elif c == "=" and depth == 0 and key is None:
            key = text[start:j].strip()
            start = j + 1
        elif c == "," and depth == 0:
            if key is not None:
                out[key] = text[start:j].strip()
            key, start = None, j + 1
        j += 1
    return out


def _dict_list(attr: Any, n: int) -> list[list[tuple[str, str]]]:
    out: list[list[tuple[str, str]]] = []
    if attr is not None:
        arr = _ir.ArrayAttr(attr)
        for i in range(len(arr)):
            d = _ir.DictAttr(arr[i])
            out.append([(d[j].name, str(d[j].attr)) for j in range(len(d))])
    return out + [[] for _ in range(n - len(out))]


class _Reader:
    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.types: dict[str, TypeInfo] = {}  # a type's text -> its TypeInfo (a module has few types)

    def type(self, t: Any) -> tuple[TypeInfo, str]:
        text = str(t)
        info = self.types.get(text)
        if info is None:
            info = self.types[text] = _type_info(t)
        return info, text

    def value(self, v: Any) -> int:
        k = self.ids.get(v)
        if k is None:
            k = self.ids[v] = len(self.ids)
        return k

    def region(self, region: Any, where: str) -> tuple[RegionRecord, set[int]]:
        """The record of a region, and the values of enclosing scopes it uses."""
        blocks = list(region.blocks)
        if len(blocks) != 1:
            raise GraphReadError(f"{where}: a region with {len(blocks)} blocks (the graph holds single-block regions)")
        block = blocks[0]
        defined: set[int] = set()
        args = []
        for a in block.arguments:
            k = self.value(a)
            defined.add(k)
            args.append((k, *self.type(a.type), str(a.location)))
        ops: list[OpRecord] = []
        captured: set[int] = set()
        returns: list[int] = []
        terminator = ""
        ops_list = list(block.operations)
        for i, op in enumerate(ops_list):
            o = op.operation
            operands = [self.value(x) for x in o.operands]
            if i == len(ops_list) - 1 and o.name in ("stablehlo.return", "func.return", "mhlo.return", "sdy.return"):
                returns, terminator = operands, o.name
                captured.update(k for k in operands if k not in defined)
                break
            regions: list[RegionRecord] = []
            inner_caps: set[int] = set()
            for r in o.regions:
                rec, caps = self.region(r, f"{where} > {o.name}")
                rec.captures = sorted(caps)
                regions.append(rec)
                inner_caps |= caps
            rec_op = OpRecord(
                o.name, operands, [], _attrs(o), regions, str(o.location),
                sorted(inner_caps.difference(operands)) if inner_caps else [],
            )
            for k in operands:
                if k not in defined:
                    captured.add(k)
            captured |= {k for k in inner_caps if k not in defined}
            for res in o.results:
                k = self.value(res)
                defined.add(k)
                rec_op.results.append((k, *self.type(res.type)))
            ops.append(rec_op)
        else:
            raise GraphReadError(f"{where}: the block does not end in a return")
        return RegionRecord(args, ops, returns, terminator), captured


def read_main(module: Any, function: str = "main") -> MainRecord:
    """The :class:`MainRecord` of ``module`` (a parsed, verified ``ir.Module``): of its
    ``func.func @main``, or of the function named ``function`` (a function ``main`` calls; its record
    leaves out the rest of the module, which only a module built again from ``main`` needs).

    Raises
    ------
    GraphReadError
        No such function, a function without a body, or a multi-block region.
    """
    with context():
        mattrs = module.operation.attributes
        name = string_value(mattrs["sym_name"]) if "sym_name" in mattrs else None
        module_attrs = [(n, str(mattrs[n])) for n in mattrs if n != "sym_name"]
        main = None
        others: list[str] = []
        meshes: list[tuple[str, str]] = []
        for op in module.body.operations:
            o = op.operation
            attrs = o.attributes
            if main is None and o.name == "func.func" and "sym_name" in attrs and (
                string_value(attrs["sym_name"]) == function
            ):
                main = o
                continue
            if o.name == "sdy.mesh" and "sym_name" in attrs and "mesh" in attrs:
                meshes.append((string_value(attrs["sym_name"]), str(attrs["mesh"])))
            if function != "main":  # a called function's graph is read, never emitted as a module
                continue
            others.append(
                str(o.get_asm(print_generic_op_form=True, enable_debug_info=True, large_elements_limit=None))
            )
        if main is None:
            raise GraphReadError(f"the module has no '{function}' function (func.func @{function})")
        if not len(main.regions[0].blocks):
            raise GraphReadError(f"func.func @{function} has no body")
        ftype = _ir.FunctionType(_ir.TypeAttr(main.attributes["function_type"]).value)
        reader = _Reader()
        body, _ = reader.region(main.regions[0], function)
        mattrs_main = main.attributes
        n_in, n_out = len(ftype.inputs), len(ftype.results)
        return MainRecord(
            name,
            module_attrs,
            others,
            body,
            _dict_list(mattrs_main["arg_attrs"] if "arg_attrs" in mattrs_main else None, n_in),
            _dict_list(mattrs_main["res_attrs"] if "res_attrs" in mattrs_main else None, n_out),
            [(_type_info(t), str(t)) for t in ftype.results],
            meshes,
        )


def main_locations(module: Any, function: str = "main") -> tuple[list[str], list[tuple[str, str]]]:
    """The location of each argument of ``func.func @main`` (or of ``function``) of a parsed module,
    and ``(op name, location)`` of each op of its body but the terminator, in order: the ops
    :func:`read_main` records as the function's instructions. Locations are MLIR's spelling
    (``loc("dot.3")``).

    Raises
    ------
    GraphReadError
        No such function, or a function without a body.
    """
    with context():
        main = None
        for op in module.body.operations:
            o = op.operation
            attrs = o.attributes
            if o.name == "func.func" and "sym_name" in attrs and (
                string_value(attrs["sym_name"]) == function
            ):
                main = o
                break
        if main is None or not len(main.regions[0].blocks):
            raise GraphReadError(f"the module has no body of function '{function}'")
        block = main.regions[0].blocks[0]
        args = [str(a.location) for a in block.arguments]
        ops = [(op.operation.name, str(op.operation.location)) for op in block.operations]
        return args, ops[:-1]  # the terminator is no instruction


@dataclass
class OpClaim:
    """One op of a module as its types and attributes claim it: ``name`` (``stablehlo.fft``), the
    types of its operands and results (:data:`~xlasdk._jaxlib.mlir.TypeInfo`), its attributes as
    Python values (:func:`attribute_value`'s reading, through the bindings) and its location's
    spelling (``loc("fft.2")``); ``frontend_attributes`` its ``mhlo.frontend_attributes`` as XLA
    reads them (:func:`~xlasdk._jaxlib.shardy.frontend_attributes`: name to string, None when
    it has none), and ``returned`` whether ``func.func @main`` returns one of its results (an
    operand of main's ``func.return``: what XLA's exporter reads a result's sharding from)."""

    name: str
    operands: list[TypeInfo]
    results: list[TypeInfo]
    attrs: dict[str, Any]
    loc: str
    frontend_attributes: dict[str, str | None] | None = None
    returned: bool = False


def ops_named(module: Any, names: frozenset[str]) -> list[OpClaim]:
    """Every op of ``module`` (a parsed, verified ``ir.Module``) whose name is in ``names``, in
    every function and nested region, in order; read without recursion (a module nested
    thousands of regions deep is walked like a flat one)."""
    import numpy as np

    from .shardy import frontend_attributes

    out: list[OpClaim] = []
    with context():
        # (ops of a block, whether the block is main's body)
        stack: list[tuple[Any, bool]] = [(iter(module.body.operations), False)]
        while stack:
            op = next(stack[-1][0], None)
            if op is None:
                stack.pop()
                continue
            o = op.operation
            if o.name in names:
                attrs: dict[str, Any] = {}
                for a in o.attributes:
                    try:
                        attrs[a] = _py(o.attributes[a], np)
                    except TypeError:  # an attribute the bindings cannot hand to Python
                        attrs[a] = None
                returned = stack[-1][1] and any(u.owner.name == "func.return" for r in o.results for u in r.uses)
                out.append(OpClaim(o.name, [_type_info(x.type) for x in o.operands],
                                   [_type_info(x.type) for x in o.results], attrs, str(o.location),
                                   frontend_attributes(o.attributes), returned))
            main = len(stack) == 1 and o.name == "func.func" and "sym_name" in o.attributes and (
                string_value(o.attributes["sym_name"]) == "main")
            for r in reversed(list(o.regions)):
                for b in reversed(list(r.blocks)):
                    stack.append((iter(b.operations), main))
    return out


def attribute_value(text: str) -> Any:
    """A Python value of an attribute's MLIR spelling, read through the bindings: ``int`` /
    ``float`` / ``bool`` / ``str`` for scalar attributes, a tuple for ``array<...>`` attributes,
    a numpy array for ``dense<...>`` elements, a list for arrays of those, a dict for
    dictionaries; the spelling itself for anything else (dialect attributes such as
    ``#stablehlo.comparison_direction<LT>``)."""
    import numpy as np

    with context():
        try:
            a = _ir.Attribute.parse(text)
        except Exception:  # an attribute of a dialect this context lacks
            return text
        return _py(a, np)


def attribute_text(text: str) -> str:
    """An attribute's spelling as the bindings print it once parsed (what :func:`read_main` gives
    for the same attribute of a parsed module); ``text`` itself where the bindings cannot parse it."""
    with context():
        try:
            return str(_ir.Attribute.parse(text))
        except TypeError:  # one the bindings cannot hand to Python (dense complex elements): the printer's
            pass
        except Exception:  # an attribute of a dialect this context lacks
            return text
        try:
            m = _ir.Module.parse(f"module attributes {{xlasdk.a = {text}}} {{\n}}")
        except Exception:
            return text
        printed = str(m.operation.get_asm(large_elements_limit=None))
        head, tail = "module attributes {xlasdk.a = ", "} {"
        i, j = printed.find(head), printed.rfind(tail)
        return printed[i + len(head):j] if 0 <= i < j else text


# StableHLO's structured attributes the bindings read field by field: their values become dicts
# (``{"lhs_contracting_dimensions": (1,), ...}``) or, for enums, the name (``"LT"``).
_STABLEHLO_ATTRS = (
    "DotDimensionNumbers", "GatherDimensionNumbers", "ScatterDimensionNumbers", "ConvDimensionNumbers",
    "ComparisonDirectionAttr", "ComparisonTypeAttr", "PrecisionAttr", "FftTypeAttr", "RngAlgorithmAttr",
    "RngDistributionAttr", "TransposeAttr", "ChannelHandle", "ResultAccuracyModeAttr",
)
_META = frozenset({"context", "dump", "get", "get_named", "isinstance", "maybe_downcast", "parse", "type", "typeid"})


def _stablehlo_value(a: Any) -> Any:
    from jaxlib.mlir.dialects import stablehlo

    for name in _STABLEHLO_ATTRS:
        cls = getattr(stablehlo, name, None)
        if cls is None or not cls.isinstance(a):
            continue
        obj = cls(a)
        fields = {}
        for f in dir(obj):
            if f.startswith("_") or f in _META:
                continue
            try:
                v = getattr(obj, f)
            except Exception:  # a field this attribute kind does not have
                continue
            if callable(v):
                continue
            fields[f] = tuple(int(x) for x in v) if isinstance(v, (list, tuple)) else v
        if set(fields) == {"value"}:
            return str(fields["value"])
        return fields
    return None


def _py(a: Any, np: Any) -> Any:
    try:
        a = a.maybe_downcast() if hasattr(a, "maybe_downcast") else a
    except TypeError:  # an attribute kind the bindings cannot name (dense complex elements)
        return _complex_dense(a, np)
    structured = _stablehlo_value(a)
    if structured is not None:
        return structured
    if isinstance(a, _ir.BoolAttr):
        return bool(a.value)
    if isinstance(a, _ir.IntegerAttr):
        return int(a.value)
    if isinstance(a, _ir.FloatAttr):
        return float(a.value)
    if isinstance(a, _ir.StringAttr):
        return string_value(a)
    if isinstance(a, (_ir.DenseI64ArrayAttr, _ir.DenseI32ArrayAttr)):
        return tuple(int(v) for v in a)
    if isinstance(a, _ir.DenseBoolArrayAttr):
        return tuple(bool(v) for v in a)
    if isinstance(a, _ir.UnitAttr):
        return True
    if isinstance(a, _ir.DenseElementsAttr):
        try:
            return np.array(a)
        except Exception:  # element types the buffer protocol lacks (bf16, f8, i4)
            got = _dense_other(a, np)
            return str(a) if got is None else got
    if isinstance(a, _ir.ArrayAttr):
        return [_py(a[i], np) for i in range(len(a))]
    if isinstance(a, _ir.DictAttr):
        return {a[i].name: _py(a[i].attr, np) for i in range(len(a))}
    return str(a)


def registered_op_names() -> set[str]:
    """The StableHLO and CHLO op names this jaxlib's MLIR bindings define (each dialect module's
    op classes, by their ``OPERATION_NAME``)."""
    from jaxlib.mlir.dialects import chlo, stablehlo

    out: set[str] = set()
    for mod in (stablehlo, chlo):
        for attr in dir(mod):
            name = getattr(getattr(mod, attr), "OPERATION_NAME", None)
            if isinstance(name, str):
                out.add(name)
    return out


def _dense_other(a: Any, np: Any) -> Any:
    """The array of a dense attribute of an element type numpy's buffer protocol lacks (bf16, the
    fp8 types, sub-byte integers), through ``ml_dtypes``: a splat from its one value; otherwise
    from MLIR's hex spelling of the raw bytes, or from its decimals read as f64 / i64 (exact for
    these narrow types). None when none of these applies."""
    from ..types import etype_from_mlir, etype_to_dtype

    t = _ir.RankedTensorType(a.type)
    shape = [int(d) for d in t.shape]
    elem = str(t.element_type)
    try:
        dt = np.dtype(etype_to_dtype(etype_from_mlir(elem)))
    except (KeyError, TypeError, ValueError):
        return None
    if a.is_splat:
        v = a.get_splat_value().maybe_downcast()
        value = float(v.value) if isinstance(v, _ir.FloatAttr) else int(v.value)
        return np.full(shape, value, dtype=np.float64 if dt.kind not in "iub" else np.int64).astype(dt)
    text = str(a)
    if text.startswith('dense<"0x'):
        return _hex_elements(text[len('dense<"0x'):text.index('"', len('dense<"0x'))], shape, dt, np)
    wide = "f64" if dt.kind not in "iub" else "i64"
    try:
        dims = "x".join(map(str, shape)) + "x" if shape else ""
        w = _ir.Attribute.parse(text[: text.rindex(":")] + f": tensor<{dims}{wide}>")
        return np.array(w).astype(dt)
    except Exception:
        return None


def _complex_dense(a: Any, np: Any) -> Any:
    """A dense complex attribute, from MLIR's spelling: a splat ``dense<(re,im)>`` or the raw bytes
    ``dense<"0x...">``; its spelling otherwise."""
    import re

    text = str(a)
    m = re.fullmatch(r'dense<(.*)> : tensor<((?:\d+x)*)complex<(f32|f64)>>', text, re.S)
    if not m:
        return text
    body, dims, part = m.groups()
    shape = [int(d) for d in dims.split("x") if d]
    dt = np.dtype(np.complex64 if part == "f32" else np.complex128)
    if body.startswith('"0x'):
        got = _hex_elements(body[3:-1], shape, dt, np)
        return text if got is None else got
    splat = re.fullmatch(r"\(([^,()]+),([^,()]+)\)", body.strip())
    if splat:
        try:
            return np.full(shape, complex(float(splat.group(1)), float(splat.group(2))), dtype=dt)
        except ValueError:
            return text
    return text


def _hex_elements(hex_digits: str, shape: list[int], dt: Any, np: Any) -> Any:
    """The array MLIR spells as ``dense<"0x...">``: raw little-endian elements, or None when the
    byte count does not fit ``shape``."""
    raw = bytes.fromhex(hex_digits)
    n = int(np.prod(shape)) if shape else 1
    if len(raw) != dt.itemsize * n:
        return None
    return np.frombuffer(raw, dtype=dt).reshape(shape).copy()
