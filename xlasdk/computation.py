"""``XlaComputation``: a built (or loaded) program, printable as HLO and StableHLO.

The canonical form is a StableHLO module (MLIR). HLO text, the HLO module proto and the dot
graph are produced from it on demand (and cached) by XLA's own converter.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from . import _metadata
from ._emit import emit_module
from ._hlo_emit import Unsupported, parsable_module_name, print_hlo_module
from ._jaxlib import mlir as _mlir
from .builder import Region
from .errors import CompileError, XlaSdkError
from .ops.collectives import cross_partition_ids
from .shape import ProgramShape, Shape

if TYPE_CHECKING:
    from .builder import XlaBuilder, XlaOp
    from .formats.graph_import import Instruction, Partitioning

__all__ = ["XlaComputation"]


_T = TypeVar("_T")

class XlaComputation:
    """A computation: parameters, a result and the ops between them.

    Made by :meth:`XlaBuilder.build <xlasdk.XlaBuilder.build>` or loaded from a file.
    Compile it with :func:`xlasdk.compile`; print it with :meth:`as_hlo_text` or
    :meth:`as_stablehlo_text`.
    """

    _name: str
    _program_shape: ProgramShape
    _root: XlaOp | None
    _params: tuple[XlaOp, ...]
    _side_effects: tuple[XlaOp, ...]
    _text: str | None
    _module: Any
    _xla: Any
    _source_format: str | None
    _proto: bytes | None  # a loaded HLO module's verified HloModuleProto, read on first need
    _hlo_texts: dict[tuple[bool, bool], str | None]
    _cross_partition: list[tuple[str, str, list[int]]] | None
    _host_callbacks: tuple[Any, ...]  # callables of ops.HostCallback, by index (built graphs only)
    _heap_bytes: int  # bytes of every array of a built graph (0 when loaded)
    # A graph made from an imported module (with_outputs, extract): what surrounds main there
    # (module attributes, other top-level ops, result attributes); None for built graphs.
    _module_extra: tuple[tuple[tuple[str, str], ...], tuple[str, ...], tuple[dict[str, Any], ...] | None] | None
    _graph_cache: Any  # the ImportedGraph of this computation (formats.graph_import), on first need

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
        c._root = None
        c._params = ()
        c._side_effects = ()
        c._text = None
        c._module = None
        c._xla = None
        c._source_format = None
        c._proto = None
        c._hlo_texts = {}
        c._cross_partition = None
        c._host_callbacks = ()
        c._heap_bytes = 0
        c._module_extra = None
        c._graph_cache = None
        return c

    @classmethod
    def _from_builder(cls, builder: XlaBuilder, root: XlaOp, program_shape: ProgramShape) -> XlaComputation:
        c = cls._new(builder.name, program_shape)
        c._root = root
        c._params = tuple(builder.parameters())
        c._side_effects = tuple(builder._side_effects)
        c._heap_bytes = builder._nbytes
        return c

    @classmethod
    def _from_loaded(
        cls,
        name: str,
        program_shape: ProgramShape,
        module: Any,
        text: str,
        *,
        xla: Any = None,
        source_format: str | None = None,
        proto: bytes | None = None,
    ) -> XlaComputation:
        """A computation loaded and verified by :mod:`xlasdk.formats`.

        ``module`` is the parsed ``ir.Module``, ``text`` its StableHLO text with locations (op
        metadata lives there, see :meth:`_converted`); ``xla`` the jaxlib
        ``XlaComputation`` of the original HLO when it was loaded from HLO (so ``as_hlo_text``
        gives back the HLO that was loaded). ``module`` may be None (it is parsed from ``text``
        when first needed), and ``proto`` (a verified ``HloModuleProto``) may stand for ``xla``
        (read when first needed): loading a large module then costs only what the loader's
        worker process spent on it.
        """
        c = cls._new(name, program_shape)
        c._text = text
        c._module = module
        c._xla = xla
        c._source_format = source_format
        c._proto = proto
        return c

    @classmethod
    def _from_graph(
        cls,
        name: str,
        params: list[XlaOp],
        outputs: list[XlaOp],
        effects: list[XlaOp],
        module_attrs: tuple[tuple[str, str], ...],
        module_body: tuple[str, ...],
        result_attrs: tuple[dict[str, Any], ...] | None,
        source_format: str,
    ) -> XlaComputation:
        """A computation of nodes of an imported module's graph (:mod:`xlasdk.formats.graph_import`):
        emitted with the module's attributes and other top-level ops around ``main``, and, like a
        loaded computation, converted and compiled in the worker process first."""
        from ._optable import TUPLE
        from .builder import XlaOp as _Op

        if len(outputs) == 1:
            root = outputs[0]
        else:
            b = outputs[0].builder
            root = _Op(b, TUPLE, tuple(outputs), Shape.tuple_shape([o.shape for o in outputs]), {}, (), outputs[0].loc,
                       None)
        pshape = ProgramShape([p.shape for p in params], root.shape,
                              [p.extra[1] or f"p{i}" for i, p in enumerate(params)])
        c = cls._new(name, pshape)
        c._root = root
        c._params = tuple(params)
        c._side_effects = tuple(effects)
        c._module_extra = (module_attrs, module_body, result_attrs)
        c._source_format = source_format
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
        from .formats import computation_from_hlo_text

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
        from .formats import computation_from_stablehlo

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
        from .formats import computation_from_hlo_proto

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

    # -- StableHLO ---------------------------------------------------------------------------
    def _mlir_module_text(self) -> str:
        """StableHLO module text (generic syntax, with locations), accepted by PJRT compile."""
        if self._text is None:
            assert self._root is not None
            callbacks: list[Any] = []
            attrs, body, results = self._module_extra or ((), (), None)
            self._text = emit_module(
                self._name, list(self._params), self._root, side_effects=self._side_effects,
                host_callbacks=callbacks, module_attrs=", ".join(f"{k} = {v}" for k, v in attrs),
                module_body=body, result_attrs=results,
            )
            self._host_callbacks = tuple(callbacks)
        return self._text

    def _callbacks(self) -> tuple[Any, ...]:
        """The Python host callbacks (``ops.HostCallback``) the module calls, in index order: what
        it must be compiled with. Empty for loaded computations."""
        self._mlir_module_text()
        return self._host_callbacks

    def _mlir_module(self) -> Any:
        if self._module is None:
            try:
                self._module = _mlir.parse_module(self._mlir_module_text())
            except _mlir.MlirError as e:  # an xlasdk bug: shape rules should have caught it
                raise XlaSdkError(
                    f"internal error: xlasdk produced an invalid StableHLO module for {self._name!r}: {e}"
                ) from e
        return self._module

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
            roots = [] if self._root is None or self._module_extra is not None else [self._root, *self._side_effects]
            self._cross_partition = cross_partition_ids(roots)
        return self._cross_partition

    def _region(self) -> Region:
        """This computation as a region body (only for computations built by an XlaBuilder)."""
        if self._root is None or self._module_extra is not None:
            raise XlaSdkError(
                f"computation {self._name!r} was loaded from a file; only computations built with an "
                "XlaBuilder can be used as sub-computations"
            )
        return Region(self._params, [self._root])

    # -- HLO ---------------------------------------------------------------------------------
    def _xla_computation(self) -> Any:
        if self._xla is None and self._proto is not None:  # loaded from HLO: the verified proto
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
            from .formats.untrusted import converted_hlo_proto

            return _mlir.xla_computation_from_proto(converted_hlo_proto(self._mlir_module_text(), self._name))
        assert self._root is not None
        table: list[dict[str, Any]] = []
        marked = emit_module(
            self._name, list(self._params), self._root, side_effects=self._side_effects, metadata_table=table
        )
        if not table:
            return _mlir.parsed_module_to_hlo(self._mlir_module())
        return _mlir.xla_computation_from_proto(_metadata.hlo_proto_with_metadata(marked, table))

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
        if self._root is not None and self._module_extra is None:
            key = (print_metadata, print_large_constants)
            if key not in self._hlo_texts:
                self._hlo_texts[key] = self._direct_hlo_text(print_metadata, print_large_constants)
            text = self._hlo_texts[key]
            if text is not None:
                return text
        return self._converted_hlo_text(print_metadata, print_large_constants)

    def _direct_hlo_text(self, print_metadata: bool, print_large_constants: bool) -> str | None:
        """The graph printed as HLO by :mod:`xlasdk._hlo_emit`, or None where it cannot."""
        assert self._root is not None
        try:
            return print_hlo_module(
                self._name, list(self._params), self._root, self._side_effects,
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
        from .formats import save_computation

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
        from .formats import serialize_portable_artifact

        return serialize_portable_artifact(self, target_version)

    @property
    def source_format(self) -> str | None:
        """The format the computation was loaded from (``"hlo"``, ``"mlir"``, ``"mlirbc"``,
        ``"pb"``), or None for a built computation. A computation made by :meth:`with_outputs` or
        :meth:`extract` keeps its source's format (``"graph"`` when the source was built)."""
        return self._source_format

    # -- the graph: walk and edit --------------------------------------------------------------
    def _graph(self) -> Any:
        """This computation's :class:`~xlasdk.formats.graph_import.ImportedGraph`, imported from
        its verified module on first need (loading, compiling and running do not pay for it)."""
        if self._graph_cache is None:
            from .formats.graph_import import import_graph

            self._graph_cache = import_graph(self._mlir_module(), self._name)
        return self._graph_cache

    def instructions(self) -> list[Instruction]:
        """Every instruction of the entry computation (``main``), parameters first, in
        topological order, as :class:`~xlasdk.Instruction` views: ``name``, ``opcode``
        (``stablehlo.add``), ``shape``, ``operands``, ``users``, ``attributes`` (Python values),
        ``metadata`` (``op_name``, source file and line from the op's location), ``op`` (the
        :class:`~xlasdk.XlaOp` node).

        A loaded module (HLO text or proto, StableHLO text or bytecode, XLA dumps before and
        after optimizations) and a built one are walked the same way: the module is read through
        the MLIR bindings into the graph :class:`~xlasdk.XlaBuilder` makes, once, on the first
        call. Ops of regions (loop bodies, reducers, branches) are reached through each
        instruction's ``op.regions``; a ``func.call`` is one opaque instruction (the function it
        calls is kept whole, not walked).

        Raises
        ------
        GraphImportError
            The module has a construct the graph cannot hold (a multi-block region, an
            unbounded dynamic dimension); the message names it.
        """
        return list(self._graph().instructions)

    def partitioning(self) -> Partitioning:
        """How the program says it is partitioned: ``num_partitions`` and ``num_replicas`` (the
        module's ``mhlo.num_partitions`` / ``mhlo.num_replicas``), Shardy meshes, and each
        parameter's and result's sharding (Shardy's ``sdy.sharding`` or GSPMD's ``mhlo.sharding``),
        as the module spells them; ``.is_partitioned`` says whether any of it asks for several
        devices. Compile such a program with ``xs.CompileOptions(num_partitions=N)`` on a client
        with N devices and run it with ``exe.execute_sharded(global_arrays)``.

        Read from the instruction graph (see :meth:`instructions`). HLO loaded from text or a
        proto keeps only what XLA's HLO -> StableHLO import carries over (the number of
        partitions of an HLO module is not among it).
        """
        from .formats.graph_import import partitioning

        return partitioning(self._graph())

    def instruction(self, name: str | int) -> Instruction:
        """The instruction named ``name`` (as :meth:`instructions` names them: a parameter's
        name, or ``<opcode>.<index>`` such as ``add.7``), or at position ``name`` when an int.

        Raises
        ------
        XlaSdkError
            No such instruction (the message lists instructions of the same opcode).
        """
        from .formats.graph_import import _resolve

        graph = self._graph()
        (op,) = _resolve(graph, [name], "instruction", outputs=False)
        return graph.instruction_of(op)  # type: ignore[no-any-return]

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
        from .formats.graph_import import with_outputs

        return with_outputs(self, self._graph(), instructions)

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
        from .formats.graph_import import extract

        return extract(self, self._graph(), instructions)

    def get_hlo_module(self) -> Any:
        """jaxlib's ``HloModule`` (for the ``xla_client`` compatibility surface)."""
        return self._xla_computation().get_hlo_module()
