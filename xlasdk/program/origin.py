"""Where a program came from: the origin an :class:`~xlasdk.XlaComputation` is made of.

A computation is ``XlaComputation(name, program_shape, origin)``; everything that differs with
where the program came from is its origin's (:class:`Origin`), so that the computation itself
only names the program and caches what it reads from it:

==========================  ==============================================================
:class:`Built`              a graph built op by op by an XlaBuilder (trusted: its module is
                            emitted, printed as HLO directly and compiled in this process)
:class:`StaticRewrite`      a built graph with bounded dynamic shapes rewritten for a runtime of
                            static arrays (:func:`xlasdk.program.static_interface.static_interface`)
:class:`Edited`             nodes of a program's imported graph (``with_outputs``, ``extract``, a
                            region of a bisection): emitted with the module's context and,
                            like a loaded program, converted and compiled in the worker first
:class:`Loaded`             a verified StableHLO module (text, bytecode, portable artifact)
:class:`LoadedHlo`          an HLO module (text, proto, snapshot) verified in the worker, held
                            as its proto and its StableHLO bytecode; also XLA's TPU-optimized
                            HLO, run as its CPU meaning (:attr:`LoadedHlo.tpu_rewrite`)
==========================  ==============================================================

Each origin makes its forms of the program once, on first need (module text, the verified MLIR
module, XLA's ``XlaComputation``, the instruction index), so a computation never asks which of
them it holds. A built graph's instruction index is the record its emitter makes of ``main`` as
it writes the module (:func:`index_of_record`); :func:`~.graph_import.import_graph` indexes the
modules xlasdk did not write (loaded and edited programs).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import _metadata
from .._emit import EmittedModule, MainRecord, emit_module
from .._graph import Graph, ModuleContext
from .._hlo_emit import Unsupported, print_hlo_module
from .._jaxlib import mlir as _mlir
from .._mlir_attrs import render
from .._optable import OpDef
from ..builder import XlaOp
from ..errors import CompileError, XlaSdkError
from ..ops.collectives import cross_partition_ids
from ..ops.shaping import SET_DIMENSION_SIZE

if TYPE_CHECKING:
    from .graph_import import HloNames, InstructionGraph

__all__ = ["Origin", "Built", "StaticRewrite", "Edited", "Loaded", "LoadedHlo", "direct_hlo_text", "index_of_record"]

#: ``HloModuleProto.schedule``: XLA writes it into the modules its pipeline scheduled, its
#: ``*after_optimizations*`` dumps (``is_scheduled=true`` in their text)
_SCHEDULE_FIELD = 7

#: ``(name, value)`` of each module attribute a loaded HLO module gets from its header
ModuleAttributes = tuple[tuple[str, int], ...]


class Origin(abc.ABC):
    """What a computation reads from where its program came from.

    Methods take the computation's ``name`` (the module's, for messages and the emitted module's
    name). Forms are made once, on first need, and kept.
    """

    #: the format the program was loaded from (``"hlo"``, ``"mlir"``, ``"mlirbc"``, ``"pb"``),
    #: ``"graph"`` for an edit of a built program, None when built (:attr:`XlaComputation.source_format`)
    source_format: str | None = None
    #: bytes of every array of a built graph (0 when loaded)
    heap_bytes: int = 0
    #: the dynamic parameters are padded arguments plus sizes and the results are compiled as they are
    static_interface: bool = False
    #: ``(instructions rewritten, signs)`` of TPU-optimized HLO run as its CPU meaning, else None
    tpu_rewrite: tuple[int, str] | None = None

    @abc.abstractmethod
    def module_text(self, name: str) -> str:
        """The StableHLO module text (generic syntax, with locations), accepted by PJRT compile."""

    _module: Any = None  # the verified module, once parsed
    _xla: Any = None  # XLA's HLO, once converted

    def module(self, name: str) -> Any:
        """The verified StableHLO module (``ir.Module``)."""
        if self._module is None:
            self._module = _parsed(self.module_text(name), name)
        return self._module

    def host_callbacks(self, name: str) -> tuple[Any, ...]:
        """The Python callables of the module's ``ops.HostCallback`` ops, by index (built graphs only)."""
        return ()

    def xla_computation(self, name: str) -> Any:
        """jaxlib's ``XlaComputation`` of the program (XLA's HLO).

        Raises
        ------
        CompileError
            XLA's StableHLO -> HLO converter failed.
        """
        if self._xla is None:
            self.module(name)  # verify first: a clear error instead of a converter message
            self._xla = _converting(name, lambda: self._converted(name))
        return self._xla

    @abc.abstractmethod
    def _converted(self, name: str) -> Any:
        """XLA's StableHLO -> HLO conversion of the module."""

    @abc.abstractmethod
    def graph(self, index: Callable[[], InstructionGraph]) -> Graph:
        """The typed graph (``index``: the computation's instruction index, for an imported graph)."""

    @abc.abstractmethod
    def index(self, name: str) -> InstructionGraph:
        """The instruction index of ``main`` (made anew: the computation keeps it)."""

    def hlo_text(self, name: str, metadata: bool, large_constants: bool) -> str | None:
        """The program printed as HLO directly from its graph, or None where XLA's converter prints it."""
        return None

    def cross_partition_ids(self) -> list[tuple[str, str, list[int]]]:
        """The partition ids named by cross-partition collectives of a built graph (empty when not
        built: the module compiles in the worker, where XLA:CPU's abort on a bad id cannot reach us)."""
        return []

    def built_graph(self) -> Graph | None:
        """The graph when xlasdk built it op by op with its shape rules (trusted: printed directly,
        compiled in this process), else None."""
        return None

    def optimized_dump(self) -> bool:
        """Whether the program is XLA's optimized dump (an HLO module XLA had already scheduled),
        or edited from one."""
        return False


def _parsed(text: str, name: str) -> Any:
    """``text`` parsed and verified: an internal error if xlasdk wrote an invalid module."""
    try:
        return _mlir.parse_module(text)
    except _mlir.MlirError as e:  # an xlasdk bug: shape rules should have caught it
        raise XlaSdkError(f"internal error: xlasdk produced an invalid StableHLO module for {name!r}: {e}") from e


def _in_worker_converted(text: str, name: str) -> Any:
    """XLA's StableHLO -> HLO conversion of a module xlasdk did not build: XLA's converter may
    abort, so the worker goes first."""
    from ._worker import converted_hlo_proto  # the worker's services load only when a program needs them

    return _mlir.xla_computation_from_proto(converted_hlo_proto(text, name))


def _converting(name: str, convert: Callable[[], Any]) -> Any:
    """``convert()``, XLA's errors as :class:`CompileError`."""
    try:
        return convert()
    except Exception as e:  # jaxlib raises its own runtime error type
        raise CompileError(f"converting {name!r} to HLO failed: {e}") from e


def direct_hlo_text(name: str, graph: Graph, metadata: bool, large_constants: bool) -> str | None:
    """A built ``graph`` printed as HLO by :mod:`xlasdk._hlo_emit`, or None where it cannot."""
    try:
        return print_hlo_module(
            name, list(graph.parameters), graph.root, graph.side_effects,
            metadata=metadata, large_constants=large_constants,
        )
    except Unsupported:
        return None


class _FromGraph(Origin):
    """An origin whose module is emitted from a graph (built, rewritten or edited)."""

    #: how dynamic parameters are written (padded arguments joined by ``set_dimension_size``), or None
    _padded: OpDef | None = None
    #: whether the emitter records ``main`` as it writes it (the index of a built graph)
    _records_main = False

    def __init__(self, graph: Graph) -> None:
        self._graph = graph
        self._emission: EmittedModule | None = None

    @property
    def emitted(self) -> bool:
        """Whether the module has been emitted (on first need: printing, compiling, indexing a
        built graph)."""
        return self._emission is not None

    def emission(self, name: str) -> EmittedModule:
        """The module emitted from the graph (once), with ``main``'s record where it is the index."""
        if self._emission is None:
            g = self._graph
            ctx = g.context or ModuleContext()
            self._emission = emit_module(
                name, list(g.parameters), g.root, side_effects=g.side_effects,
                module_attrs=", ".join(f"{k} = {v}" for k, v in ctx.attributes),
                module_body=ctx.body, result_attrs=ctx.result_attributes,
                padded_dynamic_params=self._padded, record=self._records_main,
            )
        return self._emission

    def module_text(self, name: str) -> str:
        return self.emission(name).text

    def host_callbacks(self, name: str) -> tuple[Any, ...]:
        return self.emission(name).host_callbacks

    def graph(self, index: Callable[[], InstructionGraph]) -> Graph:
        return self._graph


class Built(_FromGraph):
    """A graph built op by op by an XlaBuilder, its shape rules checking every op: printed as HLO
    directly, converted and compiled in this process, indexed by the record its emitter makes of
    ``main`` (its own nodes wherever the module writes them as they are).

    Parameters
    ----------
    graph: the builder's graph (no module context).
    heap_bytes: bytes of every array of the graph (the builder counts them).
    """

    _records_main = True

    def __init__(self, graph: Graph, heap_bytes: int = 0) -> None:
        super().__init__(graph)
        self.heap_bytes = heap_bytes
        self._hlo_texts: dict[tuple[bool, bool], str | None] = {}
        self._cross_partition: list[tuple[str, str, list[int]]] | None = None

    def built_graph(self) -> Graph | None:
        return self._graph

    def hlo_text(self, name: str, metadata: bool, large_constants: bool) -> str | None:
        key = (metadata, large_constants)
        if key not in self._hlo_texts:
            self._hlo_texts[key] = direct_hlo_text(name, self._graph, metadata, large_constants)
        return self._hlo_texts[key]

    def cross_partition_ids(self) -> list[tuple[str, str, list[int]]]:
        if self._cross_partition is None:
            g = self._graph
            self._cross_partition = cross_partition_ids([g.root, *g.side_effects])
        return self._cross_partition

    def _converted(self, name: str) -> Any:
        """XLA's StableHLO -> HLO conversion of the module, with every op's metadata.

        The converter reads ``op_type``, ``op_name`` and the ``source_*`` fields from locations;
        the fields it drops (``deduplicated_name``, ``scheduling_name``, names with an ``@``, the
        end of a range lost in a portable artifact) sit in a dictionary on the location
        (:mod:`xlasdk._metadata`). Where there is one, the module is converted with a marker in
        each such location and the fields are written into the converted HLO module proto.
        """
        g = self._graph
        table: list[dict[str, Any]] = []
        marked = emit_module(
            name, list(g.parameters), g.root, side_effects=g.side_effects, metadata_table=table,
            padded_dynamic_params=self._padded,
        ).text
        if not table:
            return _mlir.parsed_module_to_hlo(self.module(name))
        return _mlir.xla_computation_from_proto(_mlir.hlo_proto_with_metadata(marked, table))

    def index(self, name: str) -> InstructionGraph:
        """The record the emitter made of ``main`` as it wrote the module (:func:`index_of_record`)."""
        main = self.emission(name).main
        if main is None:  # pragma: no cover - a built graph's emission records main
            raise XlaSdkError(f"internal error: computation {name!r} was emitted without its record")
        return index_of_record(name, main)


class StaticRewrite(Built):
    """A built graph with bounded dynamic shapes as XLA:CPU can run it: each dynamic parameter a
    static argument of its bounds plus an ``s32[]`` size per dynamic dimension (``padded_params``),
    joined by ``set_dimension_size`` in the program; results compiled as they are (padded;
    :mod:`xlasdk.runtime.dynamic` cuts them). Printed as HLO by XLA's converter."""

    static_interface = True

    def __init__(self, graph: Graph, heap_bytes: int, *, padded_params: bool) -> None:
        super().__init__(graph, heap_bytes)
        self._padded = SET_DIMENSION_SIZE if padded_params else None

    def hlo_text(self, name: str, metadata: bool, large_constants: bool) -> str | None:
        return None


class Edited(_FromGraph):
    """Nodes of a program's imported graph (:mod:`xlasdk.program.graph_edit`): emitted with the
    module's context (``graph.context``) around ``main`` and, like a loaded program, converted and
    compiled in the worker process first.

    Parameters
    ----------
    graph: the edited graph.
    source_format: the format of the program it was edited from (``"graph"`` when that was built).
    optimized_dump: edited from XLA's optimized dump (its precision is kept when compiled).
    names: its instructions' names, in the order the emitter writes them (the source's), paired
        with its instruction graph as a loaded HLO module's are.
    """

    def __init__(
        self, graph: Graph, source_format: str, *, optimized_dump: bool = False, names: HloNames | None = None
    ) -> None:
        super().__init__(graph)
        self.source_format = source_format
        self._optimized = optimized_dump
        self._names = names

    def optimized_dump(self) -> bool:
        return self._optimized

    def _converted(self, name: str) -> Any:
        return _in_worker_converted(self.module_text(name), name)

    def index(self, name: str) -> InstructionGraph:
        from .graph_import import import_graph  # loaded when a program is first walked

        return import_graph(self.module(name), name, hlo_names=self._names)


class Loaded(Origin):
    """A verified StableHLO module loaded by :mod:`xlasdk.formats` (text, bytecode, portable artifact).

    Parameters
    ----------
    source_format: the format it was loaded from (None: hand-written text compiled as a built
        program would be).
    text: its StableHLO text with locations, generic syntax (op metadata lives there).
    module: the parsed ``ir.Module`` (None: parsed from ``text`` on first need).
    """

    def __init__(self, source_format: str | None, text: str, module: Any = None) -> None:
        self.source_format = source_format
        self._text = text
        self._module = module

    def module_text(self, name: str) -> str:
        return self._text

    def _converted(self, name: str) -> Any:
        return _in_worker_converted(self.module_text(name), name)

    def graph(self, index: Callable[[], InstructionGraph]) -> Graph:
        """Imported from the module on first need (loading, compiling and running do not pay for it)."""
        return index().as_graph()

    def index(self, name: str) -> InstructionGraph:
        from .graph_import import import_graph  # loaded when a program is first walked

        return import_graph(self.module(name), name, hlo_names=self._hlo_names())

    def _hlo_names(self) -> HloNames | None:
        """The instructions' names as the file spelled them (HLO only)."""
        return None


class LoadedHlo(Loaded):
    """An HLO module (text, proto, snapshot) loaded by :mod:`xlasdk.formats`: the worker parsed,
    verified and imported it, and handed back its verified ``HloModuleProto`` and StableHLO
    bytecode; the module is parsed from the bytecode, its text printed and its proto read by XLA
    (the worker first) on first need, so loading a large module costs only what the worker spent.

    Parameters
    ----------
    source_format: ``"hlo"`` or ``"pb"``.
    proto: the verified ``HloModuleProto`` (``as_hlo_text`` gives back the HLO that was loaded).
    bytecode: the module's verified StableHLO bytecode and the attributes its HLO header gave it.
    read_names: the HLO instruction names of a proto (:func:`xlasdk.formats.hlo_names.hlo_names`).
    tpu_rewrite: for XLA's TPU-optimized HLO, run here as its CPU meaning: ``(instructions
        rewritten, signs)``; None for any other module. (A rewrite is a loaded HLO module in every
        step; only what the tools report of it differs, so it is data of this origin, not one of its own.)
    """

    def __init__(
        self, source_format: str, proto: bytes, bytecode: tuple[bytes, ModuleAttributes], *,
        read_names: Callable[[bytes], HloNames | None], tpu_rewrite: tuple[int, str] | None = None,
    ) -> None:
        self.source_format = source_format
        self._proto = proto
        self._bytecode = bytecode
        self._read_names = read_names
        self.tpu_rewrite = tpu_rewrite
        self._text_cache: str | None = None
        self._module = None
        self._xla = None
        self._optimized: bool | None = None

    def module_text(self, name: str) -> str:
        if self._text_cache is None:  # printed by the worker
            from ._worker import module_text  # the worker's services load only when a program needs them

            self._text_cache = module_text(*self._bytecode, name)
        return self._text_cache

    def module(self, name: str) -> Any:
        if self._module is None:  # (3x faster to parse than the text)
            from ._worker import loaded_module

            self._module = loaded_module(*self._bytecode)  # the bytes the worker parsed and verified
        return self._module

    def xla_computation(self, name: str) -> Any:
        if self._xla is None:  # the verified proto
            from ._worker import check_hlo_proto

            check_hlo_proto(self._proto, name)  # XLA's proto reader: in the worker first
            self._xla = _mlir.xla_computation_from_proto(self._proto)
        return self._xla

    def _hlo_names(self) -> HloNames | None:
        return self._read_names(self._proto)

    def optimized_dump(self) -> bool:
        if self._optimized is None:
            self._optimized = any(n == _SCHEDULE_FIELD for n, *_ in _metadata._fields(self._proto))
        return self._optimized


# -- a built graph's instruction index: the emitter's record of main (Built.index) -------------------
def index_of_record(name: str, main: MainRecord) -> InstructionGraph:
    """The :class:`~.graph_import.InstructionGraph` of a built program: the record its emitter made
    of ``main`` as it wrote the module (:class:`xlasdk._emit.MainRecord`), listed with the
    conventions the importer gives a loaded module (:mod:`.graph_import`), so that every tool reads
    a built and a loaded program the same way:

    * the arguments first, then every op of ``main`` in the order written (the order a loaded copy
      of the module has); the nodes are the builder's own wherever the module writes a node as it
      is (``comp.instructions()[-1].op is comp.graph().root`` for a program of one result), and
      nodes of their own where it does not (a tuple carried into a loop or a branch written as its
      elements, a ``call`` written in place, a tuple-shaped parameter unpacked, a host callback
      written with its index, a dynamic parameter written as a padded argument and its sizes);
    * a node of several results (``while``, a variadic ``reduce``, ``sort``...) is one
      instruction, and the ``get_tuple_element`` nodes that read its results are its parts
      (:attr:`InstructionGraph.parts`), not instructions of their own;
    * a result tuple (the root of a program of several results) is not an instruction: its
      elements are the program's outputs, as ``main`` returns them;
    * the builder's nodes the module does not write as they are find the instruction of the
      value they were written as (:meth:`InstructionGraph.node_of`, from the record's ``built``).
    """
    from .attr_kinds import MlirAttr  # loaded when a program is first walked
    from .graph_import import _PURE, Instruction, InstructionGraph, InstructionList, _names

    params = main.params
    effects = tuple(o for o in main.unused if o.opdef.name not in _PURE)
    result_attrs = tuple({k: v if isinstance(v, MlirAttr) else MlirAttr(render(v)) for k, v in a.items()}
                         for a in main.result_attrs)
    own, _, _ = _names(params, main.ops, None)
    names: dict[XlaOp, Instruction] = {}
    instrs = [Instruction(n, op, i, None) for i, (n, op) in enumerate(own)]  # type: ignore[arg-type]
    index = InstructionGraph(name, params, main.outputs, effects, InstructionList(instrs), names, (), (),
                             result_attrs, main.parts, built=main.built)
    for ins in instrs:
        ins._graph = index
        names[ins.op] = ins
    return index
