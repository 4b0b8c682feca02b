"""The graph's containers: a :class:`Region` (an op's sub-computation), the :class:`Graph` of a
program, the :class:`ModuleContext` an imported graph keeps, and the :class:`Computation` interface.

Split from :mod:`xlasdk.builder`, which re-exports every name (import them from there); the nodes
(:class:`~xlasdk.builder.XlaOp`) and the builder live there.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .shape import ProgramShape

if TYPE_CHECKING:
    from .builder import XlaBuilder, XlaOp

__all__ = ["Region", "ModuleContext", "Graph", "Computation"]

class Region:
    """A sub-computation attached to an op (reducer, comparator, loop body, branch).

    ``params`` are the sub-builder's Parameter ops in order (tuple-shaped parameters become
    one block argument per element); ``results`` are the returned ops (a tuple-valued result is
    returned element by element).

    ``bindings``, when given, holds one op of the enclosing graph per parameter: the region then
    has no block arguments and each parameter stands for its bound outer value, captured
    implicitly (the branches of ``stablehlo.if`` / ``stablehlo.case`` work this way). Bound
    values are dependencies of the op that owns the region.

    Regions of an imported module (:mod:`xlasdk.program.graph_import`) keep what the module
    had: ``captures`` are outer values the region's ops use directly (dependencies of the
    owning op, as bindings are), ``effects`` are ops of the region that no result uses but
    that run with it (side effects), ``terminator`` the op that ends the block
    (``stablehlo.return`` unless the module had another, such as ``sdy.return``).
    """

    __slots__ = ("params", "results", "bindings", "captures", "effects", "terminator")

    def __init__(
        self,
        params: Sequence[XlaOp],
        results: Sequence[XlaOp],
        bindings: Sequence[XlaOp] | None = None,
        *,
        captures: Sequence[XlaOp] = (),
        effects: Sequence[XlaOp] = (),
        terminator: str = "stablehlo.return",
    ) -> None:
        self.params = tuple(params)
        self.results = tuple(results)
        self.bindings = None if bindings is None else tuple(bindings)
        self.captures = tuple(captures)
        self.effects = tuple(effects)
        self.terminator = terminator
        if self.bindings is not None and len(self.bindings) != len(self.params):
            raise ValueError(f"Region: {len(self.bindings)} bindings for {len(self.params)} parameters")

    def with_bindings(self, bindings: Sequence[XlaOp]) -> Region:
        """The same region with its parameters bound to the outer values ``bindings``."""
        return Region(
            self.params, self.results, bindings, captures=self.captures, effects=self.effects,
            terminator=self.terminator,
        )


@dataclass(frozen=True)
class ModuleContext:
    """What surrounds ``main`` in the module a graph was imported from, kept so that the graph
    prints, saves and compiles as that module did.

    Attributes
    ----------
    attributes: the module's attributes as ``(name, MLIR text)`` pairs (``mhlo.num_partitions``...).
    body: the module's other top-level ops (functions ``main`` calls, Shardy meshes), as MLIR text.
    result_attributes: one dict of attributes (MLIR text values) per result of ``main``, or None.
    """

    attributes: tuple[tuple[str, str], ...] = ()
    body: tuple[str, ...] = ()
    result_attributes: tuple[dict[str, Any], ...] | None = None


@dataclass(frozen=True)
class Graph:
    """A computation's typed graph: what every tool of xlasdk reads of a program.

    Attributes
    ----------
    name: the computation's name.
    parameters: the Parameter nodes, in parameter-number order.
    root: the result node (a tuple node for several results).
    side_effects: nodes kept although the root does not use them (ops with side effects).
    context: for a graph imported from a module (``xs.load_computation``, ``with_outputs``,
        ``extract``, ``XlaBuilder.from_computation``): the rest of that module; None for a graph
        built with an :class:`XlaBuilder`.
    """

    name: str
    parameters: tuple[XlaOp, ...]
    root: XlaOp
    side_effects: tuple[XlaOp, ...] = ()
    context: ModuleContext | None = None

    @property
    def builder(self) -> XlaBuilder:
        """The builder that owns the root node."""
        return self.root.builder

    def region(self) -> Region:
        """The graph as a region body (the sub-computation of a reducer, comparator or loop)."""
        return Region(self.parameters, [self.root])


class Computation(abc.ABC):
    """A program: what ops accept as a sub-computation and tools read as a graph.

    :class:`xlasdk.XlaComputation` is the one implementation; ops and the builder depend on this
    interface, so that the layers below the computation never import it.
    """

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """The computation's name."""

    @property
    @abc.abstractmethod
    def source_format(self) -> str | None:
        """The format the program was loaded from, or None when built with an XlaBuilder."""

    @abc.abstractmethod
    def graph(self) -> Graph:
        """The program's typed graph (imported from its module on first need when loaded)."""

    @abc.abstractmethod
    def program_shape(self) -> ProgramShape:
        """Parameter shapes and result shape."""

    @abc.abstractmethod
    def to_builder(self) -> XlaBuilder:
        """A builder holding a copy of this program's graph, to rewrite (see
        :meth:`XlaBuilder.from_computation`)."""
