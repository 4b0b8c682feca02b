"""Random inputs a program can use: each parameter's valid range learned from its users.

``run_hlo_module`` and ``xlasdk run --random-inputs`` feed a program random values. Drawn blindly,
they make most real programs answer nothing useful: a gather, dynamic-slice or
dynamic-update-slice index outside the operand is clamped (every draw reads the same edge), and
``log``, ``sqrt`` or ``rsqrt`` of a negative value, or a division by zero, only gives NaN or Inf.
:func:`input_ranges` reads the program's instructions (``comp.instructions()``) and follows each
parameter to the ops that use its value, through the ops that only move or convert values
(convert, reshape, broadcast, transpose, slice, concatenate, select, ...):

- an **index** operand (gather's and scatter's indices, dynamic-slice's and dynamic-update-slice's
  start indices) bounds an integer parameter to ``[0, size - window]`` along every dimension it
  indexes (the smallest of them when it indexes several);
- a **dimension size** (``set_dimension_size``'s size operand: ``DynamicReshape``'s sizes, a
  dynamic parameter's) bounds an integer parameter to ``[0, bound]``, the dimension's static
  extent; a size the program computes from a parameter (``n + 1``) is bounded as its operand is
  (not at all, for an arithmetic op), so such a parameter may be drawn past the bound, which the
  run refuses (:class:`~xlasdk.errors.ShapeError`);
- the operand of ``log``, ``log_plus_one``, ``sqrt``, ``rsqrt``, the divisor of ``divide`` and
  ``remainder`` and the base of ``power`` must be **positive**.

:func:`random_inputs` draws values inside those ranges: indices uniform in their range, positive
values ``|N(0, 1)| + 0.01`` (integers in ``[1, 10)``), other values as ``xlasdk run`` always drew
them (floats ``N(0, 1)``, integers in ``[0, 10)``, booleans fair).

The entry computation and the functions it calls (``func.call``: JAX's private functions, an
optimized dump's fusions) are read; uses inside control-flow bodies (while, if, case) are not
followed, and a parameter used only there gets the default draw.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .program.dynamic_sizes import size_uses

if TYPE_CHECKING:
    from .attrs import GatherDimensionNumbers, ScatterDimensionNumbers
    from .program.computation import XlaComputation
    from .program.graph_import import Instruction
    from .shape import Shape

__all__ = ["InputRange", "input_ranges", "random_inputs", "random_value"]


@dataclasses.dataclass(frozen=True)
class InputRange:
    """What a parameter's values must be for the program to use them.

    Attributes
    ----------
    index_max: the largest valid index (values in ``[0, index_max]``), or None when the parameter
        is no index.
    positive: the values must be > 0.
    reasons: the uses that set the range, as ``"opcode name"`` strings (for messages).
    """

    index_max: int | None = None
    positive: bool = False
    reasons: tuple[str, ...] = ()

    def merge(self, other: InputRange) -> InputRange:
        hi = self.index_max if other.index_max is None else (
            other.index_max if self.index_max is None else min(self.index_max, other.index_max))
        return InputRange(hi, self.positive or other.positive, self.reasons + other.reasons)


# Which operands reach an op's result unchanged (followed back to the parameters) and which
# must be > 0, the rows say (``OpProps.passes_operands`` / ``positive_operands``,
# :mod:`xlasdk.ops._props`).


def _dims(ins: Instruction) -> tuple[int, ...]:
    return tuple(int(d) for d in ins.shape.dimensions()) if ins.shape.is_array() else ()


def _index_uses(ins: Instruction) -> list[tuple[int, int]]:
    """``(operand position, largest valid index)`` for the index operands of ``ins``."""
    from .ops.indexing import DYNAMIC_SLICE, DYNAMIC_UPDATE_SLICE, GATHER, SCATTER

    node, op, ops = ins.op, ins.op.opdef, ins.operands
    out: list[tuple[int, int]] = []
    if op.same_op(DYNAMIC_SLICE):
        sizes: tuple[int, ...] = node.attr("slice_sizes", ())
        base = _dims(ops[0])
        out = [(1 + k, base[k] - sizes[k]) for k in range(min(len(base), len(sizes), len(ops) - 1))]
    elif op.same_op(DYNAMIC_UPDATE_SLICE):
        base, upd = _dims(ops[0]), _dims(ops[1])
        out = [(2 + k, base[k] - upd[k]) for k in range(min(len(base), len(upd), len(ops) - 2))]
    elif op.same_op(GATHER):
        g: GatherDimensionNumbers | None = node.attr("dimension_numbers")
        sizes, base = node.attr("slice_sizes", ()), _dims(ops[0])
        mapped = g.start_index_map if g is not None else []
        if mapped and len(sizes) == len(base):
            out = [(1, min(base[d] - sizes[d] for d in mapped))]
    elif op.same_op(SCATTER) and len(ops) >= 3 and (len(ops) - 1) % 2 == 0:
        n = (len(ops) - 1) // 2
        sd: ScatterDimensionNumbers | None = node.attr("scatter_dimension_numbers")
        if sd is None:
            return []
        base, upd = _dims(ops[0]), _dims(ops[n + 1])
        mapped = sd.scatter_dims_to_operand_dims
        inserted = {*sd.inserted_window_dims, *sd.input_batching_dims}
        window = dict(zip([d for d in range(len(base)) if d not in inserted],
                          [upd[w] for w in sd.update_window_dims if w < len(upd)], strict=False))
        if mapped:
            out = [(n, min(base[d] - window.get(d, 1) for d in mapped if d < len(base)))]
    return [(k, max(hi, 0)) for k, hi in out] + [(1, bound) for _, _, bound in size_uses(ins)]


def input_ranges(computation: XlaComputation) -> list[InputRange]:
    """One :class:`InputRange` per parameter of ``computation`` (built or loaded), learned from
    the uses of its value in the entry computation and in the functions it calls (``func.call``;
    an optimized dump's fusions are such calls), see the module docstring.

    Raises :class:`~xlasdk.errors.GraphImportError` when the module cannot be read as a graph."""
    from .program.graph_import import import_graph

    callees: dict[str, list[InputRange] | None] = {}

    def of_callee(name: str) -> list[InputRange] | None:
        if name not in callees:
            callees[name] = None  # a recursive call learns nothing more
            try:
                g = import_graph(computation.compiler_ir(), computation.name, name)
            except Exception:  # noqa: BLE001 - a function the graph cannot hold: nothing learned
                return None
            callees[name] = _graph_ranges(g.instructions, of_callee)
        return callees[name]

    return _graph_ranges(computation.instructions(), of_callee)


def _callee(ins: Instruction) -> str | None:
    if ins.opcode != "func.call":
        return None
    ref = str(ins.attributes.get("callee", ""))
    ref = ref[1:] if ref.startswith("@") else ref
    return ref.strip('"') or None


def _graph_ranges(instrs: Sequence[Instruction], of_callee: Any) -> list[InputRange]:
    """The parameters' ranges in one function's instructions (``of_callee(name)``: a called
    function's parameters' ranges, or None)."""
    needs: dict[int, InputRange] = {}

    def need(ins: Instruction, r: InputRange, seen: set[int]) -> None:
        if ins.index in seen:
            return
        seen.add(ins.index)
        if ins.opcode == "parameter":
            needs[ins.index] = needs.get(ins.index, InputRange()).merge(r)
            return
        positions = ins.op.opdef.props.passes_operands
        operands = ins.operands
        for k in range(len(operands)) if positions is None else positions:
            if k < len(operands):
                need(operands[k], r, seen)

    for ins in instrs:
        for k, hi in _index_uses(ins):
            if k < len(ins.operands):
                need(ins.operands[k], InputRange(index_max=hi, reasons=(f"{ins.opcode} {ins.name}",)), set())
        for k in ins.op.opdef.props.positive_operands:
            if k < len(ins.operands):
                need(ins.operands[k], InputRange(positive=True, reasons=(f"{ins.opcode} {ins.name}",)), set())
        name = _callee(ins)
        inner = of_callee(name) if name is not None else None
        for k, r in enumerate(inner or ()):
            if k < len(ins.operands) and (r.index_max is not None or r.positive):
                need(ins.operands[k], InputRange(r.index_max, r.positive, tuple(f"{x} (in {name})" for x in r.reasons)),
                     set())
    params = [ins for ins in instrs if ins.opcode == "parameter"]
    return [needs.get(p.index, InputRange()) for p in params]


def random_value(shape: Shape, rng: np.random.Generator, valid: InputRange | None = None) -> np.ndarray[Any, Any]:
    """A random array of ``shape`` (an array :class:`~xlasdk.Shape`), inside ``valid`` when given."""
    import ml_dtypes as _ml

    ml_dtypes: Any = _ml  # untyped functions (iinfo)
    dt = np.dtype(shape.numpy_dtype())
    dims = tuple(shape.dimensions())
    kind = dt.kind
    valid = valid or InputRange()
    if kind == "b":
        return rng.random(dims) < 0.5
    info: Any = None
    if kind in "iu":
        info = np.iinfo(dt)
    elif _is_extension(dt):
        try:
            info = ml_dtypes.iinfo(dt)  # int4, uint4, int2, uint2
        except (TypeError, ValueError):
            info = None
    if info is not None:
        top = int(info.max)
        if valid.index_max is not None:
            return rng.integers(0, min(valid.index_max, top) + 1, size=dims).astype(dt)
        low = 1 if valid.positive else 0
        return rng.integers(low, max(low, min(9, top)) + 1, size=dims).astype(dt)
    if kind == "c":
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(dt)
    values = rng.standard_normal(dims)
    if valid.index_max is not None:  # a float used as an index (converted first)
        values = rng.integers(0, valid.index_max + 1, size=dims).astype(np.float64)
    elif valid.positive:
        values = np.abs(values) + 0.01
    if _is_extension(dt) and np.isnan(np.array(-1.0).astype(dt).astype(np.float32)):  # no sign: f8e8m0fnu
        values = np.abs(values)
    return values.astype(dt)


def _is_extension(dt: np.dtype[Any]) -> bool:
    """A dtype numpy does not know (ml_dtypes' bfloat16, float8_*, int4, ...): user-defined type numbers."""
    return dt.num >= 256


def random_inputs(
    computation: XlaComputation, seed: int = 0, *, given: Sequence[Any | None] | None = None,
) -> list[np.ndarray[Any, Any]]:
    """One random array per parameter of ``computation``, inside the ranges :func:`input_ranges`
    learns (valid indices, positive operands of log/sqrt/division); ``given[i]``, when not None,
    is used as it is for parameter ``i``. Deterministic for a ``seed``.

    Raises :class:`~xlasdk.errors.ShapeError` for a tuple parameter (only arrays are drawn),
    :class:`~xlasdk.errors.XlaSdkError` for a ``seed`` that is not an integer from 0 to 2**64 - 1
    (``xlasdk._numbers.SEED``, as ``--seed`` takes it)."""
    from ._numbers import SEED
    from .errors import GraphImportError, ShapeError

    rng = np.random.default_rng(SEED.check(seed, "random_inputs: seed"))

    ps = computation.program_shape()
    shapes = ps.parameter_shapes()
    try:
        ranges = input_ranges(computation)
    except GraphImportError:
        ranges = [InputRange()] * len(shapes)
    out = []
    for i, s in enumerate(shapes):
        if given is not None and i < len(given) and given[i] is not None:
            out.append(np.asarray(given[i]))
            continue
        if not s.is_array():
            raise ShapeError(f"random_inputs: parameter {i} has shape {s}; only arrays are drawn")
        out.append(random_value(s, rng, ranges[i] if i < len(ranges) else None))
    return out
