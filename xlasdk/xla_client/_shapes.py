"""Errors, element types and shapes of the former ``xla_client``: ``Shape`` (numpy-dtype element
types), ``ProgramShape``, ``shape_from_pyval``, ``ShapeIndex``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

import numpy as np

from .. import errors as _errors
from ..errors import DTypeError, ShapeError, XlaRuntimeError
from ..ops._core import int_list
from ..shape import Layout
from ..shape import ProgramShape as _ProgramShape
from ..shape import Shape as _Shape
from ..shape import shape_from_pyval as _shape_from_pyval
from ..types import PrimitiveType, etype_to_dtype


# -- errors -----------------------------------------------------------------------------------
class CompileError(_errors.CompileError, XlaRuntimeError):
    """A compilation failure: both ``xs.CompileError`` and :class:`XlaRuntimeError` (as jaxlib
    raised it)."""


class FormatError(_errors.FormatError, XlaRuntimeError):
    """Unreadable HLO protos, MLIR text or serialized executables: both ``xs.FormatError`` and
    :class:`XlaRuntimeError` (as jaxlib raised it)."""

# -- types ------------------------------------------------------------------------------------
def _element_types() -> dict[PrimitiveType, np.dtype[Any]]:
    out: dict[PrimitiveType, np.dtype[Any]] = {}
    for t in PrimitiveType:
        try:
            out[t] = etype_to_dtype(t)
        except DTypeError:  # TUPLE, TOKEN, INVALID, OPAQUE: no numpy dtype
            pass
    return out


XLA_ELEMENT_TYPE_TO_DTYPE: Final[dict[PrimitiveType, np.dtype[Any]]] = _element_types()
"""numpy dtype of each array element type."""

DTYPE_TO_XLA_ELEMENT_TYPE: Final[dict[str, PrimitiveType]] = {
    str(v): k for k, v in XLA_ELEMENT_TYPE_TO_DTYPE.items()
}
"""Element type of each dtype, keyed by ``str(np.dtype(...))`` as in the former module."""


_SHAPE_SLOTS: Final = _Shape.__slots__  # every field of a shape, whatever xs.Shape adds


class Shape(_Shape):
    """``xs.Shape`` with the former ``element_type()``: the numpy dtype of an array shape (as
    jaxlib's ``xla_client.Shape`` returns it), where ``xs.Shape.element_type()`` gives the
    ``PrimitiveType``. Everything else is ``xs.Shape``'s; ``xla_client.ops`` take these shapes
    and ``XlaBuilder.get_shape``, ``shape_from_pyval`` and program shapes give them.
    """

    __slots__ = ()

    def element_type(self) -> Any:
        """numpy dtype of an array shape; ``PrimitiveType.TUPLE`` / ``TOKEN`` for the others
        (jaxlib 0.10.2 raises there)."""
        et = self._etype
        if self._tuple is not None or et is PrimitiveType.TOKEN:
            return et
        return etype_to_dtype(et)

    def primitive_type(self) -> PrimitiveType:
        """The element type as a ``PrimitiveType`` (what ``xs.Shape.element_type()`` returns)."""
        return self._etype

    def tuple_shapes(self) -> tuple[Shape, ...]:
        return tuple(_compat_shape(x) for x in super().tuple_shapes())

    def with_major_to_minor_layout_if_absent(self) -> Shape:
        return _compat_shape(super().with_major_to_minor_layout_if_absent())

    @staticmethod
    def array_shape(
        dtype_or_etype: Any, dims: Iterable[int] = (), layout: Sequence[int] | Layout | None = None,
        dynamic_dimensions: Sequence[bool] | None = None,
    ) -> Shape:
        return _compat_shape(_Shape.array_shape(dtype_or_etype, dims, layout, dynamic_dimensions))

    @staticmethod
    def scalar_shape(dtype_or_etype: Any) -> Shape:
        return _compat_shape(_Shape.scalar_shape(dtype_or_etype))

    @staticmethod
    def tuple_shape(shapes: Iterable[_Shape]) -> Shape:
        return _compat_shape(_Shape.tuple_shape([_native_shape(x) for x in shapes]))

    @staticmethod
    def token_shape() -> Shape:
        return _compat_shape(_Shape.token_shape())


def _convert_shape(s: _Shape, cls: type[_Shape]) -> Any:
    if type(s) is cls:
        return s
    out = object.__new__(cls)
    for k in _SHAPE_SLOTS:
        object.__setattr__(out, k, getattr(s, k))
    return out


def _compat_shape(s: _Shape) -> Shape:
    """``s`` as this module's :class:`Shape` (same value)."""
    return _convert_shape(s, Shape)  # type: ignore[no-any-return]


def _native_shape(s: _Shape) -> _Shape:
    """``s`` as an ``xs.Shape`` (same value)."""
    return _convert_shape(s, _Shape)  # type: ignore[no-any-return]


class ProgramShape(_ProgramShape):
    """``xs.ProgramShape`` whose shapes are this module's :class:`Shape`."""

    __slots__ = ()

    def __init__(
        self, parameter_shapes: Sequence[_Shape], result_shape: _Shape, parameter_names: Sequence[str] = ()
    ) -> None:
        super().__init__([_compat_shape(p) for p in parameter_shapes], _compat_shape(result_shape), parameter_names)

    @classmethod
    def _of(cls, ps: _ProgramShape) -> ProgramShape:
        return cls(ps.parameter_shapes(), ps.result_shape(), ps.parameter_names())


def shape_from_pyval(pyval: Any, layout: Sequence[int] | None = None) -> Shape:
    """The :class:`Shape` of a Python value (as ``xs.shape_from_pyval``).

    Parameters
    ----------
    pyval:
        numpy array or scalar, Python scalar (``float`` is f32, ``int`` s32, ``bool`` pred), or
        a nested tuple of them (a tuple shape).
    layout:
        Optional ``minor_to_major`` order for an array value.

    Raises
    ------
    DTypeError
        For values of no XLA element type.
    """
    s = _shape_from_pyval(pyval)
    if layout is None or not s.is_array():
        return _compat_shape(s)
    return Shape.array_shape(s.numpy_dtype(), s.dimensions(), list(layout))


# -- other former names -------------------------------------------------------------------------
class ShapeIndex:
    """A path into a tuple shape (the former ``xla_client.ShapeIndex``): ``ShapeIndex([0, 1])``
    is element 1 of element 0. Compares and hashes by value."""

    __slots__ = ("_indices",)

    def __init__(self, indices: Sequence[int] = ()) -> None:
        self._indices = int_list("ShapeIndex", "indices", list(indices))
        if any(i < 0 for i in self._indices):
            raise ShapeError(f"ShapeIndex: indices must be >= 0, got {list(self._indices)}")

    def __iter__(self) -> Iterator[int]:
        return iter(self._indices)

    def __len__(self) -> int:
        return len(self._indices)

    def __getitem__(self, i: int) -> int:
        return self._indices[i]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShapeIndex) and other._indices == self._indices

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(("ShapeIndex", self._indices))

    def __repr__(self) -> str:
        return f"ShapeIndex({{{', '.join(map(str, self._indices))}}})"
