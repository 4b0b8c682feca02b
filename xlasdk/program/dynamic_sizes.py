"""Which values of a program set a dimension's run-time size (XLA's dynamic dimensions): the size
operand of ``set_dimension_size`` (which ``DynamicReshape`` and dynamic parameters are built with),
and the entry parameters that feed it unchanged. Valid sizes are ``[0, bound]``, the dimension's
static extent. Read by :mod:`xlasdk.runtime.dynamic` (a size out of range is refused before XLA runs
on it) and :func:`xlasdk.random_inputs` (sizes are drawn in range)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .computation import XlaComputation
    from .graph_import import Instruction


def _dims(ins: Instruction) -> tuple[int, ...]:
    return tuple(int(d) for d in ins.shape.dimensions()) if ins.shape.is_array() else ()


def size_uses(ins: Instruction) -> list[tuple[int, int, int]]:
    """``(operand position, dimension, bound)`` for each operand of ``ins`` that sets a dimension's
    run-time size (``set_dimension_size``'s size, which ``DynamicReshape`` and a dynamic parameter
    are built with): valid sizes are ``[0, bound]``, the dimension's static extent."""
    from ..ops.shaping import SET_DIMENSION_SIZE

    if not ins.op.opdef.same_op(SET_DIMENSION_SIZE) or len(ins.operands) != 2:
        return []
    dim: int | None = ins.op.attr("dimension")
    base = _dims(ins.operands[0])
    return [] if dim is None or not 0 <= int(dim) < len(base) else [(1, int(dim), base[int(dim)])]


def dimension_size_parameters(computation: XlaComputation) -> list[tuple[int, str, int, int]]:
    """``(parameter number, instruction, dimension, bound)`` for each parameter of ``computation``'s
    entry whose value sets a dimension's run-time size directly (through ops that pass it on
    unchanged: convert, reshape...): its value must be in ``[0, bound]``. A size the program
    computes from a parameter (``n + 1``) is not traced."""
    instrs = computation.instructions()
    params = {ins.index: k for k, ins in enumerate(i for i in instrs if i.opcode == "parameter")}
    out: list[tuple[int, str, int, int]] = []
    for ins in instrs:
        for k, dim, bound in size_uses(ins):
            src = ins.operands[k]
            while src.opcode != "parameter" and src.op.opdef.props.passes_operands == (0,) and src.operands:
                src = src.operands[0]
            if src.opcode == "parameter" and src.index in params:
                out.append((params[src.index], ins.name, dim, bound))
    return out
