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
from typing import Any

import ml_dtypes
import numpy as np

from ._emit import Val, inline_call, pending
from ._metadata import FIELDS as _MD_FIELDS
from ._metadata import parse_location
from .builder import Region, XlaOp, _mlir_str
from .shape import Shape
from .types import PrimitiveType, hlo_element_name

__all__ = ["Unsupported", "print_hlo_module"]

_P = PrimitiveType


class Unsupported(Exception):
    """The graph holds an op (or attribute, or constant) this printer does not handle."""


# StableHLO ops without attributes that are one HLO instruction of the same operands.
_PLAIN: dict[str, str] = {
    f"stablehlo.{k}": v
    for k, v in {
        "add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide",
        "remainder": "remainder", "maximum": "maximum", "minimum": "minimum", "power": "power",
        "atan2": "atan2", "and": "and", "or": "or", "xor": "xor", "shift_left": "shift-left",
        "shift_right_arithmetic": "shift-right-arithmetic", "shift_right_logical": "shift-right-logical",
        "complex": "complex", "abs": "abs", "negate": "negate", "exponential": "exponential",
        "exponential_minus_one": "exponential-minus-one", "log": "log", "log_plus_one": "log-plus-one",
        "sqrt": "sqrt", "rsqrt": "rsqrt", "cbrt": "cbrt", "sine": "sine", "cosine": "cosine", "tan": "tan",
        "tanh": "tanh", "logistic": "logistic", "floor": "floor", "ceil": "ceil",
        "round_nearest_afz": "round-nearest-afz", "round_nearest_even": "round-nearest-even", "sign": "sign",
        "not": "not", "popcnt": "popcnt", "count_leading_zeros": "count-leading-zeros", "is_finite": "is-finite",
        "real": "real", "imag": "imag", "convert": "convert", "bitcast_convert": "bitcast-convert",
        "reshape": "reshape", "replica_id": "replica-id", "partition_id": "partition-id",
    }.items()
}

# Element types whose constants are printed here (others go to the converter).
_CONST_TYPES = frozenset(
    {_P.PRED, _P.S8, _P.S16, _P.S32, _P.S64, _P.U8, _P.U16, _P.U32, _P.U64, _P.F16, _P.BF16, _P.F32, _P.F64,
     _P.C64, _P.C128}
)
_DEFAULT_COMPARE = {  # XLA's Comparison::DefaultComparisonType
    **{t: "FLOAT" for t in (_P.F16, _P.BF16, _P.F32, _P.F64, _P.C64, _P.C128)},
    **{t: "SIGNED" for t in (_P.S2, _P.S4, _P.S8, _P.S16, _P.S32, _P.S64)},
    **{t: "UNSIGNED" for t in (_P.PRED, _P.U2, _P.U4, _P.U8, _P.U16, _P.U32, _P.U64)},
}
# Words the HLO parser reads as something other than a name (names get a trailing "_").
_KEYWORDS = frozenset(
    {hlo_element_name(t) for t in PrimitiveType if t not in (_P.PRIMITIVE_TYPE_INVALID, _P.TUPLE, _P.OPAQUE_TYPE)}
    | {"token", "opaque", "tuple", "true", "false", "inf", "nan", "ENTRY", "ROOT", "HloModule", "maximal",
       "replicated", "manual", "last_tile_dim_replicate", "last_tile_dims", "unknown"}
)
_LARGE_CONSTANT = 10  # XLA prints constants of more elements as {...} without print_large_constants

_I64_ARRAY = re.compile(r"array<i64(?:: ([-0-9, ]*))?>")
_COMPARE = re.compile(
    r"^comparison_direction = #stablehlo<comparison_direction (\w+)>"
    r"(?:, compare_type = #stablehlo<comparison_type (\w+)>)?$"
)
_PRECISION = re.compile(r"#stablehlo<precision (\w+)>")
_REGION_OPS = frozenset({
    "stablehlo.reduce", "stablehlo.sort", "stablehlo.reduce_window", "stablehlo.scatter", "stablehlo.all_reduce",
    "stablehlo.reduce_scatter",
})
_COLLECTIVES = frozenset({
    "stablehlo.all_reduce", "stablehlo.reduce_scatter", "stablehlo.all_gather", "stablehlo.all_to_all",
    "stablehlo.collective_permute",
})
_RNG = re.compile(r"^rng_algorithm = #stablehlo<rng_algorithm (DEFAULT|THREE_FRY|PHILOX)>$")
_SORT = re.compile(r"^dimension = (\d+) : i64, is_stable = (true|false)$")
_REDUCE_PRECISION = re.compile(r"^exponent_bits = (\d+) : i32, mantissa_bits = (\d+) : i32$")
_PAD = re.compile(r"^edge_padding_low = (.*?), edge_padding_high = (.*?), interior_padding = (.*)$")
_SLICE = re.compile(r"^start_indices = (.*?), limit_indices = (.*?), strides = (.*)$")
_NAME_BAD = re.compile(r"[^A-Za-z0-9_\-]")


def _ints(text: str) -> list[int]:
    m = _I64_ARRAY.fullmatch(text.strip())
    if m is None:
        raise Unsupported(text)
    return [int(v) for v in m.group(1).split(",")] if m.group(1) else []


def _braces(values: list[int]) -> str:
    return "{" + ",".join(str(v) for v in values) + "}"


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


def _metadata(loc: str) -> tuple[str, str]:
    """HLO ``, metadata={...}`` text for an xlasdk MLIR location (as XLA's converter derives it,
    with the fields it drops: see :mod:`xlasdk._metadata`), and the instruction name it implies
    ('' for the opcode): the last component of the ``op_name`` the converter sees."""
    parsed = parse_location(loc)
    if parsed is None:
        raise Unsupported(loc)
    fields, op_name = parsed
    parts = [
        f"{k}={_md_value(k, fields[k])}" for k in _MD_FIELDS if k in fields
    ]
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
    et = shape.element_type()
    if et not in _CONST_TYPES or shape.size() == 0:
        raise Unsupported("constant")
    attrs = o.attrs
    start = attrs.find('dense<"0x')
    if not attrs.startswith("value = ") or start < 0:
        raise Unsupported(attrs)
    end = attrs.index('"', start + 9)
    dtype = shape.numpy_dtype()
    raw = np.frombuffer(bytes.fromhex(attrs[start + 9 : end]), dtype=np.uint8 if et is _P.PRED else dtype)
    if et is _P.PRED:
        raw = raw.astype(np.bool_)
    return raw.reshape(()) if raw.size == 1 else raw.reshape(shape.dimensions())


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
        self.md: dict[str, tuple[str, str]] = {}
        self.attrs: dict[tuple[Any, ...], tuple[str, str]] = {}
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
                t = str(s) + (_braces(list(range(rank - 1, -1, -1))) if rank else "")
            self.shapes[s] = t
        return t

    def meta(self, loc: str) -> tuple[str, str]:
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
        code = o.opcode
        hlo = _PLAIN.get(code)
        if hlo is not None and not o.attrs and o.shape._tuple is None:
            args = []
            for x in o.operands:
                v = env[x.id]
                if type(v) is not str:
                    raise Unsupported("tuple operand")
                args.append(v)
            md, hint = self.meta(o.loc)
            env[o.id] = self.add(hlo, o.shape, f"{hlo}({_operands(args)}){md}", hint)
            return
        if "mhlo." in o.attrs:  # a sharding or other XLA-specific attribute: the converter knows them
            raise Unsupported(o.attrs)
        if code == "tuple":
            env[o.id] = tuple(env[x.id] for x in o.operands)
            return
        if code == "get_tuple_element":
            sval = env[o.operands[0].id]
            if not isinstance(sval, tuple):
                raise Unsupported("get_tuple_element of a tuple value")
            env[o.id] = sval[o.extra]
            return
        if code == "call":
            self.inline(o, env)
            return
        if code in ("stablehlo.while", "stablehlo.if", "stablehlo.case"):
            if o.attrs:
                raise Unsupported(o.attrs)
            md, hint = self.meta(o.loc)
            self.control(o, env, md, hint)
            return
        if code in ("stablehlo.rng_bit_generator", "stablehlo.optimization_barrier"):
            md, hint = self.meta(o.loc)
            if code == "stablehlo.optimization_barrier":
                (x,) = o.operands
                name = self.add("opt-barrier", o.shape, f"opt-barrier(%{self.ref(env[x.id], x.shape, md)}){md}", hint)
            else:
                m = _RNG.match(o.attrs)
                if m is None:
                    raise Unsupported(o.attrs)
                state = self.single(env[o.operands[0].id])
                body = f"rng-bit-generator(%{state}), algorithm=rng_{m.group(1).lower()}{md}"
                name = self.add("rng-bit-generator", o.shape, body, hint)
            env[o.id] = self.unpack(name, o.shape, md)
            return
        if o.shape._tuple is not None and code not in _REGION_OPS:
            raise Unsupported(code)
        args = [self.single(env[x.id]) for x in o.operands]
        md, hint = self.meta(o.loc)
        if code == "stablehlo.constant":
            self.constant(o, env)
        elif code in _REGION_OPS:
            self.with_region(o, args, md, hint, env)
        elif code in ("stablehlo.select", "stablehlo.clamp"):
            # HLO wants full-shape operands where StableHLO allows scalars (as XLA's converter does).
            dims = o.shape.dimensions()
            for i, x in enumerate(o.operands):
                if x.shape.dimensions() != dims:
                    bshape = Shape._make(x.shape.element_type(), dims)
                    args[i] = self.add("broadcast", bshape, f"broadcast(%{args[i]}), dimensions={{}}{md}")
            name = code[10:]
            env[o.id] = self.add(name, o.shape, f"{name}({_operands(args)}){md}", hint)
        else:
            base, extra = self.attributes(o)
            env[o.id] = self.add(base, o.shape, f"{base}({_operands(args)}){extra}{md}", hint)

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

    def attributes(self, o: XlaOp) -> tuple[str, str]:
        """HLO opcode and ``, attr=...`` text of an op with attributes, cached per attribute text
        and operand and result shapes (a convolution's window size is its kernel's shape)."""
        key = (o.opcode, o.attrs, o.shape, *(x.shape for x in o.operands))
        got = self.attrs.get(key)
        if got is None:
            got = _attributes(o.opcode, o.attrs, o)
            self.attrs[key] = got
        return got

    def with_region(self, o: XlaOp, args: list[str], md: str, hint: str, env: dict[int, Val]) -> None:
        """``reduce``, ``sort``, ``reduce-window``, ``scatter``: the region becomes an HLO
        computation (``to_apply``); several results are a tuple and ``get-tuple-element``s."""
        (r,) = o.regions
        base, extra = self.attributes(o)
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
        if o.opcode == "stablehlo.while":
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
            if o.opcode == "stablehlo.if":
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


def _attributes(code: str, attrs: str, o: XlaOp) -> tuple[str, str]:
    """HLO opcode and ``, attr=value...`` text of the StableHLO ops with attributes handled here."""
    if code == "stablehlo.reduce" and attrs.startswith("dimensions = "):
        return "reduce", f", dimensions={_braces(_ints(attrs[13:]))}"
    if code == "stablehlo.sort" and (m := _SORT.match(attrs)) is not None:
        return "sort", f", dimensions={{{m.group(1)}}}" + (", is_stable=true" if m.group(2) == "true" else "")
    if code == "stablehlo.reduce_window":
        return "reduce-window", _reduce_window_attrs(attrs, o)
    if code == "stablehlo.scatter":
        return "scatter", _gather_scatter_attrs(attrs, "scatter")
    if code in _COLLECTIVES and o.shape._tuple is None:
        return code[10:].replace("_", "-"), _collective_attrs(code, attrs)
    if code == "stablehlo.broadcast_in_dim" and attrs.startswith("broadcast_dimensions = "):
        return "broadcast", f", dimensions={_braces(_ints(attrs[23:]))}"
    if code == "stablehlo.transpose" and attrs.startswith("permutation = "):
        return "transpose", f", dimensions={_braces(_ints(attrs[14:]))}"
    if code == "stablehlo.concatenate" and attrs.startswith("dimension = ") and attrs.endswith(" : i64"):
        return "concatenate", f", dimensions={{{int(attrs[12:-6])}}}"
    if code == "stablehlo.iota" and attrs.startswith("iota_dimension = ") and attrs.endswith(" : i64"):
        return "iota", f", iota_dimension={int(attrs[17:-6])}"
    if code == "stablehlo.slice":
        m = _SLICE.match(attrs)
        if m is not None:
            starts, limits, strides = (_ints(m.group(k)) for k in (1, 2, 3))
            full = any(c != 1 for c in strides)  # XLA writes every stride once one is not 1
            parts = [
                f"[{a}:{b}:{c}]" if full else f"[{a}:{b}]" for a, b, c in zip(starts, limits, strides, strict=True)
            ]
            return "slice", ", slice={" + ", ".join(parts) + "}"
    if code == "stablehlo.reverse" and attrs.startswith("dimensions = "):
        return "reverse", f", dimensions={_braces(_ints(attrs[13:]))}"
    if code == "stablehlo.dynamic_slice" and attrs.startswith("slice_sizes = "):
        return "dynamic-slice", f", dynamic_slice_sizes={_braces(_ints(attrs[14:]))}"
    if code == "stablehlo.dynamic_update_slice" and not attrs:
        return "dynamic-update-slice", ""
    if code == "stablehlo.pad" and (m := _PAD.match(attrs)) is not None and o.shape.rank() > 0:
        lo, hi, interior = (_ints(m.group(k)) for k in (1, 2, 3))
        full = any(interior)  # XLA writes every interior value once one is not 0
        parts = [f"{a}_{b}" + (f"_{c}" if full else "") for a, b, c in zip(lo, hi, interior, strict=True)]
        return "pad", ", padding=" + "x".join(parts)
    if code == "stablehlo.reduce_precision" and (m := _REDUCE_PRECISION.match(attrs)) is not None:
        return "reduce-precision", f", exponent_bits={m.group(1)}, mantissa_bits={m.group(2)}"
    if code == "stablehlo.fft":
        a = _attr_dict(attrs)
        ftype = re.fullmatch(r"#stablehlo<fft_type (\w+)>", a.pop("fft_type", ""))
        lengths = _ints(a.pop("fft_length", ""))
        if ftype is None or a:
            raise Unsupported(attrs)
        return "fft", f", fft_type={ftype.group(1)}, fft_length={_braces(lengths)}"
    if code == "stablehlo.cholesky" and attrs in ("lower = true", "lower = false"):
        return "cholesky", (", lower=true" if attrs.endswith("true") else "")
    if code == "stablehlo.triangular_solve":
        a = _attr_dict(attrs)
        extra = ""
        for flag in ("left_side", "lower", "unit_diagonal"):
            value = a.pop(flag, "false")
            if value not in ("true", "false"):
                raise Unsupported(attrs)
            extra += f", {flag}=true" if value == "true" else ""
        tr = re.fullmatch(r"#stablehlo<transpose (\w+)>", a.pop("transpose_a", ""))
        if tr is None or a:
            raise Unsupported(attrs)
        return "triangular-solve", f"{extra}, transpose_a={tr.group(1)}"
    if code == "stablehlo.gather":
        return "gather", _gather_scatter_attrs(attrs, "gather")
    if code == "stablehlo.convolution":
        return "convolution", _convolution_attrs(attrs, o)
    if code == "stablehlo.compare":
        m = _COMPARE.match(attrs)
        if m is not None:
            direction, ctype = m.group(1), m.group(2)
            et = o.operands[0].shape.element_type()
            extra = f", direction={direction}"
            if ctype is not None and ctype != _DEFAULT_COMPARE.get(et):
                extra += f", type={ctype}"
            return "compare", extra
    if code == "stablehlo.dot_general":
        a = _attr_dict(attrs)
        dn = a.pop("dot_dimension_numbers", "")
        if not (dn.startswith("#stablehlo.dot<") and dn.endswith(">")):
            raise Unsupported(attrs)
        fields = _attr_dict(dn[15:-1])
        extra = ""
        for side in ("lhs", "rhs"):
            for kind, hlo in (("batching", "batch"), ("contracting", "contracting")):
                dims = _list(fields.pop(f"{side}_{kind}_dimensions", "[]"))
                if dims or kind == "contracting":  # XLA writes contracting dims even when empty
                    extra += f", {side}_{hlo}_dims={_braces(dims)}"
        extra += _precision(a)
        if a or fields:  # an algorithm, or anything else this printer does not know
            raise Unsupported(attrs)
        return "dot", extra
    raise Unsupported(f"{code} {{{attrs}}}")


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and quotes."""
    parts, depth, start, quoted = [], 0, 0, False
    for i, ch in enumerate(text):
        if ch == '"' and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        elif quoted:
            continue
        elif ch in "<[({":
            depth += 1
        elif ch in ">])}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    return parts + [tail] if tail else parts


def _attr_dict(text: str) -> dict[str, str]:
    """``a = 1 : i64, b = array<i64: 1>`` -> ``{"a": "1 : i64", "b": "array<i64: 1>"}``."""
    out = {}
    for part in _split_top(text):
        key, eq, value = part.partition(" = ")
        if not eq and not re.fullmatch(r"\w+", part):
            raise Unsupported(text)
        out[key.strip()] = value.strip()  # a unit attribute ("use_global_device_ids") has value ''
    return out


def _int_attr(text: str) -> int:
    value, _, typ = text.partition(" : ")
    if typ not in ("i64", "i32"):
        raise Unsupported(text)
    return int(value)


def _list(text: str) -> list[int]:
    """``[1, 2]`` -> [1, 2]."""
    if not (text.startswith("[") and text.endswith("]")):
        raise Unsupported(text)
    inner = text[1:-1].strip()
    return [int(v) for v in inner.split(",")] if inner else []


def _pairs(text: str, rank: int) -> list[tuple[int, int]]:
    """``dense<[[1, 0], [0, 2]]> : tensor<2x2xi64>`` (or a splat ``dense<0>``) -> [(1, 0), (0, 2)]."""
    m = re.fullmatch(r"dense<(.*)> : tensor<\d+x2xi64>", text)
    if m is None:
        raise Unsupported(text)
    body = m.group(1).replace(" ", "")
    if not body.startswith("["):
        return [(int(body), int(body))] * rank
    flat = [int(v) for v in re.findall(r"-?\d+", body)]
    return list(zip(flat[0::2], flat[1::2], strict=True))


def _window(sizes: list[int], strides: list[int], pads: list[tuple[int, int]], lhs: list[int], rhs: list[int]) -> str:
    """XLA's ``window={size=.. stride=.. pad=.. lhs_dilate=.. rhs_dilate=..}`` (defaults left out)."""
    if not sizes:
        raise Unsupported("empty window")
    parts = ["size=" + "x".join(map(str, sizes))]
    if any(s != 1 for s in strides):
        parts.append("stride=" + "x".join(map(str, strides)))
    if any(p != (0, 0) for p in pads):
        parts.append("pad=" + "x".join(f"{a}_{b}" for a, b in pads))
    if any(d != 1 for d in lhs):
        parts.append("lhs_dilate=" + "x".join(map(str, lhs)))
    if any(d != 1 for d in rhs):
        parts.append("rhs_dilate=" + "x".join(map(str, rhs)))
    return "window={" + " ".join(parts) + "}"


def _precision(a: dict[str, str]) -> str:
    text = a.pop("precision_config", None)
    if text is None:
        return ""
    precs = _PRECISION.findall(text)
    if len(precs) != 2:
        raise Unsupported(text)
    if all(p == "DEFAULT" for p in precs):
        return ""
    return f", operand_precision={{{precs[0].lower()},{precs[1].lower()}}}"


def _reduce_window_attrs(attrs: str, o: XlaOp) -> str:
    a = _attr_dict(attrs)
    rank = o.operands[0].shape.rank()
    sizes = _ints(a.pop("window_dimensions"))
    strides = _ints(a.pop("window_strides", f"array<i64: {', '.join(['1'] * rank)}>"))
    lhs = _ints(a.pop("base_dilations", f"array<i64: {', '.join(['1'] * rank)}>"))
    rhs = _ints(a.pop("window_dilations", f"array<i64: {', '.join(['1'] * rank)}>"))
    pads = _pairs(a.pop("padding"), rank) if "padding" in a else [(0, 0)] * rank
    if a or rank == 0:
        raise Unsupported(attrs)
    return ", " + _window(sizes, strides, pads, lhs, rhs)


_GATHER_FIELDS = ("offset_dims", "collapsed_slice_dims", "start_index_map")
_SCATTER_FIELDS = ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims")


def _gather_scatter_attrs(attrs: str, kind: str) -> str:
    a = _attr_dict(attrs)
    dn = a.pop("dimension_numbers" if kind == "gather" else "scatter_dimension_numbers", "")
    if not (dn.startswith(f"#stablehlo.{kind}<") and dn.endswith(">")):
        raise Unsupported(attrs)
    fields = _attr_dict(dn[len(kind) + 12 : -1])
    extra = ""
    for key in _GATHER_FIELDS if kind == "gather" else _SCATTER_FIELDS:  # HLO's parser wants these
        extra += f", {key}={_braces(_list(fields.pop(key, '[]')))}"
    ivd = int(fields.pop("index_vector_dim", "0"))
    for key, value in fields.items():  # the batching dimensions, when there are any
        extra += f", {key}={_braces(_list(value))}"
    extra += f", index_vector_dim={ivd}"
    if kind == "gather":
        extra += f", slice_sizes={_braces(_ints(a.pop('slice_sizes')))}"
    for flag in ("indices_are_sorted", "unique_indices"):
        value = a.pop(flag, "false")
        if value == "true":
            extra += f", {flag}=true"
        elif value != "false":
            raise Unsupported(attrs)
    if a:
        raise Unsupported(attrs)
    return extra


def _groups(text: str) -> str:
    """``dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>`` -> ``{{0,1},{2,3}}`` (``dense<>`` -> ``{}``)."""
    m = re.fullmatch(r"dense<(.*)> : tensor<\d+x\d+xi64>", text)
    if m is None or (m.group(1) and not m.group(1).startswith("[[")):
        raise Unsupported(text)
    rows = re.findall(r"\[([-0-9, ]*)\]", m.group(1))
    return "{" + ",".join("{" + r.replace(" ", "") + "}" for r in rows) + "}"


def _collective_attrs(code: str, attrs: str) -> str:
    """``replica_groups={{..}}, dimensions={d}, channel_id=n, use_global_device_ids=true`` & co."""
    a = _attr_dict(attrs)
    if code == "stablehlo.collective_permute":
        extra = ", source_target_pairs=" + _groups(a.pop("source_target_pairs"))
    else:
        extra = ", replica_groups=" + _groups(a.pop("replica_groups", "dense<> : tensor<0x0xi64>"))
    if code == "stablehlo.all_gather":
        extra += f", dimensions={{{_int_attr(a.pop('all_gather_dim'))}}}"
    elif code == "stablehlo.reduce_scatter":
        extra += f", dimensions={{{_int_attr(a.pop('scatter_dimension'))}}}"
    elif code == "stablehlo.all_to_all":
        split, concat = _int_attr(a.pop("split_dimension")), _int_attr(a.pop("concat_dimension"))
        a.pop("split_count")
        if split != concat:  # HLO's array all-to-all splits and concatenates along one dimension
            raise Unsupported(attrs)
        extra += f", dimensions={{{split}}}"
    channel = a.pop("channel_handle", None)
    if channel is not None:
        m = re.fullmatch(r"#stablehlo\.channel_handle<handle = (\d+), type = \d+>", channel)
        if m is None:
            raise Unsupported(channel)
        extra += f", channel_id={m.group(1)}"
    if a.pop("use_global_device_ids", None) is not None:
        extra += ", use_global_device_ids=true"
    if a:
        raise Unsupported(attrs)
    return extra


_CONV_KEYS = re.compile(r"^#stablehlo\.conv<raw (.*)>$")


def _convolution_attrs(attrs: str, o: XlaOp) -> str:
    a = _attr_dict(attrs)
    m = _CONV_KEYS.match(a.pop("dimension_numbers", ""))
    if m is None:
        raise Unsupported(attrs)
    dn = _attr_dict(m.group(1))
    ib, if_ = int(dn["input_batch_dimension"]), int(dn["input_feature_dimension"])
    isp = _list(dn["input_spatial_dimensions"])
    ki, ko = int(dn["kernel_input_feature_dimension"]), int(dn["kernel_output_feature_dimension"])
    ksp = _list(dn["kernel_spatial_dimensions"])
    ob, of = int(dn["output_batch_dimension"]), int(dn["output_feature_dimension"])
    osp = _list(dn["output_spatial_dimensions"])
    n = len(isp)
    if n == 0 or n > 10:
        raise Unsupported("convolution spatial rank")

    def labels(rank: int, first: tuple[int, str], second: tuple[int, str], spatial: list[int]) -> str:
        out = [""] * rank
        out[first[0]], out[second[0]] = first[1], second[1]
        for k, d in enumerate(spatial):
            out[d] = str(k)
        return "".join(out)

    dim_labels = (
        labels(n + 2, (ib, "b"), (if_, "f"), isp) + "_" + labels(n + 2, (ko, "o"), (ki, "i"), ksp) + "->"
        + labels(n + 2, (ob, "b"), (of, "f"), osp)
    )
    ones = f"array<i64: {', '.join(['1'] * n)}>"
    kernel = o.operands[1].shape.dimensions()
    window = _window(
        [kernel[d] for d in ksp], _ints(a.pop("window_strides", ones)),
        _pairs(a.pop("padding"), n) if "padding" in a else [(0, 0)] * n,
        _ints(a.pop("lhs_dilation", ones)), _ints(a.pop("rhs_dilation", ones)),
    )
    extra = f", {window}, dim_labels={dim_labels}"
    for key in ("feature_group_count", "batch_group_count"):
        count = _int_attr(a.pop(key, "1 : i64"))
        if count != 1:
            extra += f", {key}={count}"
    extra += _precision(a)
    if a.pop("window_reversal", None) not in (None, f"array<i1: {', '.join(['false'] * n)}>") or a:
        raise Unsupported(attrs)
    return extra


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
        md, _ = p.meta(f"loc({_mlir_str(pname)})")
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

