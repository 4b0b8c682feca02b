"""A built computation with bounded dynamic shapes rewritten for a runtime of static arrays
(:func:`static_interface`): what :func:`xlasdk.compile` runs for such a program."""

from __future__ import annotations

from dataclasses import dataclass

from ..builder import Graph
from ..errors import CompileError
from ..shape import ProgramShape, Shape
from .computation import XlaComputation
from .origin import StaticRewrite

__all__ = ["StaticInterface", "static_interface"]


@dataclass(frozen=True)
class StaticInterface:
    """A computation with bounded dynamic shapes rewritten for a runtime of static arrays
    (:func:`static_interface`).

    Attributes
    ----------
    computation: the rewritten program: each dynamic parameter a static argument of its bounds
        followed (after all parameters) by one ``s32[]`` size per dynamic dimension, joined by
        ``set_dimension_size`` inside; the results, then one ``s32[]`` size per dynamic dimension
        of a result (``GetDimensionSize``).
    n_results: the number of results of the original program (before the sizes).
    dynamic_results: ``(result, dimension)`` of each size result, in order.
    dynamic_params: ``(parameter, dimensions)`` of each dynamic parameter, in order.
    """

    computation: XlaComputation
    n_results: int
    dynamic_results: tuple[tuple[int, int], ...]
    dynamic_params: tuple[tuple[int, tuple[int, ...]], ...]


def static_interface(computation: XlaComputation) -> StaticInterface:
    """Rewrite a built computation with bounded dynamic shapes (``f32[<=5]``) into one with a
    static interface (:class:`StaticInterface`): what jaxlib's runtime can run. The original
    builder gains the ``GetDimensionSize`` / ``Tuple`` nodes of the rewrite; its default root
    (the last op built) does not change.

    Raises
    ------
    CompileError
        For a computation loaded from a file: its graph is the module's, which jaxlib cannot give
        dynamic arguments and whose padded results it cannot cut.
    """
    from ..ops.control import GetTupleElement, Tuple  # the rewrite builds with the public ops
    from ..ops.shaping import GetDimensionSize

    program_shape = computation.program_shape()
    g = computation._built()
    if g is None:
        raise CompileError(
            f"compile: {computation.name!r} has dynamic shapes ({program_shape}) and was loaded from a file: jaxlib "
            "cannot take dynamic arguments and hands back padded results; build it with an XlaBuilder"
        )
    b = g.builder
    result = program_shape.result_shape()
    dyn: list[tuple[int, int]] = []
    with b.keeping_default_root():
        n = len(result.tuple_shapes()) if result.is_tuple() else 0
        outs = [GetTupleElement(g.root, i) for i in range(n)] if result.is_tuple() else [g.root]
        sizes = []
        for k, o in enumerate(outs):
            for d in range(o.shape.rank()):
                if o.shape.is_dynamic_dimension(d):
                    dyn.append((k, d))
                    sizes.append(GetDimensionSize(o, d))
        root = Tuple(b, outs + sizes) if sizes else g.root
    params = program_shape.parameter_shapes()
    dyn_params = tuple(
        (i, tuple(d for d in range(p.rank()) if p.is_dynamic_dimension(d)))
        for i, p in enumerate(params)
        if p.is_array() and not p.is_static()
    )
    static = [Shape.array_shape(p.element_type(), p.dimensions()) if not p.is_static() else p for p in params]
    names = list(program_shape.parameter_names())
    extra = [f"{names[i]}_size{d}" for i, dims in dyn_params for d in dims]
    s32 = Shape.scalar_shape("int32")
    rewritten = XlaComputation(
        g.name,
        ProgramShape(static + [s32] * len(extra), root.shape, names + extra) if dyn_params
        else ProgramShape(list(params), root.shape, names),
        StaticRewrite(Graph(g.name, g.parameters, root, g.side_effects), computation.origin.heap_bytes,
                      padded_params=bool(dyn_params)),
    )
    return StaticInterface(rewritten, len(outs), tuple(dyn), dyn_params)
