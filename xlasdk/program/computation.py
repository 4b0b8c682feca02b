"""``XlaComputation``: a built (or loaded) program, printable as HLO and StableHLO.

The canonical form is a StableHLO module (MLIR). HLO text, the HLO module proto and the dot
graph are produced from it on demand (and cached) by XLA's own converter.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .._hlo_emit import parsable_module_name
from .._jaxlib import mlir as _mlir
from ..builder import Computation, Graph
from ..errors import CompileError, XlaSdkError
from ..shape import ProgramShape
from .origin import Edited, Origin, direct_hlo_text

if TYPE_CHECKING:
    from ..builder import XlaBuilder, XlaOp
    from .graph_import import HloNames, Instruction, InstructionGraph, Partitioning

__all__ = ["XlaComputation", "CompileRequest", "compile_request", "from_optimized_dump"]


_T = TypeVar("_T")

class XlaComputation(Computation):
    """A computation: parameters, a result and the ops between them.

    Made by :meth:`XlaBuilder.build <xlasdk.XlaBuilder.build>` or loaded from a file.
    Compile it with :func:`xlasdk.compile`; print it with :meth:`as_hlo_text` or
    :meth:`as_stablehlo_text`.

    Built or loaded, it is one model: a typed graph (:meth:`graph`) and its verified StableHLO
    module (:meth:`compiler_ir`), each made from the other on first need. A built computation
    starts from its graph (the module is emitted when first printed or compiled); a loaded one
    starts from its verified module (the graph is imported when first walked). What differs is
    only where it came from, its :attr:`origin` (:mod:`xlasdk.program.origin`): a program not
    checked op by op by xlasdk's shape rules is converted and compiled in the worker process first.
    """

    _name: str
    _program_shape: ProgramShape
    _origin: Origin  # where the program came from: its module, HLO, graph and index are made by it
    _graph_cache: Graph | None  # the typed graph (:meth:`graph`), on first need
    _instruction_graph: InstructionGraph | None  # the instruction index (:meth:`instruction_graph`), on first need

    def __init__(self, name: str, program_shape: ProgramShape, origin: Origin) -> None:
        """The computation ``name`` of ``program_shape`` made of ``origin``
        (:mod:`xlasdk.program.origin`: :class:`~xlasdk.program.origin.Built`,
        :class:`~xlasdk.program.origin.Loaded`, ...). Users get computations from
        :meth:`XlaBuilder.build <xlasdk.XlaBuilder.build>`, :func:`xlasdk.load_computation` and
        :meth:`from_hlo_text` / :meth:`from_stablehlo` / :meth:`from_hlo_proto`.

        Raises
        ------
        TypeError
            ``origin`` is not an :class:`~xlasdk.program.origin.Origin`.
        """
        if not isinstance(origin, Origin):
            raise TypeError(
                f"XlaComputation(name, program_shape, origin): expected an origin (xlasdk.program.origin), got "
                f"{type(origin).__name__}; computations are made by XlaBuilder.build() or loaded with "
                "xs.load_computation / XlaComputation.from_hlo_text / from_stablehlo / from_hlo_proto"
            )
        self._name = name
        self._program_shape = program_shape
        self._origin = origin
        self._graph_cache = None
        self._instruction_graph = None

    # -- loading (see xlasdk.formats) --------------------------------------------------------
    @classmethod
    def from_hlo_text(cls, text: str) -> XlaComputation:
        """A computation from HLO text (``HloModule name ... ENTRY ... { ... }``).

        The text is checked for inconsistencies that would crash XLA (a ``reshape`` changing
        the element count, a ``get-tuple-element`` out of range...), parsed by XLA's HLO parser,
        imported as StableHLO and verified. The program shape comes from the entry computation
        (tuple parameters and results are flattened); ``as_hlo_text()`` gives the HLO back.

        Raises
        ------
        FormatError
            For syntax errors or an inconsistent module, naming the line and the problem.
        """
        from ..formats.loaders import hlo_text_program  # not at import: the readers' checks add ~0.5 s

        return XlaComputation(*hlo_text_program(text, "from_hlo_text"))

    @classmethod
    def from_stablehlo(cls, text_or_bytes: str | bytes) -> XlaComputation:
        """A computation from StableHLO text, MLIR bytecode or a StableHLO portable artifact.

        The module must have a ``func.func @main``; it is verified on load. Artifacts written for
        an older StableHLO version are upgraded.

        Raises
        ------
        FormatError
            For syntax or verification errors, corrupt bytecode, or no ``main`` function.
        """
        from ..formats.loaders import stablehlo_program  # not at import: the readers' checks add ~0.5 s

        return XlaComputation(*stablehlo_program(text_or_bytes, "from_stablehlo"))

    @classmethod
    def from_hlo_proto(cls, data: bytes) -> XlaComputation:
        """A computation from a serialized ``xla.HloModuleProto``.

        The ``HloProto`` / ``HloSnapshot`` wrappers written by XLA's dump flags load too.

        Raises
        ------
        FormatError
            For empty, truncated, corrupt or non-proto data and inconsistent modules.
        """
        from ..formats.loaders import hlo_proto_program  # not at import: the readers' checks add ~0.5 s

        return XlaComputation(*hlo_proto_program(data, "from_hlo_proto"))

    # -- identity ----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The computation's name (the builder's name, or the loaded module's name)."""
        return self._name

    def program_shape(self) -> ProgramShape:
        """Parameter shapes and result shape (``parameter_shapes()``, ``result_shape()``)."""
        return self._program_shape

    def __repr__(self) -> str:
        return f"XlaComputation({self._name!r}, {self._program_shape})"

    @property
    def origin(self) -> Origin:
        """Where the program came from (:mod:`xlasdk.program.origin`): built, loaded, edited, or
        a built program rewritten for a static interface."""
        return self._origin

    def _built(self) -> Graph | None:
        """The graph when xlasdk built it op by op with its shape rules (trusted: printed directly,
        compiled in this process), else None."""
        return self._origin.built_graph()

    # -- StableHLO ---------------------------------------------------------------------------
    def _mlir_module_text(self) -> str:
        """StableHLO module text (generic syntax, with locations), accepted by PJRT compile."""
        return self._origin.module_text(self._name)

    def _callbacks(self) -> tuple[Any, ...]:
        """The Python host callbacks (``ops.HostCallback``) the module calls, in index order: what
        it must be compiled with. Empty for loaded computations."""
        return self._origin.host_callbacks(self._name)

    def _mlir_module(self) -> Any:
        return self._origin.module(self._name)

    def compiler_ir(self) -> Any:
        """The verified StableHLO module, a jaxlib ``mlir.ir.Module`` (as JAX's
        ``Lowered.compiler_ir("stablehlo")``): parsed from the loaded file, or emitted from the
        built graph on first need. Do not change it in place: it is what printing, saving and
        compiling read."""
        return self._mlir_module()

    def as_stablehlo_text(self, *, debug_info: bool = False) -> str:
        """The computation as StableHLO text (MLIR pretty syntax); locations when ``debug_info``.

        The text loads back with :meth:`from_stablehlo`: where StableHLO's pretty form would not
        parse back (a rank-0 ``dynamic_slice``), the module is printed in MLIR's generic syntax.
        """
        return _mlir.module_to_parsable_text(self._mlir_module(), debug_info=debug_info)

    def _cross_partition_ids(self) -> list[tuple[str, str, list[int]]]:
        """The partition ids named by cross-partition collectives of a built graph (found once;
        ``xs.compile`` checks them against ``num_partitions``). Empty for loaded computations."""
        return self._origin.cross_partition_ids()

    # -- HLO ---------------------------------------------------------------------------------
    def _xla_computation(self) -> Any:
        return self._origin.xla_computation(self._name)

    def as_hlo_text(self, print_metadata: bool = True, print_large_constants: bool = True) -> str:
        """HLO text of the (unoptimized) computation.

        Each instruction shows its ``metadata={...}`` when ``print_metadata`` is true (the
        default): for a built computation, every field of the ``xs.OpMetadata`` it was built under
        (``op_type``, ``op_name``, ``source_file``, ``source_line``, ``source_end_line``,
        ``source_column``, ``source_end_column``, ``deduplicated_name``, ``scheduling_name``; by
        default the caller's file and line), the same on both paths below; for a computation
        loaded from HLO, the metadata it was loaded with (``stack_frame_id`` and the stack frame
        tables of XLA's dumps included). With ``print_large_constants=False``, constants
        of more than 10 elements print as ``{...}`` (for reading only: ``from_hlo_text`` rejects
        such text, as XLA would fill the constants with garbage).

        For a built computation whose ops all map one to one onto HLO instructions (element-wise
        ops, compare/select/clamp, conversions, constants, shape ops, dynamic slices, dot,
        convolution, gather, scatter, reduce, reduce-window, sort, while, conditional, fft,
        cholesky, triangular-solve, rng-bit-generator, collectives, tuples, calls), the text is
        printed directly from the graph: the ops as built, in XLA's HLO syntax, about 3 us per
        op (``Tuple``, ``GetTupleElement`` and ``Call`` are resolved, as XLA's converter does:
        tuples appear only where an HLO instruction takes or returns one). Otherwise (CHLO ops
        such as ``Erf`` or ``Lgamma``, custom calls, shardings, side effects, fp8/int4
        constants) it is XLA's StableHLO -> HLO converter's output, which may fold constants
        and simplify. Both compute the same values, and both load back
        with :meth:`from_hlo_text`; ``tests/test_hlo_emit.py`` checks the direct text against
        XLA. A computation loaded from HLO prints the HLO it was loaded from.
        """
        text = self._origin.hlo_text(self._name, print_metadata, print_large_constants)
        return text if text is not None else self._converted_hlo_text(print_metadata, print_large_constants)

    def _direct_hlo_text(self, print_metadata: bool, print_large_constants: bool) -> str | None:
        """The built graph printed as HLO by :mod:`xlasdk._hlo_emit`, or None where it cannot."""
        g = self._built()
        assert g is not None
        return direct_hlo_text(self._name, g, print_metadata, print_large_constants)

    def _hlo_call(self, fn: Callable[..., _T], **kwargs: Any) -> _T:
        """``fn(xla_computation, **kwargs)``, XLA's errors (a module without a program shape) as
        :class:`CompileError`."""
        xla = self._xla_computation()
        try:
            return fn(xla, **kwargs)
        except Exception as e:  # jaxlib raises its own runtime error type
            raise CompileError(f"printing {self._name!r} as HLO failed: {e}") from e

    def _converted_hlo_text(self, print_metadata: bool = True, print_large_constants: bool = True) -> str:
        """HLO text from XLA's StableHLO -> HLO converter (or of the HLO a computation was loaded
        from): what ``as_hlo_text()`` gives where the direct printer does not apply."""
        return parsable_module_name(
            self._hlo_call(_mlir.hlo_text, metadata=print_metadata, large_constants=print_large_constants)
        )

    def as_serialized_hlo_module_proto(self) -> bytes:
        """The computation as a serialized ``xla.HloModuleProto``, made by XLA's StableHLO -> HLO
        converter (the program of :meth:`as_hlo_text`, possibly with constants folded).

        Each instruction's ``OpMetadata`` holds the same fields as :meth:`as_hlo_text` shows
        (those XLA's converter does not read from StableHLO locations, such as
        ``deduplicated_name`` and ``scheduling_name``, are written into the proto after
        conversion); a computation loaded from HLO gives back the module it was loaded from."""
        return self._hlo_call(_mlir.hlo_proto)

    def as_hlo_dot_graph(self) -> str:
        """Graphviz dot text of the HLO graph."""
        return self._hlo_call(_mlir.hlo_dot_graph)

    # -- files -------------------------------------------------------------------------------
    def save(
        self, path: str | os.PathLike[str], *, format: str | None = None, target_version: str | None = None
    ) -> None:
        """Write the computation to ``path``, in the format its suffix names.

        ``.hlo`` / ``.hlo.txt`` / ``.txt``: HLO text; ``.mlir``: StableHLO text (with source
        locations); ``.mlirbc``: StableHLO portable artifact (``target_version`` as in
        :meth:`serialize_portable_artifact`); ``.pb``: serialized ``HloModuleProto``. Load it
        back with :func:`xlasdk.load_computation`. The file appears atomically (written under a
        temporary name, then renamed).

        Op metadata: a built computation's ``xs.OpMetadata`` fields all come back from every
        format (in ``.mlir`` / ``.mlirbc`` they live in the op locations, see
        :meth:`xs.OpMetadata.to_mlir_location <xlasdk.OpMetadata.to_mlir_location>`). A
        computation loaded from HLO keeps all its metadata as ``.hlo`` and ``.pb``; as ``.mlir``
        / ``.mlirbc`` it keeps what XLA's HLO -> StableHLO importer carries: ``op_name`` (ops
        without one get their instruction name), ``source_file`` / ``source_line`` of ops with an
        ``op_name``, and the innermost stack frame of ops with a ``stack_frame_id`` (without its
        end column); ``op_type``, columns, end lines, ``deduplicated_name`` and
        ``scheduling_name`` are lost there.

        Parameters
        ----------
        path: the file to write.
        format: ``"hlo"``, ``"mlir"``, ``"mlirbc"`` or ``"pb"`` to override the suffix.
        target_version: StableHLO version of a ``.mlirbc`` artifact.

        Raises
        ------
        FormatError
            For an unknown suffix, a module the format cannot hold, or an unwritable path.
        """
        from ..formats.saving import save_computation  # the writers load on first use

        save_computation(self, path, format, target_version=target_version)

    def serialize_portable_artifact(self, target_version: str | None = None) -> bytes:
        """The computation as a StableHLO portable artifact (versioned MLIR bytecode).

        Parameters
        ----------
        target_version:
            ``"MAJOR.MINOR.PATCH"`` (e.g. ``"1.9.0"``), or ``"WEEK_4"``, ``"WEEK_12"``, ``"MAX"``
            (StableHLO's compatibility windows) or ``"current"``. Default: the oldest StableHLO
            version that holds every op of the computation, so the oldest consumers can read it.

        Returns
        -------
        bytes
            Starting with ``b"ML\\xefR"``; load with :meth:`from_stablehlo` or
            :func:`xlasdk.load_computation` (``.mlirbc``).

        Raises
        ------
        FormatError
            If ``target_version`` is not a version, is outside the versions this jaxlib writes,
            or is too old for an op used (the message gives the oldest version that works); or
            if the module holds non-StableHLO ops (``mhlo.fusion`` from an optimized XLA dump).
        """
        from ..formats.artifact import serialize_portable_artifact  # the writers load on first use

        return serialize_portable_artifact(self, target_version)

    @property
    def tpu_rewrite(self) -> tuple[int, str] | None:
        """For HLO loaded from XLA's TPU-optimized dump, run here as its CPU meaning: ``(instructions
        rewritten, the signs that marked it TPU-optimized)``; None for any other computation."""
        return self._origin.tpu_rewrite

    @property
    def source_format(self) -> str | None:
        """The format the computation was loaded from (``"hlo"``, ``"mlir"``, ``"mlirbc"``,
        ``"pb"``), or None for a built computation. A computation made by :meth:`with_outputs` or
        :meth:`extract` keeps its source's format (``"graph"`` when the source was built)."""
        return self._origin.source_format

    # -- the graph: walk and edit --------------------------------------------------------------
    def graph(self) -> Graph:
        """The typed graph: :class:`~xlasdk.Graph` (``parameters``, ``root``, ``side_effects`` as
        :class:`~xlasdk.XlaOp` nodes with their op-table rows and attributes, and for a loaded
        program the module ``context`` around ``main``). A built computation's graph is the one its
        builder made; a loaded one's is imported from its verified module on first call (loading,
        compiling and running do not pay for it).

        Raises
        ------
        GraphImportError
            The module has a construct the graph cannot hold (see :meth:`instructions`).
        """
        if self._graph_cache is None:
            self._graph_cache = self._origin.graph(self.instruction_graph)
        return self._graph_cache

    def instruction_graph(self) -> InstructionGraph:
        """The instruction index of ``main`` that :meth:`instructions`, :meth:`with_outputs` and the
        debugging tools read: every instruction in order with its name, the nodes of multi-result
        instructions, users, and the module around ``main``
        (:class:`~xlasdk.program.graph_import.InstructionGraph`), made once, on first call. A built
        computation's is the record its emitter makes of ``main`` as it writes the module
        (:func:`~xlasdk.program.origin.index_of_record`): the nodes of :meth:`graph` wherever the
        module writes them as they are; a loaded one's is read from the verified module through the
        MLIR bindings. A module loaded from HLO (text, proto,
        snapshot) names its instructions as the HLO does (``dot.3``): the names are read from a
        second import of the module, in the worker process (:func:`xlasdk.formats.hlo_names.hlo_names`,
        which the loader gives the computation)."""
        if self._instruction_graph is None:
            self._instruction_graph = self._origin.index(self._name)
        return self._instruction_graph

    def instructions(self) -> list[Instruction]:
        """Every instruction of the entry computation (``main``), parameters first, in
        topological order, as :class:`~xlasdk.Instruction` views: ``name``, ``opcode``
        (``stablehlo.add``), ``shape``, ``operands``, ``users``, ``attributes`` (Python values),
        ``metadata`` (``op_name``, source file and line from the op's location), ``op`` (the
        :class:`~xlasdk.XlaOp` node).

        A loaded module (HLO text or proto, StableHLO text or bytecode, XLA dumps before and
        after optimizations) and a built one are walked the same way: a loaded module is read
        through the MLIR bindings into the graph :class:`~xlasdk.XlaBuilder` makes, once, on the
        first call; a built program's instructions are its own nodes (``instructions()[-1].op is
        graph().root`` for a program of one result), listed as the module it emits has them (a
        multi-result op's ``get_tuple_element`` nodes are its :meth:`Instruction.result
        <xlasdk.Instruction.result>` parts, a result tuple's elements are the outputs). Where its
        module writes a node otherwise (a tuple carried into a loop, a branch or a call as its
        elements, a call in place, a tuple parameter unpacked, a host callback with its index, a
        dynamic parameter padded), the instruction is the op written, and the node finds it
        (``instruction_graph().instruction_of(node)``, :meth:`with_outputs`, :meth:`extract`). Ops of
        regions (loop bodies, reducers, branches) are reached through each instruction's
        ``op.regions``; a ``func.call`` (a fusion of an optimized dump, a JAX
        private function) is one instruction, and the function it calls is walked with
        :meth:`Instruction.called_function() <xlasdk.Instruction.called_function>`.

        Raises
        ------
        GraphImportError
            The module has a construct the graph cannot hold (a multi-block region, an
            unbounded dynamic dimension); the message names it.
        """
        return list(self.instruction_graph().instructions)

    def partitioning(self) -> Partitioning:
        """How the program says it is partitioned: ``num_partitions`` and ``num_replicas`` (the
        module's ``mhlo.num_partitions`` / ``mhlo.num_replicas``), Shardy meshes, and each
        parameter's and result's sharding (Shardy's ``sdy.sharding`` or GSPMD's ``mhlo.sharding``),
        as the module spells them; ``.is_partitioned`` says whether any of it asks for several
        devices. Compile such a program with ``xs.CompileOptions(num_partitions=N)`` on a client
        with N devices and run it with ``exe.execute_sharded(global_arrays)``.

        Read from the instruction graph (see :meth:`instructions`). HLO loaded from text keeps
        what XLA's HLO -> StableHLO import carries over, and the header's ``num_partitions=`` /
        ``replica_count=`` (which that import drops) as the module attributes JAX writes; an
        ``HloModuleProto`` does not hold them (they are in XLA's module config), so a proto
        says only what its shardings say.
        """
        from .graph_import import partitioning

        return partitioning(self.instruction_graph())

    def instruction(self, name: str | int) -> Instruction:
        """The instruction named ``name`` (as :meth:`instructions` names them: a parameter's
        name, or ``<opcode>.<index>`` such as ``add.7``), or at position ``name`` when an int.

        Raises
        ------
        XlaSdkError
            No such instruction (the message lists instructions of the same opcode; for a module
            loaded from HLO, a name of a region's instruction, in a while body or a reducer, says
            which instruction of ``main`` holds it and how to walk it).
        """
        from .graph_edit import _resolve, region_hint  # loaded when a program is first edited

        graph = self.instruction_graph()
        try:
            (op,) = _resolve(graph, [name], "instruction", outputs=False)
        except XlaSdkError:
            if isinstance(name, str) and self.source_format in ("hlo", "pb"):
                hint = region_hint(self.as_hlo_text(print_large_constants=False), name)
                if hint is not None:
                    raise XlaSdkError(f"instruction: no instruction named {name!r} in main: {hint}") from None
            raise
        return graph.instruction_of(op)

    def with_outputs(
        self, instructions: Iterable[Instruction | XlaOp | str | int] | Instruction | XlaOp | str | int
    ) -> XlaComputation:
        """This program with the given instructions' values as its results, in order: an
        intermediate value exposed. The parameters stay the same (call it with the same
        arguments); every op keeps its attributes, location and shardings, side effects stay,
        and the module's other functions and attributes come along. Arguments donated to a result
        of the original (``tf.aliasing_output``, ``jax.buffer_donor``) are no longer donated.

        ``instructions``: :class:`~xlasdk.Instruction` objects, their names or indices, or result
        nodes of multi-result instructions (``instr.result(k)``).

        Returns a computation that prints, saves, compiles and runs like a loaded one (it is
        converted and compiled in the worker process first).

        Raises
        ------
        XlaSdkError
            An unknown name, an instruction of another computation, or a multi-result
            instruction given whole.
        """
        from .graph_edit import with_outputs

        return with_outputs(self, self.instruction_graph(), instructions)

    def extract(
        self, instructions: Iterable[Instruction | XlaOp | str | int] | Instruction | XlaOp | str | int
    ) -> XlaComputation:
        """The smallest computation that computes the given instructions from their inputs: each
        value they read from outside the set becomes a parameter (in instruction order, named
        after the instruction it came from), and the instructions of the set that no other
        instruction of the set reads are its results (XLA's ``isolate`` / ``extract`` tools; all
        the results of a multi-result instruction). A single instruction gives a one-op
        computation that runs it on given operands; a parameter chosen stays a parameter.

        Raises
        ------
        XlaSdkError
            As :meth:`with_outputs`.
        """
        from .graph_edit import extract

        return extract(self, self.instruction_graph(), instructions)

    def to_builder(self) -> XlaBuilder:
        """A builder holding a copy of this program's graph, to rewrite: see
        :meth:`XlaBuilder.from_computation <xlasdk.XlaBuilder.from_computation>`."""
        from .graph_edit import builder_from

        return builder_from(self)

    def edited(self, graph: Graph, names: HloNames | None = None) -> XlaComputation:
        """A computation of nodes of this program's imported graph (:mod:`xlasdk.program.graph_edit`,
        a region of a bisection): emitted with the module's context (``graph.context``) around
        ``main``, and, like a loaded computation, converted and compiled in the worker process first
        (:class:`~xlasdk.program.origin.Edited`). It keeps this program's format (``"graph"`` when
        built) and class, and, edited from XLA's optimized dump, is one too
        (:func:`from_optimized_dump`). ``names``: its instructions' names, in the order the emitter
        writes them (this program's), paired with its instruction graph as a loaded HLO module's are."""
        params = graph.parameters
        pshape = ProgramShape([p.shape for p in params], graph.root.shape,
                              [p.extra[1] or f"p{i}" for i, p in enumerate(params)])
        origin = Edited(graph, self.source_format or "graph", optimized_dump=self._origin.optimized_dump(), names=names)
        c = object.__new__(type(self))  # (a subclass, xla_client's, has a constructor of its own)
        XlaComputation.__init__(c, graph.name, pshape, origin)
        return c

    def get_hlo_module(self) -> Any:
        """jaxlib's ``HloModule`` (for the ``xla_client`` compatibility surface)."""
        return self._xla_computation().get_hlo_module()


@dataclass(frozen=True)
class CompileRequest:
    """What :func:`xlasdk.compile` hands PJRT for one computation (:func:`compile_request`).

    Attributes
    ----------
    name: the computation's name.
    program_shape: its parameter and result shapes (bounded dynamic dimensions included).
    module_text: the StableHLO module in MLIR's generic syntax, with locations.
    module: ``() -> ir.Module``, the parsed module (what compiling with host callbacks needs).
    host_callbacks: the Python callables of its ``ops.HostCallback`` ops, by index (built only).
    cross_partition_ids: ``() -> [(op, attribute, ids)]``: the partition ids named by its
        cross-partition collectives (built graphs; empty when loaded), checked against
        ``num_partitions`` before XLA sees them.
    from_file: not built op by op with xlasdk's shape rules (loaded, or edited from a loaded
        program): XLA's compiler runs in the worker process first.
    heap_bytes: bytes of every array of a built graph (0 when loaded).
    static_interface: the dynamic parameters are already padded arguments plus sizes and the
        results are compiled as they are (made by :mod:`xlasdk.runtime.dynamic`).
    """

    name: str
    program_shape: ProgramShape
    module_text: str
    module: Callable[[], Any]
    host_callbacks: tuple[Any, ...]
    cross_partition_ids: Callable[[], list[tuple[str, str, list[int]]]]
    from_file: bool
    heap_bytes: int
    static_interface: bool
    optimized_dump: bool = False


def compile_request(computation: XlaComputation) -> CompileRequest:
    """The :class:`CompileRequest` of ``computation`` (its module emitted on first need)."""
    c, origin = computation, computation.origin
    return CompileRequest(
        c._name, c._program_shape, c._mlir_module_text(), c._mlir_module, c._callbacks(), c._cross_partition_ids,
        origin.source_format is not None, origin.heap_bytes, origin.static_interface, origin.optimized_dump(),
    )


def from_optimized_dump(computation: XlaComputation) -> bool:
    """Whether ``computation`` is XLA's optimized dump of a program (an HLO module XLA had already
    scheduled), loaded or edited from one: compiling it again must not let XLA drop the precision
    conversions its first compile placed (see :func:`xlasdk.compile`)."""
    return computation.origin.optimized_dump()
