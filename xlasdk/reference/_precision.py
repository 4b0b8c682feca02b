"""The error model of each device kind, per op: how far a correct device may be from the exact
value of an op on the device's own operands (:func:`op_bound`, :func:`dot_precision`), the data
that :func:`xlasdk.compare`, ``--bisect ops``, ``run --expect`` and ``reduce --until diverge``
judge each op by.

The model is rows of tables keyed by the op table's rows (:data:`xlasdk._optable.OPS`) and a
device kind, never opcode tests in code:

- the rows that are ``bit_exact`` (:class:`xlasdk._optable.OpProps`): data movement, integer and
  bitwise ops, comparisons, selects, the ops that round on purpose (``convert``,
  ``reduce_precision``): bit-exact on every device (a float result of ``convert`` is the correctly
  rounded value; XLA flushes subnormal results to zero, which the comparison's floor of the
  smallest normal number covers);
- the rows that are ``correctly_rounded``: IEEE arithmetic (add, subtract, multiply; divide and
  sqrt where the platform rounds them correctly): 0.5 ulp of the exact value, the reference's own
  rounding;
- :data:`F32_ULPS`: the element-wise functions: the worst error in f32 ulps per platform from
  JAX's ``docs/accuracy.md`` (exhaustive over every f32 input; "TPU v2-v5e", "TPU v5p", "TPU v6e",
  "CPU" x86_64, "NVIDIA GPU" H100/B200); on the CPU the 4 ulps the reference's corpora were checked
  with (:data:`CPU_FLOOR_ULPS`), or the table's figure where it is more than twice that;
- dots and convolutions: :func:`dot_precision`, the precision the op really runs at from its
  ``precision_config``, its operand and result types and the platform's meaning of
  DEFAULT/HIGH/HIGHEST (:data:`DOT_PASSES`: bf16 passes on a TPU, TF32 on a GPU, f32 on the CPU),
  a bound relative to ``|A|·|B|`` (the sum of the magnitudes of the products) and the contraction
  size, never to the result (which cancels).
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._optable import OPS, ROW_ALIASES, OpDef
from ..attrs import PrecisionConfig
from ..builder import XlaOp
from ..errors import CompareArgumentError, GraphImportError
from ..ops.elementwise import BINARY, UNARY
from ..ops.linalg import DOT_GENERAL

if TYPE_CHECKING:
    from ..runtime.device import Device

__all__ = ["DeviceKind", "DEVICE_KINDS", "device_kind", "device_kind_of", "OpBound", "op_bound", "DotPrecision",
           "dot_precision", "checked_precision", "F32_ULPS", "DOT_PASSES", "CPU_FLOOR_ULPS",
           "ACCURACY_SOURCE", "row_of"]

ACCURACY_SOURCE = "JAX docs/accuracy.md, float32 table (exhaustive over f32 inputs)"
CPU_FLOOR_ULPS = 4.0  # the reference's historical bound of XLA:CPU's functions, checked on its corpora


@dataclass(frozen=True)
class DeviceKind:
    """A kind of device the model knows: ``name`` (``"tpu-v5e"``), its ``platform`` (``"cpu"``,
    ``"gpu"``, ``"tpu"``), the column of :data:`F32_ULPS` it reads and how it is written in reports."""

    name: str
    platform: str
    column: int
    label: str


#: Every device kind, by the name ``--device-kind`` takes.
DEVICE_KINDS: dict[str, DeviceKind] = {k.name: k for k in (
    DeviceKind("cpu", "cpu", 0, "CPU"),
    DeviceKind("gpu", "gpu", 1, "GPU"),
    DeviceKind("tpu-v2", "tpu", 2, "TPU v2"),
    DeviceKind("tpu-v3", "tpu", 2, "TPU v3"),
    DeviceKind("tpu-v4", "tpu", 2, "TPU v4"),
    DeviceKind("tpu-v5e", "tpu", 2, "TPU v5e"),
    DeviceKind("tpu-v5p", "tpu", 3, "TPU v5p"),
    DeviceKind("tpu-v6e", "tpu", 4, "TPU v6e"),
)}
_ALIASES = {"tpu": "tpu-v5e", "cuda": "gpu", "rocm": "gpu", "tpu-v5-lite": "tpu-v5e", "tpu-v5litepod": "tpu-v5e",
            "tpu-v6-lite": "tpu-v6e", "tpu-v5": "tpu-v5p"}


def device_kind(name: str | DeviceKind | None) -> DeviceKind:
    """The kind named ``name`` (``"tpu-v5e"``, ``"cpu"``, ``"gpu"``; ``"tpu"`` is a v5e), CPU for None.

    Raises CompareArgumentError (an XlaSdkError) naming the kinds known."""
    if isinstance(name, DeviceKind):
        return name
    if name is None:
        return DEVICE_KINDS["cpu"]
    key = re.sub(r"[\s_]+", "-", str(name).strip().lower())
    key = _ALIASES.get(key, key)
    if key not in DEVICE_KINDS:
        raise CompareArgumentError(f"compare: device kind {name!r} is not known; expected one of "
                          f"{', '.join(DEVICE_KINDS)}")
    return DEVICE_KINDS[key]


def device_kind_of(device: Device | None) -> DeviceKind:
    """The kind of a PJRT device (its platform, and for a TPU its ``device_kind``: "TPU v5 lite"); a
    device behind the ``proxy`` platform (IFRT Proxy, Pathways) by its ``device_kind``: a TPU is a TPU."""
    from ..runtime.accelerators import model_platform

    platform = model_platform(str(getattr(device, "platform", "cpu") or "cpu"),
                              str(getattr(device, "device_kind", "") or ""))
    if platform in ("cuda", "rocm", "gpu"):
        return DEVICE_KINDS["gpu"]
    if platform != "tpu":
        return DEVICE_KINDS["cpu"]
    text = str(getattr(device, "device_kind", "")).lower()
    for pattern, name in ((r"v5\s*lite|v5e", "tpu-v5e"), (r"v6\s*lite|v6e", "tpu-v6e"), (r"v5p|v5$", "tpu-v5p"),
                          (r"v4", "tpu-v4"), (r"v3", "tpu-v3"), (r"v2", "tpu-v2")):
        if re.search(pattern, text):
            return DEVICE_KINDS[name]
    return DEVICE_KINDS["tpu-v5e"]  # the oldest bounds of a TPU the table has: the loosest


@dataclass(frozen=True)
class OpBound:
    """One row of the model: how an op of some device kind may differ from its exact value on the
    same operands. ``kind``: ``"exact"`` (bit for bit), ``"rounded"`` (correctly rounded: the
    reference's own value), ``"ulps"`` (at most ``ulps`` f32 ulps of the exact value, then rounded
    to the result's type), ``"dot"`` (:func:`dot_precision`); ``source``: where the bound comes from."""

    kind: str
    ulps: float
    source: str
    atol: float = 0.0  # or this far absolutely (a function measured to err so next to its zeros)

    @property
    def cited(self) -> str:
        """Where the bound comes from, as a report cites it."""
        return "JAX's docs/accuracy.md" if self.source.startswith(ACCURACY_SOURCE) else self.source

    def within(self) -> str:
        """``within 600 f32 ulp or 0.00075 absolutely`` (the bound of an ``"ulps"`` row, as reports word it)."""
        return f"within {self.ulps:g} f32 ulp" + (f" or {self.atol:g} absolutely" if self.atol else "")


# -- the tables ----------------------------------------------------------------------------------------------
# Which ops are bit-exact on every device (data movement, integer and bitwise ops, comparisons,
# selects, the ops that round on purpose) and which are IEEE arithmetic, correctly rounded on every
# device, the rows say (``OpProps.bit_exact`` / ``correctly_rounded``, :mod:`xlasdk.ops._props`).
_U = {k: u.opdef for k, u in UNARY.items()}
_B = {k: b.opdef for k, b in BINARY.items()}

#: f32 worst cases in ulps (CPU, NVIDIA GPU, TPU v2-v5e, TPU v5p, TPU v6e) from JAX's
#: docs/accuracy.md (:data:`ACCURACY_SOURCE`); ``divide`` is its ``reciprocal`` row plus the
#: multiply's half ulp (XLA's TPU divide is x * reciprocal(y)), 0.5 where the platform divides in IEEE.
F32_ULPS: dict[OpDef, tuple[float, float, float, float, float]] = {
    _U["Tanh"]: (5.0, 5.5, 1365.5, 92.0, 1.5),
    _U["Exp"]: (1.5, 2.0, 116.0, 109.5, 64.5),
    _U["Expm1"]: (6.5, 1.5, 1772.0, 1357.5, 3.5),
    _U["Log"]: (1.5, 1.0, 4030.5, 62.0, 2.5),
    _U["Log1p"]: (3.0, 1.0, 4034.0, 63.0, 3.0),
    _U["Logistic"]: (2.5, 4.0, 243.0, 124.0, 65.5),
    _U["Rsqrt"]: (2.0, 2.0, 2.5, 2.5, 1.5),
    _U["Sqrt"]: (0.5, 1.0, 3.0, 3.0, 2.0),
    _U["Cbrt"]: (0.5, 1.5, 4.5, 4.5, 1.5),
    _U["Sin"]: (0.5, 1.5, 3.5, 3.5, 3.5),
    _U["Cos"]: (0.5, 2.0, 3.5, 3.5, 3.5),
    _U["Tan"]: (0.5, 3.5, 6.5, 7.0, 5.5),
    _B["Atan2"]: (0.5, 3.0, 3.5, 3.5, 3.5),
    _B["Div"]: (0.5, 1.5, 198.5, 40.5, 2.0),
    _U["Erf"]: (7.0, 6.5, 7.5, 8.5, 1.5),
    _U["Erfc"]: (66.0, 66.5, 145.0, 157.0, 124.5),
    _U["ErfInv"]: (65.0, 65.0, 427.0, 65.5, 65.0),
    _U["Acos"]: (1.5, 1.5, 5.0, 5.0, 4.0),
    _U["Asin"]: (2.0, 1.5, 5.0, 5.0, 4.5),
    _U["Atan"]: (5.5, 1.5, 2.5, 2.5, 2.5),
    _U["Acosh"]: (4.5, 2.5, 4031.0, 61.0, 4.5),
    _U["Asinh"]: (3.5, 2.0, 4034.5, 62.5, 3.5),
    _U["Atanh"]: (3.0, 3.5, 2183.5, 43.0, 3.5),
    _U["Cosh"]: (25.0, 2.5, 93.5, 99.0, 59.0),
    _U["Sinh"]: (25.0, 3.0, 1794.0, 1332.5, 59.0),
    _U["BesselI1e"]: (11.0, 15.5, 15.5, 15.5, 15.5),
}
#: Functions measured on a device with no row in JAX's table, by device kind: ``(ulps, atol)``, the
#: element within ``max(ulps * eps * |exact|, atol)`` of its exact value. ``tools/tpu_probe_behaviours.py``
#: measured them against XLA:CPU's f64 value over 12,011 f32 operands (magnitudes 1e-30..1e30 and
#: 0..12, both signs), the bound given with a margin of about 1.5 over the worst element: on a TPU v5e
#: (libtpu 0.0.42.1) lgamma was off by up to 3e-4 absolutely next to its zeros (1.3e6 ulps of a value
#: near 0; 389 ulps past an atol of 5e-4), digamma 8e-5, exp2 49.6 ulps, log2 4,027.5, pow 116,
#: polygamma (x > 0) 9,630 ulps of the reference's (scipy's) value past 1e-4; on XLA:CPU lgamma was
#: off by 2.8e-6 and digamma by 1.1e-6 next to their zeros (30,476 and 2,975 ulps of the value; 2.5
#: and 1.8 past an atol of 5e-6), where the generic 4 ulps cried wolf on a correct
#: lgamma(2.0003). Other device kinds keep the generic bound for these ops, as zeta does.
MEASURED_SOURCE = "tools/tpu_probe_behaviours.py against XLA:CPU's f64 value"
F32_MEASURED: dict[OpDef, dict[str, tuple[float, float]]] = {
    _U["Lgamma"]: {"tpu-v5e": (600.0, 7.5e-4), "cpu": (CPU_FLOOR_ULPS, 7.5e-6)},
    _U["Digamma"]: {"tpu-v5e": (16.0, 1.5e-4), "cpu": (CPU_FLOOR_ULPS, 7.5e-6)},
    _U["Exp2"]: {"tpu-v5e": (75.0, 0.0)},
    _U["Log2"]: {"tpu-v5e": (F32_ULPS[_U["Log"]][2], 0.0)},
    _B["Pow"]: {"tpu-v5e": (175.0, 0.0)},
    _B["Polygamma"]: {"tpu-v5e": (15000.0, 1.5e-4)},
}
_IEEE_DIVIDE = {"cpu"}  # platforms whose f32 divide and sqrt are IEEE (the f32 table's 0.5)

#: How each platform runs an f32 dot or convolution at each precision: (label, bits of each input
#: piece, pieces of each input, passes). A TPU multiplies bf16 pieces (8 significant bits) in f32:
#: DEFAULT 1 pass, HIGH 3 (bf16_3x), HIGHEST 6 (bf16_6x); a GPU rounds f32 inputs to TF32 (11
#: significant bits) below HIGHEST; the CPU multiplies in f32.
DOT_PASSES: dict[tuple[str, str], tuple[str, int, int, int]] = {
    ("tpu", "DEFAULT"): ("bf16 inputs", 8, 1, 1),
    ("tpu", "HIGH"): ("bf16_3x", 8, 2, 3),
    ("tpu", "HIGHEST"): ("bf16_6x", 8, 3, 6),
    ("gpu", "DEFAULT"): ("TF32 inputs", 11, 1, 1),
    ("gpu", "HIGH"): ("TF32 inputs", 11, 1, 1),
    ("gpu", "HIGHEST"): ("f32", 24, 1, 1),
    ("cpu", "DEFAULT"): ("f32", 24, 1, 1),
    ("cpu", "HIGH"): ("f32", 24, 1, 1),
    ("cpu", "HIGHEST"): ("f32", 24, 1, 1),
}
_EXACT_SOURCE = "bit-exact by definition (moves, integers, comparisons, selects, deliberate rounding)"
_IEEE_SOURCE = "IEEE 754 arithmetic: correctly rounded"


def _build() -> dict[tuple[OpDef, str], OpBound]:
    table: dict[tuple[OpDef, str], OpBound] = {}
    for kind in DEVICE_KINDS.values():
        for row in OPS.values():
            if row.props.bit_exact:
                table[row, kind.name] = OpBound("exact", 0.0, _EXACT_SOURCE)
            elif row.props.correctly_rounded:
                table[row, kind.name] = OpBound("rounded", 0.5, _IEEE_SOURCE)
        for row, cols in F32_ULPS.items():
            ulps = cols[kind.column]
            if kind.platform in _IEEE_DIVIDE and row in (_B["Div"], _U["Sqrt"]):
                table[row, kind.name] = OpBound("rounded", 0.5, _IEEE_SOURCE)
                continue
            if kind.platform == "cpu":  # the reference's checked 4 ulps, or the table's where it is far above
                big = ulps > 2 * CPU_FLOOR_ULPS
                table[row, kind.name] = OpBound(
                    "ulps", ulps if big else CPU_FLOOR_ULPS,
                    f"{ACCURACY_SOURCE}, CPU column" if big else
                    f"measured: XLA:CPU within {CPU_FLOOR_ULPS:g} ulp on the reference's corpora "
                    f"(accuracy.md's CPU column: {ulps:g})")
            else:
                column = ("CPU", "NVIDIA GPU", "TPU v2-v5e", "TPU v5p", "TPU v6e")[kind.column]
                table[row, kind.name] = OpBound("ulps", ulps, f"{ACCURACY_SOURCE}, {column} column")
        for row, kinds in F32_MEASURED.items():
            if kind.name in kinds:
                ulps, atol = kinds[kind.name]
                table[row, kind.name] = OpBound("ulps", ulps, f"measured on a {kind.label}: {MEASURED_SOURCE}", atol)
        for row in OPS.values():
            if row.props.bilinear:
                table[row, kind.name] = OpBound("dot", 0.0, "the precision the op runs at (DOT_PASSES)")
    return table


#: The model: ``(row, device kind name) -> OpBound``; an op without a row keeps the evaluator's
#: generic bound (one ulp of its value for the ops whose work is not followed).
ERROR_MODEL: dict[tuple[OpDef, str], OpBound] = _build()


def row_of(node: Any) -> OpDef | None:
    """The op table's row of a node (a loaded module's ``dot`` is a ``dot_general``)."""
    opdef = getattr(node, "opdef", None)
    if isinstance(opdef, OpDef):
        return opdef.table_row
    name = getattr(node, "opcode", "")
    return OPS.get(ROW_ALIASES.get(name, name))


def op_bound(node: Any, kind: DeviceKind) -> OpBound | None:
    """The model's row for ``node`` on ``kind`` (None: no row; the evaluator's generic bound)."""
    row = row_of(node)
    return None if row is None else ERROR_MODEL.get((row, kind.name))


# -- dots and convolutions -----------------------------------------------------------------------------------
_PRECISIONS = ("DEFAULT", "HIGHEST", "HIGH")


def _precisions(node: Any) -> list[str]:
    """The operand precisions of a dot/convolution (DEFAULT where none is given)."""
    attrs = getattr(node, "attrs", {}) or {}
    pc = attrs.get("precision_config")
    if pc is None:
        return ["DEFAULT", "DEFAULT"]
    if isinstance(node, XlaOp):
        with contextlib.suppress(GraphImportError):  # a spelling its kind does not read: searched below
            pc = node.attr("precision_config")
    if isinstance(pc, PrecisionConfig):
        found = [p.name for p in pc.precisions()]
    else:  # an undeclared one (a loaded stablehlo.dot's), as spelled
        found = re.findall(r"HIGHEST|HIGH|DEFAULT", str(getattr(pc, "text", pc)).upper())
    found = [p for p in found if p in _PRECISIONS] or ["DEFAULT"]
    return (found * 2)[:2]


@dataclass(frozen=True)
class DotPrecision:
    """How a dot or convolution runs on a device kind, and the bound that follows: the error of
    each element is at most ``product_rel + acc_eps * sqrt(K)`` times ``(|A|·|B|)`` for that
    element (``K`` the contraction size). ``round_inputs``: the type the device rounds f32 inputs to
    before multiplying (the emulation of :func:`xlasdk.compare`'s device reference), or None."""

    kind: DeviceKind
    precision: str
    label: str
    product_rel: float
    acc_eps: float
    round_inputs: str | None

    def relative_bound(self, k: int) -> float:
        return self.product_rel + self.acc_eps * math.sqrt(max(k, 1))

    def describe(self, k: int) -> str:
        """``TPU v5e DEFAULT precision (bf16 inputs; bound 7.8e-3 of |A|·|B|)``."""
        return (f"{self.kind.label} {self.precision} precision ({self.label}; bound {self.relative_bound(k):.2g} "
                "of |A|·|B|)")


def dot_precision(node: Any, dtypes: tuple[Any, ...], kind: DeviceKind, precision: str | None = None,
                  emulated: bool = False) -> DotPrecision:
    """The precision a dot/convolution ``node`` of operand types ``dtypes`` runs at on ``kind``
    (``precision``: every dot forced to it, as ``--precision highest`` compiles them; ``emulated``:
    its inputs were already rounded as the device rounds them, only the rest of the bound stays)."""
    names = [np.dtype(d).name for d in dtypes] or ["float32"]
    rank = {"DEFAULT": 0, "HIGH": 1, "HIGHEST": 2}
    prec = precision.upper() if precision else max(_precisions(node), key=rank.__getitem__)  # the more precise
    label, bits, pieces, _passes = DOT_PASSES[kind.platform, prec]
    acc = 2.0 ** -23  # f32 accumulation (or f64's, smaller, for f64 inputs)
    if any(n in ("float64", "complex128") for n in names):
        return DotPrecision(kind, prec, "f64", 0.0, 2.0 ** -52, None)
    narrow = all(n in ("bfloat16", "int8", "uint8", "int4", "uint4", "bool") or n.startswith("float8")
                 for n in names)
    if narrow or bits >= 24:  # exact products (bf16 x bf16 fits f32), or f32 products
        return DotPrecision(kind, prec, "bf16 inputs, exact products" if narrow else label, 0.0, acc, None)
    # f32 (or f16) inputs cut into ``pieces`` pieces of ``bits`` significant bits. Dropped: the last
    # piece's remainder of each input (relative 2**-(bits*pieces) each: 2 units) and the products of
    # pieces the passes leave out (bf16_3x: lo*lo, 1 unit; bf16_6x: three of about a unit each)
    unit = 2.0 ** -(bits * pieces)
    dropped = {1: 0.0, 2: 1.0, 3: 3.0}.get(pieces, float(pieces * pieces))
    product_rel = (2.0 + dropped) * unit + unit * unit
    if emulated:  # the inputs were rounded as the device does: the products are exact again
        product_rel = 0.0 if pieces == 1 else (dropped + 1.0) * unit
    rounding = ("bfloat16" if bits == 8 else "tf32") if pieces == 1 else None
    return DotPrecision(kind, prec, label, product_rel, acc, rounding)


def strength_reduced(node: Any, lhs: Sequence[int], rhs: Sequence[int]) -> bool:
    """Whether XLA:TPU may compute dot ``node`` of operand dimensions ``lhs`` and ``rhs`` from its f32
    inputs as they are, not rounded to bf16: a dot that contracts nothing (an outer product) or one
    of whose operands has no free dimension (a vector's dot) becomes multiplies and a sum in XLA's
    algebraic simplifier (dot strength reduction) and never reaches the matrix unit. Measured on a
    TPU v5e (libtpu 0.0.42.1): such dots came out at the f32 products' values, the matrix-matrix
    dots of the same test at the bf16-rounded inputs' values, bit for bit."""
    if row_of(node) is not DOT_GENERAL:
        return False
    dn = node.attr("dot_dimension_numbers") if isinstance(node, XlaOp) else None
    if dn is None:  # a plain dot (a loaded stablehlo.dot): lhs's last dimension with rhs's first
        lc, rc, lb, rb = [len(lhs) - 1], [0], [], []
    else:
        lc, rc = list(dn.lhs_contracting_dimensions), list(dn.rhs_contracting_dimensions)
        lb, rb = list(dn.lhs_batch_dimensions), list(dn.rhs_batch_dimensions)

    def size(dims: Sequence[int], keep: Any) -> int:
        return int(np.prod([dims[d] for d in range(len(dims)) if keep(d)] or [1]))

    return (size(lhs, lambda d: d in lc) == 1 or size(lhs, lambda d: d not in lc + lb) == 1
            or size(rhs, lambda d: d not in rc + rb) == 1)


def round_to(x: np.ndarray[Any, Any], kind: str) -> np.ndarray[Any, Any]:
    """``x`` (float32) rounded to nearest even to ``"bfloat16"`` or ``"tf32"`` (10 fraction bits), as float32."""
    import ml_dtypes

    a = np.asarray(x, np.float32)
    if kind == "bfloat16":
        return np.asarray(a.astype(ml_dtypes.bfloat16).astype(np.float32))
    bits = a.view(np.uint32).astype(np.uint64)
    drop = 13
    half = np.uint64(1 << (drop - 1))
    odd = (bits >> np.uint64(drop)) & np.uint64(1)
    rounded = ((bits + half - np.uint64(1) + odd) >> np.uint64(drop)) << np.uint64(drop)
    out = rounded.astype(np.uint32).view(np.float32)
    return np.asarray(np.where(np.isfinite(a), out, a))


def _elements(shape: Any) -> int:
    return int(np.prod([int(d) for d in shape.dimensions()] or [1])) if shape.is_array() else 0


def checked_precision(precision: str) -> str:
    """``precision`` when it names a dot precision (``"highest"``, ``"high"``, ``"default"``, any case).

    Raises CompareArgumentError naming the three."""
    if not isinstance(precision, str) or precision.upper() not in _PRECISIONS:
        raise CompareArgumentError(f"compare: precision {precision!r}: expected default, high or highest")
    return precision


def set_precision(comp: Any, precision: str) -> Any:
    """``comp`` with every dot and convolution at ``precision`` (``--precision highest``): its HLO
    text with each ``operand_precision`` replaced, loaded again."""
    from ..program.computation import XlaComputation

    word = checked_precision(precision).lower()
    lines = []
    for line in comp.as_hlo_text().splitlines():
        if re.search(r"\s(dot|convolution)\(", line):
            line = re.sub(r",\s*operand_precision=\{[^}]*\}", "", line)
            line = re.sub(r"(,\s*metadata=|$)", lambda m: f", operand_precision={{{word},{word}}}{m.group(1)}", line,
                          count=1)
        lines.append(line)
    return XlaComputation.from_hlo_text("\n".join(lines) + "\n")


#: f32 worst cases of ``result_accuracy = HIGHEST`` where JAX's table gives one (same columns as
#: :data:`F32_ULPS`); other ops at HIGHEST keep their default row.
F32_ULPS_HIGHEST: dict[OpDef, tuple[float, float, float, float, float]] = {
    _U["Exp"]: (1.5, 2.0, 1.5, 1.5, 1.5),
    _U["Expm1"]: (6.5, 1.5, 2.0, 2.0, 2.0),
    _U["Erfc"]: (4.0, 5.0, 5.5, 5.0, 5.0),
}


#: XLA:TPU's f32 logistic is off by an *absolute* amount, not by ulps of its value: measured on a TPU
#: v5e (tests/data/tpu_mlp, tests/test_tpu_recorded_mlps.py), logistic(-2.82) = 0.0563 came out at
#: least 1,857 f32 ulps from the exact value, where accuracy.md's table says 243. It behaves as
#: 0.5 * tanh(x / 2) + 0.5 (XLA's tanh expansion of the logistic): half of tanh's error, in ulps of
#: values in [0.5, 1), 2**-24 each, whatever the logistic's own magnitude. Per column of F32_ULPS.
TPU_LOGISTIC_ATOL: tuple[float, float, float, float, float] = tuple(  # type: ignore[assignment]
    0.5 * u * 2.0 ** -24 for u in F32_ULPS[_U["Tanh"]])


def result_accuracy(node: Any) -> tuple[str, float, float, float] | None:
    """``(mode, atol, rtol, ulps)`` of an op's ``result_accuracy`` attribute, None when unset."""
    attr = (getattr(node, "attrs", {}) or {}).get("result_accuracy")
    if attr is None:
        return None
    mode = getattr(attr, "mode", None)
    if mode is not None:  # a built op's ResultAccuracy
        return (str(getattr(mode, "name", mode)).upper(), float(attr.atol), float(attr.rtol), float(attr.ulps))
    text = str(getattr(attr, "text", attr))
    found = re.search(r"mode\s*=\s*#stablehlo\.result_accuracy_mode<(\w+)>", text)

    def num(name: str) -> float:
        m = re.search(rf"\b{name}\s*=\s*([-+0-9.eE]+)", text)
        return float(m.group(1)) if m else 0.0

    return ((found.group(1).upper() if found else "DEFAULT"), num("atol"), num("rtol"), num("ulps"))


def function_ulps(node: Any, kind: DeviceKind, row: OpBound) -> tuple[float, float, float]:
    """``(ulps, atol, rtol)`` a function ``node`` may be off by on ``kind``: its row's ulps, or, where
    its ``result_accuracy`` asks for HIGHEST, the table's HIGHEST figure; a TOLERANCE looser than
    the row widens the bound to it (a tighter one is not trusted beyond the device's documented
    worst case)."""
    ra = result_accuracy(node)
    ulps, atol, rtol = row.ulps, 0.0, 0.0
    if kind.platform == "tpu" and row_of(node) is _U["Logistic"]:
        atol = TPU_LOGISTIC_ATOL[kind.column]
    atol = max(atol, row.atol)
    if ra is None:
        return ulps, atol, rtol
    mode, r_atol, r_rtol, r_ulps = ra
    r = row_of(node)
    if mode == "HIGHEST" and r is not None and r in F32_ULPS_HIGHEST:
        ulps = F32_ULPS_HIGHEST[r][kind.column]
        if kind.platform == "cpu":
            ulps = max(ulps, CPU_FLOOR_ULPS)
    elif mode == "TOLERANCE":
        ulps, atol, rtol = max(ulps, r_ulps), r_atol, r_rtol
    return ulps, atol, rtol
