"""``Shape`` and ``ProgramShape``: XLA shapes in HLO notation, plus ``shape_from_pyval``.

A :class:`Shape` is an array shape (element type and dimensions, optionally a layout), a tuple
of shapes, or a token. ``str(shape)`` prints HLO notation: ``f32[2,3]``, ``s32[]``,
``(f32[2], s32[])``, ``token[]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ._where import where
from .errors import DTypeError, ShapeError
from .types import (
    PrimitiveType,
    byte_width,
    canonical_dtype,
    dtype_to_etype,
    etype_to_dtype,
    hlo_element_name,
    mlir_element_type,
    show,
)

_TOKEN = PrimitiveType.TOKEN
_TUPLE = PrimitiveType.TUPLE

__all__ = ["Layout", "Shape", "ProgramShape", "shape_from_pyval", "MAX_ARRAY_BYTES", "array_size_problem"]

#: The largest array xlasdk builds, in bytes: 2**62 (4 EiB). XLA itself rejects a shape whose
#: dimension sizes multiplied together, or that product times the element size, overflow int64
#: (``ShapeUtil::ValidateShapeSize``), and XLA:CPU aborts the process on such a shape; it also
#: aborts (``std::bad_alloc``) compiling element-wise ops on arrays of more than 2**62 elements.
#: So xlasdk checks, when a Shape is made and when an op computes its result shape, that the
#: product of the non-zero dimension sizes times the element size in bytes (``types.byte_width``:
#: 1 for pred and the 2/4-bit types) is at most ``2**62``. Sizes of 0 count as 1, so that the
#: rule does not depend on the order of the dimensions (XLA rejects ``[2**62, 2**62, 0]`` though
#: it holds no element).
MAX_ARRAY_BYTES = 2**62
_NOT_ARRAYS = (_TUPLE, _TOKEN, PrimitiveType.OPAQUE_TYPE, PrimitiveType.PRIMITIVE_TYPE_INVALID)
_WIDTH: dict[PrimitiveType, int] = {e: byte_width(e) for e in PrimitiveType if e not in _NOT_ARRAYS}


def array_size_problem(etype: PrimitiveType, dims: Sequence[int]) -> str | None:
    """Why an array of ``etype`` and ``dims`` is too large for XLA, or None (see
    :data:`MAX_ARRAY_BYTES`)."""
    n = _WIDTH[etype]
    for d in dims:
        if d > 1:
            n *= d
    if n <= MAX_ARRAY_BYTES:
        return None
    text = f"{hlo_element_name(etype)}[{','.join(map(str, dims))}]"
    return (
        f"{text} is too large: its non-zero dimension sizes times {byte_width(etype)} byte(s) per element "
        f"give {n} bytes (about 2**{n.bit_length() - 1}); an array may hold at most 2**62 bytes (XLA needs "
        "sizes and byte sizes that fit in int64, and XLA:CPU aborts on arrays of more than 2**62 elements)"
    )


def _where() -> str:
    return where()


class Layout:
    """An array layout, given as ``minor_to_major`` dimension order."""

    __slots__ = ("_m2m",)

    def __init__(self, minor_to_major: Sequence[int]) -> None:
        self._m2m = tuple(int(d) for d in minor_to_major)

    def minor_to_major(self) -> tuple[int, ...]:
        """Dimension numbers from the fastest-varying to the slowest-varying."""
        return self._m2m

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and other._m2m == self._m2m

    def __hash__(self) -> int:
        return hash(self._m2m)

    def __repr__(self) -> str:
        return "{" + ",".join(map(str, self._m2m)) + "}"


class Shape:
    """An XLA shape: array (element type + dimensions), tuple of shapes, or token.

    Build with :meth:`array_shape`, :meth:`scalar_shape`, :meth:`tuple_shape` or
    :meth:`token_shape`. Shapes are immutable, hashable and compare by value (the layout is
    ignored unless both sides have one).
    """

    __slots__ = ("_etype", "_dims", "_tuple", "_layout", "_dynamic", "_hash", "_mlir", "_str", "_nbytes")

    _etype: PrimitiveType
    _dims: tuple[int, ...]
    _tuple: tuple[Shape, ...] | None
    _layout: Layout | None
    _dynamic: tuple[bool, ...]
    _hash: int | None
    _mlir: str | None
    _str: str | None
    _nbytes: int | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("use Shape.array_shape, Shape.scalar_shape, Shape.tuple_shape or Shape.token_shape")

    @classmethod
    def _make(
        cls,
        etype: PrimitiveType,
        dims: tuple[int, ...],
        tup: tuple[Shape, ...] | None = None,
        layout: Layout | None = None,
        dynamic: tuple[bool, ...] | None = None,
    ) -> Shape:
        s = object.__new__(cls)
        s._etype = etype
        s._dims = dims
        s._tuple = tup
        s._layout = layout
        s._dynamic = dynamic if dynamic is not None else (False,) * len(dims)
        s._hash = None
        s._mlir = None
        s._str = None
        s._nbytes = None
        return s

    # -- constructors ------------------------------------------------------------------------
    @staticmethod
    def array_shape(
        dtype_or_etype: Any,
        dims: Iterable[int] = (),
        layout: Sequence[int] | Layout | None = None,
        dynamic_dimensions: Sequence[bool] | None = None,
    ) -> Shape:
        """An array shape.

        Parameters
        ----------
        dtype_or_etype: numpy/ml_dtypes dtype, type, name or :class:`PrimitiveType`.
        dims: the dimension sizes, each ``>= 0``.
        layout: optional ``minor_to_major`` order (a permutation of ``range(len(dims))``).
        dynamic_dimensions: optional per-dimension flags (``dims`` is then the upper bound).

        Raises
        ------
        DTypeError: unknown element type. ShapeError: a negative or non-integer size, an array
        of more than 2**62 bytes (:data:`MAX_ARRAY_BYTES`), a bad layout, or
        ``dynamic_dimensions`` of the wrong length.
        """
        etype = dtype_to_etype(dtype_or_etype)
        if isinstance(dims, (str, bytes, bytearray)):
            raise ShapeError(f"Shape.array_shape: dims must be a sequence of ints, got {show(dims)}{_where()}")
        try:
            d = tuple(_as_dim(x) for x in dims)
        except TypeError:
            raise ShapeError(
                f"Shape.array_shape: dims must be a sequence of ints, got {show(dims)}{_where()}"
            ) from None
        problem = array_size_problem(etype, d)
        if problem is not None:
            raise ShapeError(f"Shape.array_shape: {problem}{_where()}")
        lay: Layout | None = None
        if layout is not None:
            lay = layout if isinstance(layout, Layout) else _layout(layout, len(d))
            if sorted(lay.minor_to_major()) != list(range(len(d))):
                raise ShapeError(
                    f"Shape.array_shape: layout {list(lay.minor_to_major())} is not a permutation of "
                    f"range({len(d)}){_where()}"
                )
        dyn: tuple[bool, ...] | None = None
        if dynamic_dimensions is not None:
            dyn = _flags(dynamic_dimensions)
            if len(dyn) != len(d):
                raise ShapeError(
                    f"Shape.array_shape: dynamic_dimensions has {len(dyn)} entries, expected {len(d)}{_where()}"
                )
        return Shape._make(etype, d, None, lay, dyn)

    @staticmethod
    def scalar_shape(dtype_or_etype: Any) -> Shape:
        """A rank-0 array shape of the given element type."""
        return Shape._make(dtype_to_etype(dtype_or_etype), ())

    @staticmethod
    def tuple_shape(shapes: Iterable[Shape]) -> Shape:
        """A tuple shape of ``shapes`` (which may themselves be tuples)."""
        tup = tuple(shapes)
        for i, s in enumerate(tup):
            if not isinstance(s, Shape):
                raise ShapeError(f"Shape.tuple_shape: element {i} is {type(s).__name__}, expected Shape")
        return Shape._make(PrimitiveType.TUPLE, (), tup)

    @staticmethod
    def token_shape() -> Shape:
        """The shape of a token (ordering of side-effecting ops)."""
        return Shape._make(PrimitiveType.TOKEN, ())

    # -- queries -----------------------------------------------------------------------------
    def element_type(self) -> PrimitiveType:
        return self._etype

    def numpy_dtype(self) -> np.dtype[Any]:
        """numpy dtype of an array shape. Raises DTypeError for tuples and tokens."""
        return etype_to_dtype(self._etype)

    def dimensions(self) -> tuple[int, ...]:
        return self._dims

    def rank(self) -> int:
        return len(self._dims)

    def is_array(self) -> bool:
        return self._tuple is None and self._etype is not _TOKEN

    def is_tuple(self) -> bool:
        return self._tuple is not None

    def is_token(self) -> bool:
        return self._etype is _TOKEN

    def tuple_shapes(self) -> tuple[Shape, ...]:
        """Element shapes of a tuple shape. Raises ShapeError for other shapes."""
        if self._tuple is None:
            raise ShapeError(f"tuple_shapes: {self} is not a tuple shape")
        return self._tuple

    def leaf_count(self) -> int:
        return 1 if self._tuple is None else len(self._tuple)

    def layout(self) -> Layout | None:
        return self._layout

    def with_major_to_minor_layout_if_absent(self) -> Shape:
        """This shape with the default (row-major) layout added where none is set."""
        if self._tuple is not None:
            return Shape.tuple_shape(s.with_major_to_minor_layout_if_absent() for s in self._tuple)
        if self._layout is not None or self.is_token():
            return self
        return Shape._make(
            self._etype, self._dims, None, Layout(tuple(range(len(self._dims) - 1, -1, -1))), self._dynamic
        )

    def _plain(self) -> Shape:
        """This shape as an ``xs.Shape`` itself (a subclass such as ``xla_client.Shape``, whose
        ``element_type()`` differs, is copied): the shapes that ops and executables hold."""
        if type(self) is Shape:
            return self
        out = object.__new__(Shape)
        for k in Shape.__slots__:
            object.__setattr__(out, k, getattr(self, k))
        return out

    def is_dynamic_dimension(self, i: int) -> bool:
        return self._dynamic[i]

    def is_static(self) -> bool:
        return not any(self._dynamic)

    def _heap_bytes(self) -> int:
        """Bytes XLA reserves for a value of this shape, as :func:`array_size_problem` counts them
        (sizes of 0 count as 1; 0 for tuples and tokens, whose elements are other values)."""
        n = self._nbytes
        if n is None:
            if self._tuple is not None or self._etype is _TOKEN:
                n = 0
            else:
                n = _WIDTH[self._etype]
                for d in self._dims:
                    if d > 1:
                        n *= d
            self._nbytes = n
        return n

    def size(self) -> int:
        """Number of elements of an array shape."""
        n = 1
        for d in self._dims:
            n *= d
        return n

    # -- text forms --------------------------------------------------------------------------
    def mlir_type(self) -> str:
        """MLIR type: ``tensor<2x3xf32>``, ``tuple<...>``, ``!stablehlo.token``."""
        t = self._mlir
        if t is None:
            if self._tuple is not None:
                t = "tuple<" + ", ".join(s.mlir_type() for s in self._tuple) + ">"
            elif self._etype is PrimitiveType.TOKEN:
                t = "!stablehlo.token"
            elif any(self._dynamic):  # a bounded dynamic shape: tensor<?x3xf32, #stablehlo.bounds<4, ?>>
                et = mlir_element_type(self._etype)
                pairs = list(zip(self._dims, self._dynamic, strict=True))
                dims = "".join(("?" if dyn else str(d)) + "x" for d, dyn in pairs)
                bounds = ", ".join(str(d) if dyn else "?" for d, dyn in pairs)
                t = f"tensor<{dims}{et}, #stablehlo.bounds<{bounds}>>"
            else:
                et = mlir_element_type(self._etype)
                t = "tensor<" + "".join(f"{d}x" for d in self._dims) + et + ">"
            self._mlir = t
        return t

    def __str__(self) -> str:
        s = self._str
        if s is None:
            if self._tuple is not None:
                s = "(" + ", ".join(str(x) for x in self._tuple) + ")"
            elif self._etype is PrimitiveType.TOKEN:
                s = "token[]"
            else:
                dims = ",".join(
                    ("<=" if dyn else "") + str(d) for d, dyn in zip(self._dims, self._dynamic, strict=False)
                )
                s = f"{hlo_element_name(self._etype)}[{dims}]"
                if self._layout is not None:
                    s += repr(self._layout)
            self._str = s
        return s

    def __repr__(self) -> str:
        return f"Shape({self})"

    def _key(self) -> tuple[Any, ...]:
        return (self._etype, self._dims, self._tuple, self._dynamic)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Shape):
            return NotImplemented
        if self._key() != other._key():
            return False
        return self._layout is None or other._layout is None or self._layout == other._layout

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash(self._key())
        return h


def _as_dim(x: Any) -> int:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise TypeError
    v = int(x)
    if v < 0:
        raise ShapeError(f"Shape.array_shape: dimension sizes must be >= 0, got {v}{_where()}")
    return v


def _layout(value: Any, rank: int) -> Layout:
    """A Layout from a ``minor_to_major`` sequence of ints (ShapeError otherwise)."""
    if not isinstance(value, (list, tuple, range, np.ndarray)) or not all(
        isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in value
    ):
        raise ShapeError(
            f"Shape.array_shape: layout must be a Layout or a minor_to_major sequence of ints, got {show(value)}"
            f"{_where()}"
        )
    return Layout(tuple(int(v) for v in value))


def _flags(value: Any) -> tuple[bool, ...]:
    """``dynamic_dimensions``: a sequence of bools (or of 0 and 1; ShapeError otherwise)."""
    if not isinstance(value, (list, tuple, np.ndarray)) or not all(
        isinstance(v, (bool, np.bool_)) or (isinstance(v, (int, np.integer)) and v in (0, 1)) for v in value
    ):
        raise ShapeError(
            f"Shape.array_shape: dynamic_dimensions must be a sequence of bools, got {show(value)}{_where()}"
        )
    return tuple(bool(v) for v in value)


class ProgramShape:
    """Parameter shapes and result shape of a computation."""

    __slots__ = ("_params", "_result", "_names")

    def __init__(
        self, parameter_shapes: Sequence[Shape], result_shape: Shape, parameter_names: Sequence[str] = ()
    ) -> None:
        self._params = tuple(parameter_shapes)
        self._result = result_shape
        self._names = tuple(parameter_names) or tuple(f"p{i}" for i in range(len(self._params)))

    def parameter_shapes(self) -> tuple[Shape, ...]:
        return self._params

    def result_shape(self) -> Shape:
        return self._result

    def parameter_names(self) -> tuple[str, ...]:
        return self._names

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ProgramShape)
            and other._params == self._params
            and other._result == self._result
        )

    def __hash__(self) -> int:
        return hash((self._params, self._result))

    def __str__(self) -> str:
        ps = ", ".join(f"{n}: {s}" for n, s in zip(self._names, self._params, strict=False))
        return f"({ps}) -> {self._result}"

    def __repr__(self) -> str:
        return f"ProgramShape({self})"


def shape_from_pyval(value: Any) -> Shape:
    """The XLA shape of a Python or numpy value.

    numpy arrays and numpy scalars keep their dtype; Python ``bool`` is ``pred[]``, ``int`` is
    ``s32[]``, ``float`` is ``f32[]`` and ``complex`` is ``c64[]``; tuples (and lists of arrays)
    become tuple shapes, recursively.

    Raises
    ------
    DTypeError: for values of no XLA element type (strings, objects).
    """
    if isinstance(value, tuple):
        return Shape.tuple_shape(shape_from_pyval(v) for v in value)
    if isinstance(value, (np.ndarray, np.generic)):  # before float: np.float64 is a float subclass
        return Shape._make(dtype_to_etype(value.dtype), tuple(int(d) for d in value.shape))
    if isinstance(value, bool):
        return Shape.scalar_shape(np.bool_)
    if isinstance(value, int):
        if not -(2**31) <= value < 2**31:
            raise DTypeError(
                f"shape_from_pyval: Python int {value} does not fit s32; pass a numpy scalar such as np.int64({value})"
            )
        return Shape.scalar_shape(np.int32)
    if isinstance(value, float):
        return Shape.scalar_shape(np.float32)
    if isinstance(value, complex):
        return Shape.scalar_shape(np.complex64)
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return Shape.array_shape(dtype, shape)
    if isinstance(value, list):
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError, OverflowError, RecursionError):  # ragged, mixed, too deep
            arr = np.empty(0, dtype=object)
        if arr.dtype == object:
            raise DTypeError(f"shape_from_pyval: cannot take the shape of ragged or mixed list {show(value)}")
        if arr.dtype == np.int64 and arr.size and not (-(2**31) <= int(arr.min()) and int(arr.max()) < 2**31):
            raise DTypeError("shape_from_pyval: list of Python ints does not fit s32; pass a numpy int64 array")
        return shape_from_pyval(arr.astype(canonical_dtype(_python_default(arr.dtype))))
    raise DTypeError(f"shape_from_pyval: {type(value).__name__} value has no XLA shape")


def _python_default(dt: np.dtype[Any]) -> np.dtype[Any]:
    if dt == np.float64:
        return np.dtype(np.float32)
    if dt == np.int64:
        return np.dtype(np.int32)
    if dt == np.complex128:
        return np.dtype(np.complex64)
    return dt
