"""``XlaComputation``: a built (or loaded) program, printable as HLO and StableHLO.

The canonical form is a StableHLO module (MLIR). HLO text, the HLO module proto and the dot
graph are produced from it on demand (and cached) by XLA's own converter.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .. import _metadata
from .._emit import emit_module
from .._hlo_emit import Unsupported, parsable_module_name, print_hlo_module
from .._jaxlib import mlir as _mlir
from ..builder import Computation, Graph, ModuleContext
from ..errors import CompileError, XlaSdkError
from ..ops.collectives import cross_partition_ids
from ..ops.shaping import SET_DIMENSION_SIZE
from ..shape import ProgramShape

if TYPE_CHECKING:
    from ..builder import XlaBuilder, XlaOp
    from .graph_import import HloNames, Instruction, InstructionGraph, Partitioning

__all__ = ["XlaComputation", "CompileRequest", "compile_request"]


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
    only where it came from (:attr:`source_format`): a program not checked op by op by xlasdk's
    shape rules is converted and compiled in the worker process first.
    """

    _name: str
    _program_shape: ProgramShape
    _graph_cache: Graph | None  # the typed graph: given when built, imported on first need when loaded
    _text: str | None
    _module: Any
    _xla: Any
    _source_format: str | None
    _proto: bytes | None  # a loaded HLO module's verified HloModuleProto, read on first need
    # a loaded HLO module's verified StableHLO bytecode and header attributes (formats.untrusted.load_hlo),
    # parsed or printed (in the worker) on first need
    _bytecode: tuple[bytes, tuple[tuple[str, int], ...]] | None
    _hlo_texts: dict[tuple[bool, bool], str | None]
    _cross_partition: list[tuple[str, str, list[int]]] | None
    _host_callbacks: tuple[Any, ...]  # callables of ops.HostCallback, by index (built graphs only)
    _heap_bytes: int  # bytes of every array of a built graph (0 when loaded)
    _instruction_graph: InstructionGraph | None  # the instruction index (program.graph_import), on first need
    _static_interface: bool  # made by static_interface(): compiled as it is (no dynamic-shape handling)
    _padded_params: bool  # dynamic parameters emitted as padded arguments + sizes (set_dimension_size)
    _names: HloNames | None  # an edited program's instruction names, carried from the one it was edited from
    _read_names: Callable[[bytes], HloNames | None] | None  # a loaded HLO module's names, from its proto (formats')
    _optimized: bool | None  # XLA's optimized dump, or edited from one (from_optimized_dump), on first need
    _tpu_meaning: tuple[int, str] | None  # loaded TPU-optimized HLO run as its CPU meaning: (rewritten, signs)
    _node_lines: dict[int, int] | None  # a built graph's nodes -> their ops' places in main (emit_module's)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "XlaComputation is made by XlaBuilder.build() or loaded with xs.load_computation / "
            "XlaComputation.from_hlo_text / from_stablehlo / from_hlo_proto"
        )

    @classmethod
    def _new(cls, name: str, program_shape: ProgramShape) -> XlaComputation:
        c = object.__new__(cls)
        c._name = name
        c._program_shape = program_shape
        c._graph_cache = None
        c._text = None
        c._module = None
        c._xla = None
        c._source_format = None
        c._proto = None
        c._bytecode = None
        c._hlo_texts = {}
        c._cross_partition = None
        c._host_callbacks = ()
        c._heap_bytes = 0
        c._instruction_graph = None
        c._static_interface = False
        c._padded_params = False
        c._names = c._read_names = c._optimized = c._tpu_meaning = c._node_lines = None
        return c

    @classmethod
    def _from_builder(cls, builder: XlaBuilder, root: XlaOp, program_shape: ProgramShape) -> XlaComputation:
        c = cls._new(builder.name, program_shape)
        c._graph_cache = Graph(builder.name, tuple(builder.parameters()), root, tuple(builder.side_effects()))
        c._heap_bytes = builder._nbytes
        return c

    @classmethod
    def _from_loaded(
        cls,
        name: str,
        program_shape: ProgramShape,
        module: Any,
        text: str | None,
        *,
        xla: Any = None,
        source_format: str | None = None,
        proto: bytes | None = None,
        bytecode: tuple[bytes, tuple[tuple[str, int], ...]] | None = None,
        tpu_meaning: tuple[int, str] | None = None,
        read_names: Callable[[bytes], HloNames | None] | None = None,
    ) -> XlaComputation:
        """A computation loaded and verified by :mod:`xlasdk.formats`.

        ``module`` is the parsed ``ir.Module``, ``text`` its StableHLO text with locations (op
        metadata lives there, see :meth:`_converted`); ``xla`` the jaxlib
        ``XlaComputation`` of the original HLO when it was loaded from HLO (so ``as_hlo_text``
        gives back the HLO that was loaded). ``module`` may be None (it is parsed from ``text``
        when first needed), and ``proto`` (a verified ``HloModuleProto``) may stand for ``xla``
        (read when first needed): loading a large module then costs only what the loader's
        worker process spent on it. ``text`` may be None when ``bytecode`` (the module's verified
        bytecode and the attributes its HLO header gave it) is given: the module is parsed from
        it, and its text printed by the worker, on first need. ``tpu_meaning``: :attr:`tpu_rewrite`;
        ``read_names``: the HLO instruction names of the module's proto. """
        assert text is not None or bytecode is not None
        c = cls._new(name, program_shape)
        c._text = text
        c._module = module
        c._xla = xla
        c._source_format = source_format
        c._proto = proto
        c._bytecode = bytecode
        c._tpu_meaning, c._read_names = tpu_meaning, read_names
        return c

    def _edited(self, graph: Graph, names: HloNames | None = None) -> XlaComputation:
        """A computation of nodes of this program's imported graph (:mod:`xlasdk.program.graph_edit`):
        emitted with the module's context (``graph.context``) around ``main``, and, like a loaded
        computation, converted and compiled in the worker process first. It keeps this program's
        format (``"graph"`` when built) and, edited from XLA's optimized dump, is one too
        (:func:`from_optimized_dump`). ``names``: its instructions' names, in the order the emitter
        writes them (this program's), paired with its instruction graph as a loaded HLO module's are."""
        params = graph.parameters
        pshape = ProgramShape([p.shape for p in params], graph.root.shape,
                              [p.extra[1] or f"p{i}" for i, p in enumerate(params)])
        c = self._new(graph.name, pshape)
        c._graph_cache = graph
        c._source_format = self._source_format or "graph"
        c._names = names
        c._optimized = from_optimized_dump(self)
        return c

    @classmethod
    def _with_static_interface(
        cls, graph: Graph, program_shape: ProgramShape, *, padded_params: bool
    ) -> XlaComputation:
        """The computation of ``graph`` (built, with bounded dynamic shapes) as XLA:CPU can run it:
        each dynamic parameter becomes a static argument of its bounds plus an ``s32[]`` size per
        dynamic dimension (``program_shape`` says so), joined by ``set_dimension_size`` in the
        program; results are compiled as they are (padded; :mod:`xlasdk.runtime.dynamic` cuts them)."""
        c = cls._new(graph.name, program_shape)
        c._graph_cache = graph
        c._static_interface = True
        c._padded_params = padded_params
        return c

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
        from ..formats import computation_from_hlo_text  # formats sit above (they make computations)

        return computation_from_hlo_text(text)

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
        from ..formats import computation_from_stablehlo  # formats sit above (they make computations)

        return computation_from_stablehlo(text_or_bytes)

    @classmethod
    def from_hlo_proto(cls, data: bytes) -> XlaComputation:
        """A computation from a serialized ``xla.HloModuleProto``.

        The ``HloProto`` / ``HloSnapshot`` wrappers written by XLA's dump flags load too.

        Raises
        ------
        FormatError
            For empty, truncated, corrupt or non-proto data and inconsistent modules.
        """
        from ..formats import computation_from_hlo_proto  # formats sit above (they make computations)

        return computation_from_hlo_proto(data)

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

    def _built(self) -> Graph | None:
        """The graph when xlasdk built it op by op with its shape rules (trusted: printed directly,
        compiled in this process), else None."""
        g = self._graph_cache
        return g if g is not None and g.context is None and self._source_format is None else None

    # -- StableHLO ---------------------------------------------------------------------------
    def _mlir_module_text(self) -> str:
        """StableHLO module text (generic syntax, with locations), accepted by PJRT compile."""
        if self._text is None and self._bytecode is not None:  # loaded from HLO: printed by the worker
            from ._worker import module_text  # the worker's services load only when a loaded program needs them

            self._text = module_text(*self._bytecode, self._name)
        if self._text is None:
            g = self._graph_cache
            assert g is not None  # a loaded computation has its text or its bytecode from the start
            callbacks: list[Any] = []
            ctx = g.context or ModuleContext()
            self._node_lines = {} if self._built() is not None else None
            self._text = emit_module(
                self._name, list(g.parameters), g.root, side_effects=g.side_effects,
                host_callbacks=callbacks, module_attrs=", ".join(f"{k} = {v}" for k, v in ctx.attributes),
                module_body=ctx.body, result_attrs=ctx.result_attributes,
                padded_dynamic_params=SET_DIMENSION_SIZE if self._padded_params else None,
                node_lines=self._node_lines,
            )
            self._host_callbacks = tuple(callbacks)
        return self._text

    def _callbacks(self) -> tuple[Any, ...]:
        """The Python host callbacks (``ops.HostCallback``) the module calls, in index order: what
        it must be compiled with. Empty for loaded computations."""
        if self._bytecode is None:  # (a module loaded from HLO has none: no need to print it)
            self._mlir_module_text()
        return self._host_callbacks

    def _mlir_module(self) -> Any:
        if self._module is None and self._bytecode is not None:  # (3x faster to parse than the text)
            from ._worker import loaded_module

            self._module = loaded_module(*self._bytecode)  # the bytes the worker parsed and verified
        if self._module is None:
            try:
                self._module = _mlir.parse_module(self._mlir_module_text())
            except _mlir.MlirError as e:  # an xlasdk bug: shape rules should have caught it
                raise XlaSdkError(
                    f"internal error: xlasdk produced an invalid StableHLO module for {self._name!r}: {e}"
                ) from e
        return self._module

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
        if self._cross_partition is None:
            # Loaded and imported graphs: their attributes are as the module spelled them; they compile in
            # the worker, where XLA:CPU's abort on a bad partition id cannot reach this process.
            g = self._built()
            self._cross_partition = cross_partition_ids([] if g is None else [g.root, *g.side_effects])
        return self._cross_partition

    # -- HLO ---------------------------------------------------------------------------------
    def _xla_computation(self) -> Any:
        if self._xla is None and self._proto is not None:  # loaded from HLO: the verified proto
            from ._worker import check_hlo_proto

            check_hlo_proto(self._proto, self._name)  # XLA's proto reader: in the worker first
            self._xla = _mlir.xla_computation_from_proto(self._proto)
            self._proto = None
        if self._xla is None:
            self._mlir_module()  # verify first: a clear error instead of a converter message
            try:
                self._xla = self._converted()
            except Exception as e:  # jaxlib raises its own runtime error type
                raise CompileError(f"converting {self._name!r} to HLO failed: {e}") from e
        return self._xla

    def _converted(self) -> Any:
        """XLA's StableHLO -> HLO conversion of the module, with every op's metadata.

        The converter reads ``op_type``, ``op_name`` and the ``source_*`` fields from locations;
        the fields it drops (``deduplicated_name``, ``scheduling_name``, names with an ``@``, the
        end of a range lost in a portable artifact) sit in a dictionary on the location
        (:mod:`xlasdk._metadata`). Where there is one, the module is converted with a marker in
        each such location and the fields are written into the converted HLO module proto.
        """
        if self._source_format is not None:  # loaded or imported: XLA's converter may abort; the worker goes first
            from ._worker import converted_hlo_proto

            return _mlir.xla_computation_from_proto(converted_hlo_proto(self._mlir_module_text(), self._name))
        g = self._graph_cache
        assert g is not None
        table: list[dict[str, Any]] = []
        marked = emit_module(
            self._name, list(g.parameters), g.root, side_effects=g.side_effects, metadata_table=table,
            padded_dynamic_params=SET_DIMENSION_SIZE if self._padded_params else None,
        )
        if not table:
            return _mlir.parsed_module_to_hlo(self._mlir_module())
        return _mlir.xla_computation_from_proto(_mlir.hlo_proto_with_metadata(marked, table))

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
        if self._built() is not None and not self._static_interface:
            key = (print_metadata, print_large_constants)
            if key not in self._hlo_texts:
                self._hlo_texts[key] = self._direct_hlo_text(print_metadata, print_large_constants)
            text = self._hlo_texts[key]
            if text is not None:
                return text
        return self._converted_hlo_text(print_metadata, print_large_constants)

    def _direct_hlo_text(self, print_metadata: bool, print_large_constants: bool) -> str | None:
        """The graph printed as HLO by :mod:`xlasdk._hlo_emit`, or None where it cannot."""
        g = self._built()
        assert g is not None
        try:
            return print_hlo_module(
                self._name, list(g.parameters), g.root, g.side_effects,
                metadata=print_metadata, large_constants=print_large_constants,
            )
        except Unsupported:
            return None

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
        from ..formats import save_computation  # formats sit above (they make computations)

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
        from ..formats import serialize_portable_artifact  # formats sit above (they make computations)

        return serialize_portable_artifact(self, target_version)

    @property
    def tpu_rewrite(self) -> tuple[int, str] | None:
        """For HLO loaded from XLA's TPU-optimized dump, run here as its CPU meaning: ``(instructions
        rewritten, the signs that marked it TPU-optimized)``; None for any other computation."""
        return self._tpu_meaning

    @property
    def source_format(self) -> str | None:
        """The format the computation was loaded from (``"hlo"``, ``"mlir"``, ``"mlirbc"``,
        ``"pb"``), or None for a built computation. A computation made by :meth:`with_outputs` or
        :meth:`extract` keeps its source's format (``"graph"`` when the source was built)."""
        return self._source_format

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
            self._graph_cache = self.instruction_graph().as_graph()
        return self._graph_cache

    def instruction_graph(self) -> InstructionGraph:
        """The instruction index of ``main`` that :meth:`instructions`, :meth:`with_outputs` and the
        debugging tools read: every instruction in order with its name, the nodes of multi-result
        instructions, users, and the module around ``main``
        (:class:`~xlasdk.program.graph_import.InstructionGraph`), made once, on first call. A built
        computation's is over the nodes its builder made, the nodes of :meth:`graph`
        (:func:`~xlasdk.program.built_index.index_built`), where those are the instructions of the
        module it emits; a loaded one's (and a built one's that holds tuples its module does not) is
        read from the verified module through the MLIR bindings. A module loaded from HLO (text, proto,
        snapshot) names its instructions as the HLO does (``dot.3``): the names are read from a
        second import of the module, in the worker process (:func:`xlasdk.formats.hlo_names.hlo_names`,
        which the loader gives the computation)."""
        built = self._built() if self._instruction_graph is None else None
        if built is not None:  # walked on its own nodes, where they are the module's instructions
            from .built_index import index_built

            self._instruction_graph = index_built(built)
        if self._instruction_graph is None:
            from .graph_import import import_graph  # loaded when a program is first walked

            names = self._names
            if self._read_names is not None and self._graph_cache is None:  # loaded from HLO, not edited
                proto = self._proto if self._proto is not None else (
                    None if self._xla is None else _mlir.hlo_proto(self._xla))
                if proto is not None:
                    names = self._read_names(proto)
            self._instruction_graph = import_graph(self._mlir_module(), self._name, hlo_names=names)
            if built is not None and self._node_lines is not None:  # the builder's nodes find their instructions
                self._instruction_graph.pair_built(built.parameters, self._node_lines)
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
        <xlasdk.Instruction.result>` parts, a result tuple's elements are the outputs). A built
        program holding a tuple its module does not (a tuple carried into a loop, a branch or a
        call, a tuple parameter), a host callback or a dynamic parameter is indexed from the module
        it emits instead; its own nodes still find their instructions (``instruction_graph().
        instruction_of(node)``, :meth:`with_outputs`, :meth:`extract`). Ops of
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
            if isinstance(name, str) and self._source_format in ("hlo", "pb"):
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
    c = computation
    text = c._mlir_module_text()
    return CompileRequest(
        c._name, c._program_shape, text, c._mlir_module, c._host_callbacks, c._cross_partition_ids,
        c._source_format is not None, c._heap_bytes, c._static_interface, from_optimized_dump(c),
    )


#: ``HloModuleProto.schedule``: XLA writes it into the modules its pipeline scheduled, its
#: ``*after_optimizations*`` dumps (``is_scheduled=true`` in their text)
_SCHEDULE_FIELD = 7


def from_optimized_dump(computation: XlaComputation) -> bool:
    """Whether ``computation`` is XLA's optimized dump of a program (an HLO module XLA had already
    scheduled), loaded or edited from one: compiling it again must not let XLA drop the precision
    conversions its first compile placed (see :func:`xlasdk.compile`)."""
    c = computation
    if c._optimized is None:
        proto = c._proto if c._proto is not None else (
            _mlir.hlo_proto(c._xla) if c._xla is not None and c._graph_cache is None else None)
        c._optimized = proto is not None and any(n == _SCHEDULE_FIELD for n, *_ in _metadata._fields(proto))
    return c._optimized
