"""The reference evaluator's core: the walk over a program's graph, values and error bounds, and the
per-output comparison.

:func:`evaluate` runs a computation (built or loaded) op by op in numpy, on its instruction graph
(:meth:`XlaComputation.instructions <xlasdk.XlaComputation.instructions>`): floating-point and
complex ops are computed in float64 / complex128 from the op's inputs and rounded once to the op's
element type (bf16, f16 and the fp8 types through ``ml_dtypes``), integer ops are exact with
XLA's wrap-around, and the edges follow XLA's operation semantics (clamped dynamic-slice starts,
integer division by zero, shifts past the bit width, NaN propagation in max/min). An op without a
rule raises :class:`UnsupportedOpError` naming it (a custom call by its target): nothing is
guessed.

:func:`xlasdk.reference.compare` runs the program on a device (XLA) and against the reference and
reports per output with this module's :class:`CompareReport`.

**Rules.** An op's evaluation rule is ``rule(node, operands, ev) -> value``: operands are numpy
arrays (tuples for multi-result ops), ``ev`` (the :class:`Evaluator`) reads attributes and
evaluates regions. Each rule is bound to its row of the op table (:attr:`OpDef.evaluate
<xlasdk._optable.OpDef.evaluate>`, with :func:`~xlasdk._optable.evaluates`) in the module of this
package that mirrors the op's family (``reference/indexing.py`` for ``ops/indexing.py``'s
gather), and the evaluator dispatches through the node's row; a row the evaluator refuses says why
(:attr:`OpDef.no_evaluate <xlasdk._optable.OpDef.no_evaluate>`). Two kinds of rules have their own
key instead of a row: custom calls, by target name (:data:`CUSTOM_CALL_RULES`: the LAPACK calls of
jaxlib's CPU lowering...), and the ops that a loaded module holds and the table has no row for
(:data:`OPAQUE_RULES`, by op name: ``func.call``, ``mhlo.copy``, ``stablehlo.dot``...).
:data:`RULES` and :data:`REFUSED` are read-only views of all of them by op name.

The code lives in three modules below this one: :mod:`._walk` (the rule tables, the
:class:`~._walk.Evaluator` every rule receives, the helpers the families share), :mod:`._bounds`
(output scales and error bounds) and :mod:`._report` (comparing an output, the report). This module
re-exports only the public names of its ``__all__``; everything else is imported from the module that
defines it.
"""


from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._where import where
from ._bounds import OutputScale, error_bounds, made_by_dot, output_scale
from ._orders import with_order
from ._precision import device_kind
from ._report import CompareReport, OutputComparison, default_tolerance
from ._walk import CUSTOM_CALL_RULES, OPAQUE_RULES, REFUSED, RULES, Evaluator, UnsupportedOpError, Value, dtype_of

if TYPE_CHECKING:
    from ..program.computation import XlaComputation

__all__ = ["evaluate", "CompareReport", "OutputComparison", "UnsupportedOpError", "RULES", "REFUSED",
           "CUSTOM_CALL_RULES", "OPAQUE_RULES", "default_tolerance"]


def evaluate(computation: XlaComputation, *args: Any) -> list[np.ndarray[Any, Any]]:
    """The outputs of ``computation`` on ``args``, computed by the reference evaluator.

    Parameters
    ----------
    computation: an :class:`~xlasdk.XlaComputation`, built or loaded.
    args: one array (or scalar) per parameter, of the parameter's shape and element type.

    Returns
    -------
    list of numpy arrays, one per output (a tuple result is flattened), in the outputs' element
    types (``ml_dtypes`` types for bf16 and fp8).

    Raises
    ------
    UnsupportedOpError
        An op of the program has no rule here (the message names it).
    ShapeError, DTypeError
        Wrong number of arguments, or one of the wrong shape or element type.
    """
    return run_reference(computation, args, scales=False)[0]


def run_reference(computation: XlaComputation, args: Sequence[Any], scales: bool = True,
               callees: dict[str, Any] | None = None, model: Any = None) -> tuple[list[np.ndarray[Any, Any]],
                                                                               list[float]]:
    """The reference outputs and, per output (``scales``; else none), the term scale of the op that
    produced it with the per-element error bound its value carries (:class:`OutputScale`).
    ``callees``: the called functions' graphs, shared by the evaluators of several simulated devices.
    ``model``: ``(device kind, precision or None, emulate)``, the error model the bounds follow
    (:mod:`._precision`; default: the CPU's)."""
    from ..errors import DTypeError, ShapeError

    g = computation.instruction_graph()
    if len(args) != len(g.params):
        raise ShapeError(f"evaluate: {computation.name!r} takes {len(g.params)} arguments, got {len(args)}")
    env: dict[int, Value] = {}

    def argument(i: int, shape: Any, a: Any, at: str) -> Value:
        """Argument ``i`` (its element ``at`` in a tuple parameter) checked against ``shape``."""
        if shape.is_tuple():  # a tuple parameter: a tuple (or list) of its elements, nested as it is
            parts = shape.tuple_shapes()
            if not isinstance(a, (tuple, list)) or len(a) != len(parts):
                got = f"a {type(a).__name__} of {len(a)}" if isinstance(a, (tuple, list)) else type(a).__name__
                raise ShapeError(f"evaluate: argument {i}{at} must be a tuple of {len(parts)} values for parameter "
                                 f"{i}'s {shape}, got {got}{where()}")
            return tuple(argument(i, s, x, f"{at}[{k}]") for k, (s, x) in enumerate(zip(parts, a, strict=True)))
        arr = np.asarray(a)
        want = dtype_of(shape)
        if arr.shape != tuple(shape.dimensions()):
            raise ShapeError(f"evaluate: argument {i}{at} has shape {arr.shape}, parameter {i}{at} is {shape}"
                             f"{where()}")
        if arr.dtype != want and not isinstance(a, (bool, int, float, complex)):  # as exe(...) checks them
            raise DTypeError(f"evaluate: argument {i}{at} has element type {arr.dtype}, parameter {i}{at} is "
                             f"{shape}{where()}")
        return arr.astype(want, copy=False)

    for i, (p, a) in enumerate(zip(g.params, args, strict=True)):
        env[id(p)] = argument(i, p.shape, a, "")
    ev = Evaluator(computation)
    if model is not None:
        ev.model, ev.precision, ev.emulate = device_kind(model[0]), model[1], bool(model[2])
    if callees is not None:
        ev.callees = callees
    if scales:  # the bounds follow the calls' ops on the values they had
        ev.record_calls(env)
    outs = ev.run_graph([*g.outputs, *g.effects], env)[: len(g.outputs)]
    if not scales:  # the values alone (evaluate): no error bounds to carry
        return [np.asarray(o) for o in outs], []
    bounds = error_bounds(g.outputs, env, ev)
    return [np.asarray(o) for o in outs], [with_order(OutputScale(output_scale(o, env, ev), bounds.get(id(o)),
                                                                   made_by_dot(o)), o, env, bounds, g.params)
                                           for o in g.outputs]
