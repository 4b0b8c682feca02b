"""``HloModule``, ``XlaComputation``, ``XlaBuilder`` and the ``_xla.mlir`` converters of the former
``xla_client``."""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any, Final

from .. import errors as _errors
from .._jaxlib import mlir as _mlir
from ..builder import XlaBuilder as _XlaBuilder
from ..builder import XlaOp
from ..program.computation import XlaComputation as _XlaComputation
from ._shapes import FormatError, ProgramShape, Shape, _compat_shape


# -- computations -----------------------------------------------------------------------------
class _Name(str):
    """A ``str`` that can also be called, so ``comp.name`` and the former ``comp.name()`` both work."""

    __slots__ = ()

    def __call__(self) -> str:
        return str(self)


class HloModule:
    """An HLO module (jaxlib's ``HloModule`` surface): ``to_string()``,
    ``as_serialized_hlo_module_proto()``, ``name``."""

    __slots__ = ("_m",)

    _m: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "HloModule objects come from XlaComputation.get_hlo_module(), LoadedExecutable.hlo_modules() "
            "or HloModule.from_serialized_hlo_module_proto(bytes)"
        )

    @classmethod
    def _wrap(cls, module: Any) -> HloModule:
        m = object.__new__(cls)
        m._m = module
        return m

    @staticmethod
    def from_serialized_hlo_module_proto(data: bytes) -> HloModule:
        """Parse a serialized ``xla.HloModuleProto``.

        Raises
        ------
        FormatError
            If XLA cannot read it.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise FormatError(f"HloModule.from_serialized_hlo_module_proto: expected bytes, got {type(data).__name__}")
        try:
            return HloModule._wrap(_mlir.hlo_module_from_proto(bytes(data)))
        except Exception as e:
            raise FormatError(f"HloModule.from_serialized_hlo_module_proto: {e}") from e

    def to_string(self, options: Any = None) -> str:
        """HLO text; ``options`` may be any object with a ``print_metadata`` attribute (default True)."""
        metadata = True if options is None else bool(getattr(options, "print_metadata", True))
        return _mlir.hlo_module_to_text(self._m, metadata=metadata)

    def as_serialized_hlo_module_proto(self) -> bytes:
        """The module as a serialized ``xla.HloModuleProto``."""
        return _mlir.hlo_module_to_proto(self._m)

    @property
    def name(self) -> str:
        """The module's name (``HloModule <name>`` in the text)."""
        head = self.to_string(_NO_METADATA).split(None, 2)
        return head[1].rstrip(",") if len(head) > 1 else ""

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return f"HloModule({self.name!r})"


_NO_METADATA: Final = types.SimpleNamespace(print_metadata=False)


class XlaComputation(_XlaComputation):
    """An ``xs.XlaComputation`` with the former constructor and methods.

    ``XlaComputation(serialized_hlo_module_proto)`` loads a serialized ``xla.HloModuleProto``;
    :class:`XlaBuilder` builds return this class. ``name`` is a string that can also be
    called (``comp.name()``, the former method). ``get_hlo_module()`` / ``as_hlo_module()``
    return an :class:`HloModule`.

    Raises
    ------
    FormatError
        For bytes that are not a valid HLO module proto.
    """

    def __new__(cls, serialized_hlo_module_proto: bytes) -> XlaComputation:
        data = serialized_hlo_module_proto
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"XlaComputation(serialized_hlo_module_proto): expected bytes, got {type(data).__name__}; "
                "build computations with XlaBuilder"
            )
        try:
            loaded = _XlaComputation.from_hlo_proto(bytes(data))
        except _errors.FormatError as e:
            raise FormatError(str(e)) from e
        return cls._adopt(loaded)

    def __init__(self, serialized_hlo_module_proto: bytes) -> None:
        pass  # all done in __new__

    def __copy__(self) -> XlaComputation:
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        return new

    @classmethod
    def _adopt(cls, comp: _XlaComputation) -> XlaComputation:
        """``comp`` as this class (same state; ``comp`` itself stays valid)."""
        if isinstance(comp, cls):
            return comp
        new = object.__new__(cls)
        new.__dict__.update(comp.__dict__)
        return new

    @property
    def name(self) -> _Name:
        """The computation's name; also callable, ``comp.name()``, as in the former API."""
        return _Name(super().name)

    def get_hlo_module(self) -> HloModule:
        """The unoptimized program as an :class:`HloModule`."""
        return HloModule._wrap(super().get_hlo_module())

    def program_shape(self) -> ProgramShape:
        """Parameter shapes and result shape, as this module's :class:`Shape`."""
        return ProgramShape._of(super().program_shape())

    def as_hlo_module(self) -> HloModule:
        """Same as :meth:`get_hlo_module`."""
        return self.get_hlo_module()


class XlaBuilder(_XlaBuilder):
    """``xs.XlaBuilder`` whose :meth:`build` returns the compatibility :class:`XlaComputation`."""

    def build(self, root: XlaOp | Sequence[XlaOp] | None = None) -> XlaComputation:
        """Build the computation whose result is ``root`` (default: the last op built).

        Raises
        ------
        ShapeError
            No ops, ``root`` from another builder, or gaps in parameter numbers.
        """
        return XlaComputation._adopt(super().build(root))

    def get_shape(self, op: XlaOp) -> Shape:
        """The Shape of ``op`` (``element_type()`` a numpy dtype, as in the former API)."""
        return _compat_shape(super().get_shape(op))

    def get_program_shape(self, root: XlaOp | None = None) -> ProgramShape:
        """Parameter shapes and the result shape of the computation built so far."""
        return ProgramShape._of(super().get_program_shape(root))


def _as_computation(computation: Any, what: str) -> _XlaComputation:
    if isinstance(computation, _XlaComputation):
        return computation
    if isinstance(computation, (str, bytes, bytearray, memoryview)):
        data = computation if isinstance(computation, str) else bytes(computation)
        try:
            return _XlaComputation.from_stablehlo(data)
        except _errors.FormatError as e:
            raise FormatError(f"{what}: {e}") from e
    raise TypeError(
        f"{what}: expected an XlaComputation or StableHLO module text/bytecode, got {type(computation).__name__}"
    )


def _xla_computation_to_mlir_module(computation: _XlaComputation) -> str:
    """StableHLO text of a computation (with locations), as ``_xla.mlir`` gave it."""
    return computation.as_stablehlo_text(debug_info=True)


def _mlir_module_to_xla_computation(
    mlir_module: str | bytes, use_tuple_args: bool = False, return_tuple: bool = False
) -> XlaComputation:
    """An :class:`XlaComputation` from StableHLO text or bytecode."""
    if use_tuple_args or return_tuple:
        raise FormatError("mlir_module_to_xla_computation: use_tuple_args / return_tuple are not supported")
    return XlaComputation._adopt(_as_computation(mlir_module, "mlir_module_to_xla_computation"))
