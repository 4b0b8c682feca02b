"""``XlaComputation``: a built (or loaded) program, printable as HLO and StableHLO.

The canonical form is a StableHLO module (MLIR). HLO text, the HLO module proto and the dot
graph are produced from it on demand (and cached) by XLA's own converter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._jaxlib import mlir as _mlir
from .errors import CompileError, XlaSdkError
from .shape import ProgramShape

if TYPE_CHECKING:
    from .builder import Region, XlaBuilder, XlaOp

__all__ = ["XlaComputation"]


class XlaComputation:
    """A computation: parameters, a result and the ops between them.

    Made by :meth:`XlaBuilder.build <xlasdk.XlaBuilder.build>` or loaded from a file.
    Compile it with :func:`xlasdk.compile`; print it with :meth:`as_hlo_text` or
    :meth:`as_stablehlo_text`.
    """

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
        c._builder = None
        c._root = None
        c._params = ()
        c._text = None
        c._module = None
        c._xla = None
        return c

    @classmethod
    def _from_builder(cls, builder: XlaBuilder, root: XlaOp, program_shape: ProgramShape) -> XlaComputation:
        c = cls._new(builder.name, program_shape)
        c._builder = builder
        c._root = root
        c._params = tuple(builder.parameters())
        return c

    @classmethod
    def _from_mlir_text(cls, text: str, name: str, program_shape: ProgramShape) -> XlaComputation:
        """A computation from StableHLO module text already known to be valid."""
        c = cls._new(name, program_shape)
        c._text = text
        return c

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
            from ._emit import emit_module

            assert self._root is not None
            self._text = emit_module(self._name, list(self._params), self._root)
        return self._text

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
        """The computation as StableHLO text (MLIR pretty syntax); locations when ``debug_info``."""
        return _mlir.module_to_pretty_text(self._mlir_module(), debug_info=debug_info)

    def _region(self) -> Region:
        """This computation as a region body (only for computations built by an XlaBuilder)."""
        from .builder import Region

        if self._root is None:
            raise XlaSdkError(
                f"computation {self._name!r} was loaded from a file; only computations built with an "
                "XlaBuilder can be used as sub-computations"
            )
        return Region(self._params, [self._root])

    # -- HLO ---------------------------------------------------------------------------------
    def _xla_computation(self) -> Any:
        if self._xla is None:
            self._mlir_module()  # verify first: a clear error instead of a converter message
            try:
                self._xla = _mlir.module_to_hlo(self._mlir_module_text())
            except Exception as e:  # jaxlib raises its own runtime error type
                raise CompileError(f"converting {self._name!r} to HLO failed: {e}") from e
        return self._xla

    def as_hlo_text(self, print_metadata: bool = True, print_large_constants: bool = True) -> str:
        """HLO text of the (unoptimized) computation.

        Each instruction shows ``metadata={op_name=... source_file=... source_line=...}`` when
        ``print_metadata`` is true (the default).
        """
        return _mlir.hlo_text(
            self._xla_computation(), metadata=print_metadata, large_constants=print_large_constants
        )

    def as_serialized_hlo_module_proto(self) -> bytes:
        """The computation as a serialized ``xla.HloModuleProto``."""
        return _mlir.hlo_proto(self._xla_computation())

    def as_hlo_dot_graph(self) -> str:
        """Graphviz dot text of the HLO graph."""
        return _mlir.hlo_dot_graph(self._xla_computation())

    def get_hlo_module(self) -> Any:
        """jaxlib's ``HloModule`` (for the ``xla_client`` compatibility surface)."""
        return self._xla_computation().get_hlo_module()
