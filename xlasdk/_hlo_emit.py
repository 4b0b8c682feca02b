"""Print an xlasdk graph directly as HLO text: the fast path of ``XlaComputation.as_hlo_text``.

The graph's ops are StableHLO ops (``XlaOp.opcode``, attributes as MLIR text), so this is a
StableHLO -> HLO printer for the ops that map one to one onto an HLO instruction: element-wise
ops, ``compare``, ``select``, ``clamp``, conversions, ``reduce_precision``, constants,
``broadcast_in_dim``, ``reshape``, ``transpose``, ``slice``, ``concatenate``, ``pad``,
``reverse``, ``dynamic_slice``, ``dynamic_update_slice``, ``iota``, ``dot_general``,
``convolution``, ``gather``, ``fft``, ``cholesky``, ``triangular_solve``, ``rng_bit_generator``,
``optimization_barrier``, collectives (``all_gather``, ``all_to_all`` along one dimension,
``collective_permute``, ``replica_id``, ``partition_id``), the ops with a region (``reduce``,
``reduce_window``, ``scatter``, ``all_reduce``, ``reduce_scatter``, ``sort``: the region becomes
an HLO computation), ``while``, ``if``/``case`` (as ``conditional``), tuples and inlined calls.
It gives the HLO of the ops *as built* (as jaxlib's former ``XlaBuilder`` did), in XLA's text
syntax (``%name = shape opcode(operands), attributes, metadata={...}``, default layouts),
without an MLIR context or XLA's converter, which costs about 25 us per op.

Anything else (CHLO ops, which XLA's converter expands; variadic or two-dimension collectives,
custom calls, shardings, side-effecting ops, fp8/int4 constants, ...) raises
:class:`Unsupported`, and the caller uses XLA's StableHLO -> HLO converter instead, which may
also fold and simplify. ``tests/test_hlo_emit.py`` checks the printed text against XLA: its HLO
parser accepts it, and the program computes the same values as the converter's HLO.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import ml_dtypes
import numpy as np

from ._emit import Val, inline_call, pending
from ._graph import Region
from ._metadata import FIELDS as _MD_FIELDS
from ._metadata import Location, name_location
from ._mlir_attrs import DenseElements
from ._optable import CALL, GET_TUPLE_ELEMENT, TUPLE, HloForm, HloUnsupported, braces
from .shape import Shape
from .types import PrimitiveType, hlo_element_name

if TYPE_CHECKING:  # the graph's node type (this module reads nodes; the builder makes them)
    from .builder import XlaOp

__all__ = ["Unsupported", "print_hlo_module"]

_P = PrimitiveType


#: The graph holds an op (or attribute, or constant) this printer does not handle.
Unsupported = HloUnsupported
_PLAIN_FORM = HloForm.PLAIN


# Element types whose constants are printed here (others go to the converter).
_CONST_TYPES = frozenset(
    {_P.PRED, _P.S8, _P.S16, _P.S32, _P.S64, _P.U8, _P.U16, _P.U32, _P.U64, _P.F16, _P.BF16, _P.F32, _P.F64,
     _P.C64, _P.C128}
)
# Words the HLO parser reads as something other than a name (names get a trailing "_").
_KEYWORDS = frozenset(
    {hlo_element_name(t) for t in PrimitiveType if t not in (_P.PRIMITIVE_TYPE_INVALID, _P.TUPLE, _P.OPAQUE_TYPE)}
    | {"token", "opaque", "tuple", "true", "false", "inf", "nan", "ENTRY", "ROOT", "HloModule", "maximal",
       "replicated", "manual", "last_tile_dim_replicate", "last_tile_dims", "unknown"}
)
_LARGE_CONSTANT = 10  # XLA prints constants of more elements as {...} without print_large_constants

_NAME_BAD = re.compile(r"[^A-Za-z0-9_\-]")


_C_ESCAPES = {ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t", ord('"'): '\\"', ord("'"): "\\'",
              ord("\\"): "\\\\"}


def _hlo_str(s: str) -> str:
    """A double-quoted string C-escaped as XLA's HLO printer writes it (absl::CEscape: named
    escapes, other bytes outside printable ASCII, UTF-8 included, in octal)."""
    if s.isascii() and s.isprintable() and not any(c in s for c in "\\\"'"):
        return '"' + s + '"'
    out = []
    for byte in s.encode("utf-8"):
        esc = _C_ESCAPES.get(byte)
        out.append(esc if esc is not None else chr(byte) if 0x20 <= byte < 0x7F else f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def _metadata(loc: Location) -> tuple[str, str]:
    """HLO ``, metadata={...}`` text for an op's location (as XLA's converter derives it, with the
    fields it drops: see :mod:`xlasdk._metadata`), and the instruction name it implies ('' for
    the opcode): the last component of the ``op_name`` the converter sees."""
    fields, op_name = loc.fields, loc.converter_name
    parts = [f"{k}={_md_value(k, fields[k])}" for k in _MD_FIELDS if k in fields]
    text = ", metadata={" + " ".join(parts) + "}" if parts else ""
    return text, _name_base(op_name.rsplit("/", 1)[-1]) if op_name else ""


def _md_value(field: str, v: Any) -> str:
    if not isinstance(v, str):
        return str(v)
    if field == "scheduling_name":  # XLA's printer writes it as it is (the builder refuses quotes & co.)
        return f'"{v}"'
    return _hlo_str(v)


def _name_base(name: str) -> str:
    """An HLO instruction name stem: letters, digits, ``_`` and ``-`` (no ``.``: the uniquing
    suffix is ``.N``), not starting with a digit or ``-``, not a word of HLO's syntax."""
    base = _NAME_BAD.sub("_", name)
    if not base or not (base[0].isalpha() or base[0] == "_"):
        base = "_" + base
    if base.startswith("__"):  # XLA's parser rejects names starting with "__" (its converter writes "a_")
        base = "a" + base[1:]
    return base + "_" if base in _KEYWORDS else base


# -- constants ------------------------------------------------------------------------------------
def _float_text(v: Any, dtype: np.dtype[Any]) -> str:
    f = float(v)
    if f != f:
        bits = np.asarray(v, dtype).view(f"u{dtype.itemsize}")
        canon = np.asarray(np.nan, dtype).view(f"u{dtype.itemsize}")
        neg = np.asarray(-np.nan, dtype).view(f"u{dtype.itemsize}")
        if bits == canon:
            return "nan"
        if bits == neg:
            return "-nan"
        raise Unsupported("NaN payload")
    if f in (float("inf"), float("-inf")):
        return "inf" if f > 0 else "-inf"
    if f == int(f) and abs(f) < 1e16:
        # "-0.0", not XLA's own "-0", which its parser reads back as +0.
        return ("-0.0" if np.signbit(f) else "0") if f == 0 else str(int(f))
    s = str(v)  # numpy's shortest repr for the value's own type
    # XLA reads a double, rejects it beyond the type's largest finite value, then rounds it.
    d = float(s)
    if abs(d) <= _max_finite(dtype) and dtype.type(d) == v:
        return s
    return repr(f)  # the exact value (a binary fraction) as a double


_MAX_FINITE: dict[np.dtype[Any], float] = {}


def _max_finite(dtype: np.dtype[Any]) -> float:
    m = _MAX_FINITE.get(dtype)
    if m is None:
        m = _MAX_FINITE[dtype] = float(ml_dtypes.finfo(dtype).max)  # type: ignore[no-untyped-call]
    return m


def _elem_text(v: Any, et: PrimitiveType, dtype: np.dtype[Any]) -> str:
    if et is _P.PRED:
        return "1" if v else "0"
    if et in (_P.C64, _P.C128):
        part = np.dtype(np.float32 if et is _P.C64 else np.float64)
        return f"({_float_text(part.type(v.real), part)}, {_float_text(part.type(v.imag), part)})"
    if dtype.kind in "iu":
        return str(int(v))
    return _float_text(v, dtype)


# Significant digits that read back (as a double, then rounded) to the same value: far enough
# from the midpoints between neighbours that the double's own rounding cannot matter.
_DIGITS = {_P.F16: 5, _P.BF16: 4, _P.F32: 9}
_SHORTEST_UP_TO = 1000  # elements: larger constants use the vectorized %.Ng form


def _fast_float_texts(flat: np.ndarray[Any, Any], et: PrimitiveType) -> list[str]:
    """Element texts of a large real float array: ``repr`` for f64 (shortest round trip), else
    ``%.Ng``; values whose short form would read back beyond the type's range (its largest
    finite values), infinities, NaN and -0 are handled as :func:`_float_text` does."""
    wide = flat.astype(np.float64)
    texts = list(map(repr, wide.tolist())) if et is _P.F64 else [f"%.{_DIGITS[et]}g" % v for v in wide.tolist()]
    with np.errstate(over="ignore", invalid="ignore"):
        back = np.array([float(t) for t in texts]) if et is not _P.F64 else wide
        odd = ~np.isfinite(wide) | (wide == 0) | (np.abs(back) > _max_finite(flat.dtype))
    for i in np.flatnonzero(odd).tolist():
        texts[i] = _float_text(flat[i], flat.dtype)
    return texts


def _literal(arr: np.ndarray[Any, Any], et: PrimitiveType) -> str:
    if arr.ndim == 0:
        v = arr[()]
        if et is _P.PRED:
            return "true" if v else "false"
        return _elem_text(v, et, arr.dtype)
    flat = arr.reshape(-1)
    if et is _P.PRED:
        texts = ["1" if v else "0" for v in flat.tolist()]
    elif arr.dtype.kind in "iu":
        texts = list(map(str, flat.tolist()))
    elif et in _DIGITS or et is _P.F64:
        texts = _fast_float_texts(flat, et) if flat.size > _SHORTEST_UP_TO else [
            _float_text(v, arr.dtype) for v in flat
        ]
    else:
        texts = [_elem_text(v, et, arr.dtype) for v in flat]
    if arr.ndim == 1:
        return "{" + ", ".join(texts) + "}"

    def nest(dims: tuple[int, ...], start: int) -> str:  # XLA spaces every level of rank >= 2
        if len(dims) == 1:
            return "{ " + ", ".join(texts[start : start + dims[0]]) + " }"
        step = int(np.prod(dims[1:]))
        return "{ " + ", ".join(nest(dims[1:], start + k * step) for k in range(dims[0])) + " }"

    return nest(arr.shape, 0)


def _constant_value(o: XlaOp) -> np.ndarray[Any, Any]:
    """The value of a ``stablehlo.constant``: its full array, or a 0-d array for a splat."""
    shape = o.shape
    if shape.element_type() not in _CONST_TYPES or shape.size() == 0:
        raise Unsupported("constant")
    value: DenseElements = o.attrs["value"]
    return value.value()


# -- the printer ----------------------------------------------------------------------------------
class _Computation:
    """One HLO computation being printed: its instruction lines and the index of each name."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.index: dict[str, int] = {}
        self.params: list[str] = []


class _Printer:
    def __init__(self, metadata: bool, large_constants: bool) -> None:
        self.metadata = metadata
        self.large_constants = large_constants
        self.counts: dict[str, int] = {}
        self.shapes: dict[Shape, str] = {}
        self.md: dict[Location, tuple[str, str]] = {}
        self.computations: list[str] = []
        self.n_regions = 0
        self.comp = _Computation()

    def unique(self, base: str) -> str:
        n = self.counts.get(base, 0) + 1
        self.counts[base] = n
        return f"{base}.{n}"

    def shape(self, s: Shape) -> str:
        """HLO shape with XLA's default (major-to-minor) layout: ``f32[2,3]{1,0}``."""
        t = self.shapes.get(s)
        if t is None:
            if s._tuple is not None:
                t = "(" + _commas([self.shape(e) for e in s._tuple]) + ")"
            elif s._etype is _P.TOKEN:
                t = "token[]"
            else:
                if s.layout() is not None or not s.is_static():
                    raise Unsupported("layout or dynamic shape")
                rank = len(s._dims)
                t = str(s) + (braces(list(range(rank - 1, -1, -1))) if rank else "")
            self.shapes[s] = t
        return t

    def meta(self, loc: Location) -> tuple[str, str]:
        """The ``, metadata={...}`` text of ``loc`` ('' without metadata) and its name stem."""
        t = self.md.get(loc)
        if t is None:
            t = _metadata(loc)
            if not self.metadata:
                t = ("", t[1])
            self.md[loc] = t
        return t

    def add(self, base: str, shape: Shape, body: str, name_hint: str = "") -> str:
        """Append ``%name = shape body`` to the current computation; return the name (the
        ``name_hint`` stem, XLA's choice for an op with an ``op_name``, else ``base``)."""
        name = self.unique(name_hint or base)
        c = self.comp
        c.index[name] = len(c.lines)
        c.lines.append(f"  %{name} = {self.shape(shape)} {body}\n")
        return name

    # -- graphs ---------------------------------------------------------------------------------
    def graph(self, env: dict[int, Val], roots: list[XlaOp]) -> list[int]:
        """Print every op reachable from ``roots`` not yet in ``env``, in creation order."""
        todo = pending(env, roots)
        for o in todo:
            self.op(o, env)
        return [o.id for o in todo]

    def op(self, o: XlaOp, env: dict[int, Val]) -> None:
        d = o.opdef
        form = d.hlo_form
        if form is _PLAIN_FORM and not o.attrs and o.shape._tuple is None:
            args = []
            for x in o.operands:
                v = env[x.id]
                if type(v) is not str:
                    raise Unsupported("tuple operand")
                args.append(v)
            md, hint = self.meta(o.loc)
            env[o.id] = self.add(d.hlo, o.shape, f"{d.hlo}({_operands(args)}){md}", hint)
            return
        if form is HloForm.NONE:
            raise Unsupported(d.name)
        if "mhlo.sharding" in o.attrs:  # the converter knows shardings
            raise Unsupported("sharding")
        if form is HloForm.GRAPH:
            if d is TUPLE:
                env[o.id] = tuple(env[x.id] for x in o.operands)
            elif d is GET_TUPLE_ELEMENT:
                sval = env[o.operands[0].id]
                if not isinstance(sval, tuple):
                    raise Unsupported("get_tuple_element of a tuple value")
                env[o.id] = sval[o.extra]
            elif d is CALL:
                self.inline(o, env)
            else:
                raise Unsupported(d.name)
            return
        md, hint = self.meta(o.loc)
        if form is HloForm.WHILE or form is HloForm.CONDITIONAL:
            if o.attrs:
                raise Unsupported(d.name)
            self.control(o, env, md, hint)
            return
        if form is HloForm.TUPLE_RESULT:
            args = [self.ref(env[x.id], x.shape, md) for x in o.operands]
            extra = self.attributes(o)
            name = self.add(d.hlo, o.shape, f"{d.hlo}({_operands(args)}){extra}{md}", hint)
            env[o.id] = self.unpack(name, o.shape, md)
            return
        if o.shape._tuple is not None and form is not HloForm.REGION:
            raise Unsupported(d.name)
        args = [self.single(env[x.id]) for x in o.operands]
        if form is HloForm.CONSTANT:
            self.constant(o, env)
        elif form is HloForm.REGION:
            self.with_region(o, args, md, hint, env)
        elif form is HloForm.FULL_SHAPE_OPERANDS:
            # HLO wants full-shape operands where StableHLO allows scalars (as XLA's converter does).
            dims = o.shape.dimensions()
            for i, x in enumerate(o.operands):
                if x.shape.dimensions() != dims:
                    bshape = Shape._make(x.shape.element_type(), dims)
                    args[i] = self.add("broadcast", bshape, f"broadcast(%{args[i]}), dimensions={{}}{md}")
            env[o.id] = self.add(d.hlo, o.shape, f"{d.hlo}({_operands(args)}){md}", hint)
        else:
            extra = self.attributes(o)
            env[o.id] = self.add(d.hlo, o.shape, f"{d.hlo}({_operands(args)}){extra}{md}", hint)

    def constant(self, o: XlaOp, env: dict[int, Val]) -> None:
        """``constant(literal)``; a splat is a scalar constant and a broadcast (no metadata), as
        XLA's converter writes it."""
        value = _constant_value(o)
        et = o.shape.element_type()
        shape = o.shape if value.ndim == o.shape.rank() else Shape._make(et, ())
        if not self.large_constants and value.size > _LARGE_CONSTANT:
            literal = "{...}"
        else:
            literal = _literal(value, et)
        name = self.add("constant", shape, f"constant({literal})")
        if shape is not o.shape:
            name = self.add("broadcast", o.shape, f"broadcast(%{name}), dimensions={{}}")
        env[o.id] = name

    def single(self, v: Val) -> str:
        if type(v) is not str:
            raise Unsupported("tuple operand")
        return v

    def attributes(self, o: XlaOp) -> str:
        """The ``, attr=...`` HLO text of ``o`` (its row's ``hlo_attrs``): Unsupported for
        attributes that an op without ``hlo_attrs`` carries (``result_accuracy``)."""
        f = o.opdef.hlo_attrs
        if f is None:
            if o.attrs:
                raise Unsupported(f"{o.opdef.name} attributes {list(o.attrs)}")
            return ""
        return f(o)

    def with_region(self, o: XlaOp, args: list[str], md: str, hint: str, env: dict[int, Val]) -> None:
        """``reduce``, ``sort``, ``reduce-window``, ``scatter``: the region becomes an HLO
        computation (``to_apply``); several results are a tuple and ``get-tuple-element``s."""
        (r,) = o.regions
        base, extra = o.opdef.hlo, self.attributes(o)
        to_apply = self.region(r)
        name = self.add(base, o.shape, f"{base}({_operands(args)}){extra}, to_apply=%{to_apply}{md}", hint)
        if o.shape._tuple is None:
            env[o.id] = name
            return
        elems = []
        for i, sh in enumerate(o.shape._tuple):
            elems.append(self.add("get-tuple-element", sh, f"get-tuple-element(%{name}), index={i}{md}"))
        env[o.id] = tuple(elems)

    def region(self, r: Region) -> str:
        """Print ``r`` as its own HLO computation; return its name."""
        outer = self.comp
        self.comp = _Computation()
        env: dict[int, Val] = {}
        for i, p in enumerate(r.params):
            tup = p.shape._tuple
            name = self.add("arg_tuple" if tup is not None else f"Arg_{i}", p.shape, f"parameter({i})")
            self.comp.params.append(f"{name}: {p.shape}")
            if tup is None:
                env[p.id] = name
            elif all(e._tuple is None for e in tup):  # a tuple parameter: its elements, unpacked
                env[p.id] = tuple(
                    self.add("get-tuple-element", e, f"get-tuple-element(%{name}), index={k}")
                    for k, e in enumerate(tup)
                )
            else:
                raise Unsupported("nested tuple parameter")
        self.graph(env, list(r.results))
        root_shape, root = self.root(env, list(r.results))
        cname = self.unique(f"region_{self.n_regions}")
        self.n_regions += 1
        self.computations.append(self.finish(f"%{cname}", root_shape, root))
        self.comp = outer
        return cname

    def ref(self, v: Val, shape: Shape, md: str) -> str:
        """One HLO value for ``v``: a ``tuple`` instruction for an unpacked tuple of arrays."""
        if type(v) is str:
            return v
        assert isinstance(v, tuple) and shape._tuple is not None
        names = [self.single(e) for e in v]
        return self.add("tuple", shape, f"tuple({_commas(['%' + n for n in names])}){md}")

    def unpack(self, name: str, shape: Shape, md: str) -> Val:
        """``name``'s value: itself, or for a tuple its elements as ``get-tuple-element``s."""
        if shape._tuple is None:
            return name
        return tuple(
            self.add("get-tuple-element", e, f"get-tuple-element(%{name}), index={k}{md}")
            for k, e in enumerate(shape._tuple)
        )

    def control(self, o: XlaOp, env: dict[int, Val], md: str, hint: str) -> None:
        """``while`` (a tuple carry becomes one tuple operand) and ``conditional`` (each branch
        takes its bound operand as its one parameter)."""
        if o.opdef.hlo_form is HloForm.WHILE:
            cond, body = o.regions
            (x,) = o.operands
            carry = self.ref(env[x.id], x.shape, md)
            c, bd = self.region(cond), self.region(body)
            name = self.add("while", o.shape, f"while(%{carry}), condition=%{c}, body=%{bd}{md}", hint)
        else:
            args = [self.single(env[o.operands[0].id])]
            for r in o.regions:
                if r.bindings is None or len(r.bindings) != 1 or len(r.params) != 1:
                    raise Unsupported("branch arity")
                (x,) = r.bindings
                args.append(self.ref(env[x.id], x.shape, ""))
            names = [self.region(Region(r.params, r.results)) for r in o.regions]
            if o.operands[0].shape._etype is _P.PRED:  # stablehlo.if (stablehlo.case takes an s32 index)
                branches = f"true_computation=%{names[0]}, false_computation=%{names[1]}"
            else:
                branches = "branch_computations={" + ", ".join("%" + n for n in names) + "}"
            name = self.add("conditional", o.shape, f"conditional({_operands(args)}), {branches}{md}", hint)
        env[o.id] = self.unpack(name, o.shape, md)

    def root(self, env: dict[int, Val], results: list[XlaOp], flatten_single: bool = False) -> tuple[Shape, str]:
        if len(results) == 1 and results[0].shape._tuple is None:
            return results[0].shape, self.single(env[results[0].id])
        vals: list[str] = []
        shapes: list[Shape] = []
        for x in results:
            v = env[x.id]
            if x.shape._tuple is None:
                vals.append(self.single(v))
                shapes.append(x.shape)
            elif isinstance(v, tuple) and all(s._tuple is None for s in x.shape._tuple):
                vals.extend(self.single(e) for e in v)
                shapes.extend(x.shape._tuple)
            else:
                raise Unsupported("nested tuple result")
        if flatten_single and len(vals) == 1:  # one result: XLA's converter returns it untupled
            return shapes[0], vals[0]
        shape = Shape.tuple_shape(shapes)
        return shape, self.add("tuple", shape, f"tuple({_commas(['%' + v for v in vals])})")

    def finish(self, head: str, root_shape: Shape, root: str) -> str:
        c = self.comp
        i = c.index[root]
        c.lines[i] = "  ROOT " + c.lines[i][2:]
        result = root_shape if root_shape._tuple is None else "(" + _commas([str(e) for e in root_shape._tuple]) + ")"
        return f"{head} ({', '.join(c.params)}) -> {result} {{\n" + "".join(c.lines) + "}\n"

    def inline(self, o: XlaOp, env: dict[int, Val]) -> None:
        inline_call(o, env, self.graph)


def _operands(names: list[str]) -> str:
    """``%a, %b`` (XLA's ``/*index=5*/`` marks from the sixth on); empty for no operands."""
    return _commas(["%" + n for n in names])


def _commas(items: list[str]) -> str:
    """XLA's list printing: ``a, b, c, d, e, /*index=5*/f, ...``."""
    if len(items) <= 5:
        return ", ".join(items)
    return ", ".join(f"/*index={i}*/{v}" if i and i % 5 == 0 else v for i, v in enumerate(items))


def parsable_module_name(text: str) -> str:
    """HLO ``text`` with a module name that is an HLO word (``HloModule true``, as XLA's converter
    writes it and its parser rejects) given a trailing ``_``."""
    head, sep, rest = text.partition(",")
    if head.startswith("HloModule ") and head[10:] in _KEYWORDS:
        return head + "_" + sep + rest
    return text


def _module_name(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_.\-]", "_", name)
    s = s if s and (s[0].isalpha() or s[0] == "_") else "_" + s
    return s + "_" if s in _KEYWORDS else s


def print_hlo_module(
    name: str,
    params: list[XlaOp],
    root: XlaOp,
    side_effects: tuple[XlaOp, ...] = (),
    *,
    metadata: bool = True,
    large_constants: bool = True,
) -> str:
    """The HLO module text of the graph ``params -> root``.

    Raises
    ------
    Unsupported
        If the graph holds anything this printer does not handle (the caller then converts the
        StableHLO module with XLA's converter).
    """
    if side_effects:
        raise Unsupported("side effects")
    p = _Printer(metadata, large_constants)
    env: dict[int, Val] = {}
    for i, op in enumerate(params):
        if op.shape._tuple is not None or op.shape.is_token() or op.attrs:
            raise Unsupported("tuple, token or sharded parameter")
        pname = op.extra[1] or f"p{i}"
        md, _ = p.meta(name_location(pname))
        n = p.add(_name_base(pname), op.shape, f"parameter({i}){md}")
        p.comp.params.append(f"{n}: {op.shape}")
        env[op.id] = n
    entry = p.comp
    p.graph(env, [root])
    p.comp = entry
    root_shape, root_name = p.root(env, [root], flatten_single=True)
    entry_text = p.finish("ENTRY %" + p.unique("main"), root_shape, root_name)
    layout = "(" + _commas([p.shape(op.shape) for op in params]) + ")->" + p.shape(root_shape)
    return (
        f"HloModule {_module_name(name)}, entry_computation_layout={{{layout}}}\n\n"
        + "".join(c + "\n" for c in p.computations)
        + entry_text
        + "\n"  # XLA's printer ends a module with an empty line too
    )

