"""A loaded op's attributes read into the typed values the builder stores: one reader per kind.

Each row of the op table declares its attributes and their kinds (:attr:`xlasdk._optable.OpDef.attrs`,
:class:`~xlasdk._optable.AttrKind`), as StableHLO's ODS declares each attribute's type for its
generated builder. The importer (:mod:`xlasdk.program.graph_import`) keeps every attribute as the
module spelled it (:class:`MlirAttr`: the emitter writes it back unchanged);
:meth:`XlaOp.attr <xlasdk.builder.XlaOp.attr>` reads a *declared* one on first access with the
reader of its kind into the value the op's wrapper would have stored (``array<i64: 0, 1>`` ->
``(0, 1)``, ``#stablehlo<comparison_direction LT>`` -> ``ComparisonDirection.LT``,
``#stablehlo.dot<...>`` -> :class:`~xlasdk.attrs.DotDimensionNumbers`, a constant's ``dense<...>``
-> :class:`~xlasdk._mlir_attrs.DenseElements` of the op's shape...): the same typed value a built
node holds, so the tools read both alike. Each reader is the inverse of the spelling the emitter
prints for that kind (:func:`xlasdk._mlir_attrs.render`), through the MLIR bindings (no text
parsing here).

An attribute that no row declares (an opaque op's, an undeclared one such as ``mhlo.*`` or a
``result_accuracy``) reads as the MLIR bindings read it (:attr:`MlirAttr.value`), and a declared
one in a valid form that no wrapper builds (mesh-axes replica groups) as itself. A declared
attribute whose spelling does not fit its kind raises :class:`~xlasdk.errors.GraphImportError`
naming the op and the attribute: never a guess.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from .._jaxlib import mlir_graph as _mg
from .._mlir_attrs import F32, I32, UNIT, DenseElements, I64Elements, SpelledAttr
from .._optable import OPS, AttrKind, OpDef
from ..attrs import (
    ChannelHandle,
    ComparisonDirection,
    ComparisonType,
    ConvolutionDimensionNumbers,
    DotDimensionNumbers,
    FftType,
    GatherDimensionNumbers,
    PrecisionConfig,
    RandomAlgorithm,
    RandomDistribution,
    ScatterDimensionNumbers,
    TriangularSolveOptions_Transpose,
)
from ..attrs._base import _AttrEnum
from ..errors import GraphImportError

if TYPE_CHECKING:
    from ..builder import XlaOp
    from ..shape import Shape

__all__ = ["MlirAttr", "READERS", "declared_kind", "typed_attributes"]


class MlirAttr(SpelledAttr):
    """An attribute kept as the module spelled it (``array<i64: 0, 1>``,
    ``#stablehlo.comparison_direction<LT>``): emitted back unchanged. :meth:`typed` (what
    :meth:`XlaOp.attr <xlasdk.builder.XlaOp.attr>` calls) reads it once as the typed value of its
    declared kind; ``value`` reads it as a Python value through the MLIR bindings (see
    :attr:`Instruction.attributes <xlasdk.program.graph_import.Instruction.attributes>`)."""

    __slots__ = ("text", "_read")

    def __init__(self, text: str) -> None:
        self.text = text
        # the last reading: (the op's row, the attribute's name, the op's shape, the value or _Unread)
        self._read: tuple[OpDef, str, Shape, Any] | None = None

    def to_mlir(self) -> str:
        return self.text

    @property
    def value(self) -> Any:
        """``int``, ``float``, ``bool``, ``str``, a tuple (``array<...>``), a numpy array
        (``dense<...>``), a list or dict of those, or the spelling itself for dialect attributes."""
        return _mg.attribute_value(self.text)

    def typed(self, op: Any, name: str) -> Any:
        """This attribute, ``name`` of ``op``, as the tools read it: a declared one
        (:func:`declared_kind`) as the typed value its op's wrapper stores, read by its kind's
        reader (:data:`READERS`; itself for a valid spelling no wrapper builds); an undeclared
        one as the MLIR bindings read it (:attr:`value`). Read once (again only for an op of
        another row or shape).

        Raises
        ------
        GraphImportError: the attribute is declared and its spelling does not fit its kind.
        """
        got = self._read
        if got is None or got[0] is not op.opdef or got[1] != name or got[2] is not op.shape:
            kind = declared_kind(op, name)
            got = self._read = (op.opdef, name, op.shape, self.value if kind is None else _read(op, name, self, kind))
        if isinstance(got[3], _Unread):
            raise GraphImportError(got[3].why)
        return got[3]

    def __reduce__(self) -> tuple[type[MlirAttr], tuple[str]]:
        return MlirAttr, (self.text,)  # the spelling alone: a copy reads it again

    def __repr__(self) -> str:
        return f"MlirAttr({self.text if len(self.text) < 80 else self.text[:77] + '...'})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MlirAttr) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


class _Unread:
    """What :meth:`MlirAttr.typed` keeps of a declared attribute its kind's reader refused."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


def _int(a: MlirAttr, op: XlaOp) -> int:
    v = a.value
    if type(v) is not int or not a.text.rstrip().endswith(": i64"):
        raise ValueError("expected an i64 integer")
    return v


def _i32(a: MlirAttr, op: XlaOp) -> I32:
    v = a.value
    if type(v) is not int or not a.text.rstrip().endswith(": i32"):
        raise ValueError("expected an i32 integer")
    return I32(v)


def _bool(a: MlirAttr, op: XlaOp) -> bool:
    v = a.value
    if type(v) is not bool:
        raise ValueError("expected true or false")
    return v


def _ints(a: MlirAttr, op: XlaOp) -> tuple[int, ...]:
    v = a.value
    if not a.text.startswith("array<i64") or not isinstance(v, tuple) or any(type(x) is not int for x in v):
        raise ValueError("expected array<i64: ...>")
    return v


def _i64_elements(a: MlirAttr, op: XlaOp) -> I64Elements:
    v = a.value
    if not isinstance(v, np.ndarray) or v.dtype != np.int64:
        raise ValueError("expected dense<...> : tensor<...xi64>")
    return I64Elements(v)


def _elements(a: MlirAttr, op: XlaOp) -> DenseElements:
    v = a.value
    shape = op.shape
    if not isinstance(v, np.ndarray) or not shape.is_array():
        raise ValueError("expected dense<...> of the op's array shape")
    dtype = np.dtype(shape.numpy_dtype())
    if v.dtype != dtype or v.size not in (1, shape.size()):
        raise ValueError(f"expected dense<...> of {dtype} and {shape.size()} elements, got {v.dtype} of {v.size}")
    return DenseElements(np.ascontiguousarray(v).reshape(-1), shape)


def _f32(a: MlirAttr, op: XlaOp) -> F32:
    v = a.value
    if type(v) is not float or not a.text.rstrip().endswith(": f32"):
        raise ValueError("expected an f32 float")
    return F32(v)


_E = TypeVar("_E", bound=_AttrEnum)


def _enum(cls: type[_E]) -> Callable[[MlirAttr, XlaOp], _E]:
    """The reader of an enum attribute: the member whose spelling (``to_mlir()``) the text is."""

    def read(a: MlirAttr, op: XlaOp) -> _E:
        v = a.value
        member = cls.__members__.get(v) if isinstance(v, str) else None
        if member is None or member.to_mlir() != a.text.strip():
            raise ValueError(f"expected {cls._mlir_format().format('...')}")
        return member

    return read


_DOT_FIELDS = ("lhs_batching_dimensions", "rhs_batching_dimensions", "lhs_contracting_dimensions",
               "rhs_contracting_dimensions")


def _dot_dimension_numbers(a: MlirAttr, op: XlaOp) -> DotDimensionNumbers:
    v = a.value
    if not a.text.startswith("#stablehlo.dot<") or not isinstance(v, dict) or set(v) - set(_DOT_FIELDS):
        raise ValueError("expected #stablehlo.dot<...>")
    get = {k: [int(x) for x in v.get(k, ())] for k in _DOT_FIELDS}
    return DotDimensionNumbers(
        lhs_contracting_dimensions=get["lhs_contracting_dimensions"],
        rhs_contracting_dimensions=get["rhs_contracting_dimensions"],
        lhs_batch_dimensions=get["lhs_batching_dimensions"],
        rhs_batch_dimensions=get["rhs_batching_dimensions"],
    )


_CONV_INTS = ("input_batch_dimension", "input_feature_dimension", "kernel_input_feature_dimension",
              "kernel_output_feature_dimension", "output_batch_dimension", "output_feature_dimension")
_CONV_LISTS = ("input_spatial_dimensions", "kernel_spatial_dimensions", "output_spatial_dimensions")


def _conv_dimension_numbers(a: MlirAttr, op: XlaOp) -> ConvolutionDimensionNumbers:
    v = a.value
    if not a.text.startswith("#stablehlo.conv<") or not isinstance(v, dict) or set(v) != {*_CONV_INTS, *_CONV_LISTS}:
        raise ValueError("expected #stablehlo.conv<...>")
    if any(type(v[k]) is not int for k in _CONV_INTS) or any(
        not isinstance(v[k], tuple) or any(type(x) is not int for x in v[k]) for k in _CONV_LISTS
    ):
        raise ValueError("expected #stablehlo.conv<...> of integer dimensions")
    fields: dict[str, Any] = {k: v[k] if k in _CONV_INTS else list(v[k]) for k in v}
    return ConvolutionDimensionNumbers(**fields)


def _fields(a: MlirAttr, mnemonic: str, names: dict[str, str]) -> dict[str, Any]:
    """The fields of ``#stablehlo.<mnemonic><...>`` by the attribute class's names (``names``: the
    bindings' name -> the class's)."""
    v = a.value
    if not a.text.startswith(f"#stablehlo.{mnemonic}<") or not isinstance(v, dict) or set(v) - set(names):
        raise ValueError(f"expected #stablehlo.{mnemonic}<...>")
    out: dict[str, Any] = {}
    for k, x in v.items():
        if type(x) is int:
            out[names[k]] = x
        elif isinstance(x, tuple) and all(type(y) is int for y in x):
            out[names[k]] = list(x)
        else:
            raise ValueError(f"expected #stablehlo.{mnemonic}<...> of integer dimensions")
    return out


_GATHER = {k: k for k in ("offset_dims", "collapsed_slice_dims", "start_index_map", "index_vector_dim",
                          "operand_batching_dims", "start_indices_batching_dims")}
_SCATTER = {**{k: k for k in ("update_window_dims", "inserted_window_dims", "index_vector_dim", "input_batching_dims",
                              "scatter_indices_batching_dims")},
            "scattered_dims_to_operand_dims": "scatter_dims_to_operand_dims"}


def _gather_dimension_numbers(a: MlirAttr, op: XlaOp) -> GatherDimensionNumbers:
    return GatherDimensionNumbers(**_fields(a, "gather", _GATHER))


def _scatter_dimension_numbers(a: MlirAttr, op: XlaOp) -> ScatterDimensionNumbers:
    return ScatterDimensionNumbers(**_fields(a, "scatter", _SCATTER))


def _replica_groups(a: MlirAttr, op: XlaOp) -> Any:
    if a.text.startswith("#stablehlo.replica_group_mesh_axes<"):
        return a  # a valid form no wrapper builds: kept as spelled
    return _i64_elements(a, op)


def _unit(a: MlirAttr, op: XlaOp) -> Any:
    if a.text.strip() != "unit":
        raise ValueError("expected a unit attribute")
    return UNIT


def _channel_handle(a: MlirAttr, op: XlaOp) -> Any:
    v = a.value
    if (not a.text.startswith("#stablehlo.channel_handle<") or not isinstance(v, dict)
            or set(v) != {"handle", "channel_type"} or any(type(x) is not int for x in v.values())):
        raise ValueError("expected #stablehlo.channel_handle<handle = N, type = T>")
    return ChannelHandle(v["handle"], v["channel_type"])


def _precision_config(a: MlirAttr, op: XlaOp) -> PrecisionConfig:
    v = a.value
    if not isinstance(v, list) or not all(isinstance(p, str) for p in v) or "#stablehlo<precision " not in a.text:
        raise ValueError("expected [#stablehlo<precision ...>, ...]")
    return PrecisionConfig(list(v))


#: One reader per kind: ``reader(attribute as spelled, op) -> typed value`` (ValueError when the
#: spelling does not fit the kind; the attribute itself for a valid spelling that no wrapper builds,
#: such as mesh-axes replica groups).
READERS: dict[AttrKind, Callable[[MlirAttr, XlaOp], Any]] = {
    AttrKind.INT: _int,
    AttrKind.I32: _i32,
    AttrKind.BOOL: _bool,
    AttrKind.INTS: _ints,
    AttrKind.I64_ELEMENTS: _i64_elements,
    AttrKind.ELEMENTS: _elements,
    AttrKind.F32: _f32,
    AttrKind.UNIT: _unit,
    AttrKind.REPLICA_GROUPS: _replica_groups,
    AttrKind.CHANNEL_HANDLE: _channel_handle,
    AttrKind.COMPARISON_DIRECTION: _enum(ComparisonDirection),
    AttrKind.COMPARISON_TYPE: _enum(ComparisonType),
    AttrKind.FFT_TYPE: _enum(FftType),
    AttrKind.RNG_ALGORITHM: _enum(RandomAlgorithm),
    AttrKind.RNG_DISTRIBUTION: _enum(RandomDistribution),
    AttrKind.TRANSPOSE: _enum(TriangularSolveOptions_Transpose),
    AttrKind.DOT_DIMENSION_NUMBERS: _dot_dimension_numbers,
    AttrKind.PRECISION_CONFIG: _precision_config,
    AttrKind.CONV_DIMENSION_NUMBERS: _conv_dimension_numbers,
    AttrKind.GATHER_DIMENSION_NUMBERS: _gather_dimension_numbers,
    AttrKind.SCATTER_DIMENSION_NUMBERS: _scatter_dimension_numbers,
}


def _read(op: XlaOp, name: str, attr: MlirAttr, kind: AttrKind) -> Any:
    """``attr`` read by ``kind``'s reader, or :class:`_Unread` saying why it does not fit."""
    try:
        return READERS[kind](attr, op)
    except (ValueError, KeyError, TypeError) as e:
        return _Unread(f"{op.opdef.name}: attribute {name} = {attr.text[:200]}: not a {kind.value} attribute ({e})")


def declared_kind(op: XlaOp, name: str) -> AttrKind | None:
    """The kind ``op``'s row declares for attribute ``name`` (None: not declared). A loaded op of
    a table name whose row's flags did not fit it has an opaque row of its own; the table row of
    its name declares its attributes (that row's evaluation rule is the one it runs)."""
    kind = op.opdef.attr_kind(name)
    if kind is None:
        row = OPS.get(op.opdef.name)
        if row is not None and row is not op.opdef:
            kind = row.attr_kind(name)
    return kind


def typed_attributes(op: XlaOp) -> dict[str, Any]:
    """``op``'s attributes as a dict: each one its row declares as the typed value a built op holds
    (:meth:`XlaOp.attr <xlasdk.builder.XlaOp.attr>`), the others as stored (a loaded op's as the
    module spelled them, :class:`MlirAttr`).

    Raises
    ------
    GraphImportError: a declared attribute whose spelling does not fit its kind.
    """
    return {k: op.attr(k) if declared_kind(op, k) is not None else v for k, v in op.attrs.items()}
