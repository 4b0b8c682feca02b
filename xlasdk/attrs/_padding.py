"""``PaddingConfig`` and the window padding converters."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .._proto import _int, _int_list, _ProtoLike
from .._where import where
from ..errors import ShapeError
from ._base import _dim
from ._enums import PaddingType

# --------------------------------------------------------------------------------------------
# Padding.


class PaddingConfigDimension(_ProtoLike):
    """Padding of one dimension for Pad (XLA ``PaddingConfig.PaddingConfigDimension`` proto).

    Attributes
    ----------
    edge_padding_low, edge_padding_high : int
        Elements added before / after (negative values remove elements).
    interior_padding : int
        Elements inserted between each pair of elements, >= 0.

    Raises
    ------
    ShapeError
        On a non-int value or a negative ``interior_padding``.
    """

    _FIELDS = ("edge_padding_low", "edge_padding_high", "interior_padding")

    def __init__(self, edge_padding_low: int = 0, edge_padding_high: int = 0, interior_padding: int = 0):
        self.edge_padding_low = _int(edge_padding_low, "edge_padding_low")
        self.edge_padding_high = _int(edge_padding_high, "edge_padding_high")
        self.interior_padding = _dim(interior_padding, "interior_padding")

    def validate(self) -> tuple[int, int, int]:
        """``(low, high, interior)`` checked; raises ShapeError."""
        return (
            _int(self.edge_padding_low, "edge_padding_low"),
            _int(self.edge_padding_high, "edge_padding_high"),
            _dim(self.interior_padding, "interior_padding"),
        )


class PaddingConfig(_ProtoLike):
    """Padding of every dimension for Pad (XLA ``PaddingConfig`` proto).

    StableHLO has no single attribute for it: ``stablehlo.pad`` takes three ``array<i64: ...>``
    attributes, given by :meth:`to_mlir`.

    Attributes
    ----------
    dimensions : list of PaddingConfigDimension
        One entry per operand dimension; appendable.

    Raises
    ------
    ShapeError
        If an entry is not a ``PaddingConfigDimension`` or holds invalid values.
    """

    _FIELDS = ("dimensions",)

    def __init__(self, dimensions: Iterable[PaddingConfigDimension] | None = None):
        self.dimensions: list[PaddingConfigDimension] = list(dimensions if dimensions is not None else ())
        self.validate()

    def validate(self) -> list[tuple[int, int, int]]:
        """``(low, high, interior)`` per dimension, checked; raises ShapeError."""
        out = []
        for i, d in enumerate(self.dimensions):
            if not isinstance(d, PaddingConfigDimension):
                raise ShapeError(
                    f"PaddingConfig.dimensions[{i}] must be a PaddingConfigDimension, got {type(d).__name__}"
                )
            out.append(d.validate())
        return out

    def lows(self) -> list[int]:
        """``edge_padding_low`` of every dimension."""
        return [t[0] for t in self.validate()]

    def highs(self) -> list[int]:
        """``edge_padding_high`` of every dimension."""
        return [t[1] for t in self.validate()]

    def interiors(self) -> list[int]:
        """``interior_padding`` of every dimension."""
        return [t[2] for t in self.validate()]

    def to_mlir(self) -> str:
        """The three attribute-dictionary entries of ``stablehlo.pad``:
        ``edge_padding_low = array<i64: ...>, edge_padding_high = ..., interior_padding = ...``."""
        triples = self.validate()

        def arr(values: Iterable[int]) -> str:
            body = ", ".join(str(v) for v in values)
            return f"array<i64: {body}>" if body else "array<i64>"

        return (
            f"edge_padding_low = {arr(t[0] for t in triples)}, "
            f"edge_padding_high = {arr(t[1] for t in triples)}, "
            f"interior_padding = {arr(t[2] for t in triples)}"
        )


def make_padding_config(padding_config: PaddingConfig | Iterable[Sequence[int]]) -> PaddingConfig:
    """A ``PaddingConfig`` from ``(lo, hi, interior)`` triples or ``(lo, hi)`` pairs (interior 0).

    A ``PaddingConfig`` is returned as it is (after validation).

    Raises
    ------
    ShapeError
        If an entry is not a pair or triple of ints, or an interior padding is negative; the
        message names the dimension (``padding_config[0] (dimension 0)``) and the caller's line.
    """
    if isinstance(padding_config, PaddingConfig):
        try:
            padding_config.validate()
        except ShapeError as e:
            raise ShapeError(f"make_padding_config: {e}{where()}") from None
        return padding_config
    if isinstance(padding_config, (str, bytes)) or not isinstance(padding_config, Iterable):
        raise ShapeError(
            f"make_padding_config: padding_config must be a sequence of (lo, hi[, interior]), "
            f"got {padding_config!r}{where()}"
        )
    dims: list[PaddingConfigDimension] = []
    for i, entry in enumerate(padding_config):
        if isinstance(entry, PaddingConfigDimension):
            dims.append(entry)
            continue
        if isinstance(entry, (str, bytes)) or not isinstance(entry, Iterable):
            raise ShapeError(f"make_padding_config: padding_config[{i}] (dimension {i}) must be (lo, hi) or "
                             f"(lo, hi, interior), got {entry!r}{where()}")
        values = list(entry)
        if len(values) not in (2, 3):
            raise ShapeError(f"make_padding_config: padding_config[{i}] (dimension {i}) must be (lo, hi) or "
                             f"(lo, hi, interior), got {entry!r}{where()}")
        try:
            dims.append(
                PaddingConfigDimension(*(_int(v, f"padding_config[{i}][{j}]") for j, v in enumerate(values)))
            )
        except ShapeError as e:
            raise ShapeError(f"make_padding_config: padding_config[{i}] (dimension {i}): {e}{where()}") from None
    return PaddingConfig(dims)


def window_padding_type_to_pad_values(
    padding_type: PaddingType | str,
    lhs_dims: Sequence[int],
    rhs_dims: Sequence[int],
    window_strides: Sequence[int],
) -> list[tuple[int, int]]:
    """Explicit ``(lo, hi)`` padding per spatial dimension for a ``PaddingType``, as in XLA.

    ``SAME`` makes the output ``ceil(in / stride)`` long: the total padding is
    ``max((ceil(in / stride) - 1) * stride + window - in, 0)``, split as
    ``(total // 2, total - total // 2)`` (the extra element on the high side). ``VALID`` is all
    zeros.

    Parameters
    ----------
    padding_type : PaddingType or "SAME" / "VALID"
    lhs_dims : sequence of int
        Input sizes of the spatial dimensions.
    rhs_dims : sequence of int
        Window (kernel) sizes of the spatial dimensions.
    window_strides : sequence of int
        Strides, >= 1.

    Raises
    ------
    ShapeError
        On an unknown padding type, sequences of different lengths, negative sizes or strides < 1.
    """
    kind = PaddingType.parse(padding_type)
    ins = _int_list(lhs_dims, "lhs_dims", 0)
    windows = _int_list(rhs_dims, "rhs_dims", 0)
    strides = _int_list(window_strides, "window_strides", 1)
    if not len(ins) == len(windows) == len(strides):
        raise ShapeError(
            f"lhs_dims {ins}, rhs_dims {windows} and window_strides {strides} must have the same length"
        )
    if kind is PaddingType.VALID:
        return [(0, 0)] * len(strides)
    pads = []
    for size, window, stride in zip(ins, windows, strides, strict=True):
        out_size = -(-size // stride)
        total = max((out_size - 1) * stride + window - size, 0)
        pads.append((total // 2, total - total // 2))
    return pads


#: The padding forms the windowed ops take (``ConvGeneralDilated``, ``ReduceWindow``...):
#: ``PaddingType.SAME`` / ``VALID``, their names (``"SAME"``), or one ``(lo, hi)`` pair per
#: spatial dimension (negative values crop).
PaddingLike = PaddingType | str | Iterable[Iterable[int]]


def convert_padding(
    padding: PaddingLike,
    lhs_dims: Sequence[int],
    rhs_dims: Sequence[int],
    window_strides: Sequence[int],
) -> list[tuple[int, int]]:
    """``(lo, hi)`` per spatial dimension from a ``PaddingType``, ``"SAME"``/``"VALID"`` or pairs.

    Pairs may be negative (cropping). ``lhs_dims``, ``rhs_dims`` and ``window_strides`` are the
    spatial input sizes, window sizes and strides (see :func:`window_padding_type_to_pad_values`).

    Raises
    ------
    ShapeError
        On an unknown padding name, a number of pairs different from ``len(lhs_dims)``, or an
        entry that is not a pair of ints.
    """
    if isinstance(padding, (PaddingType, str)):
        return window_padding_type_to_pad_values(padding, lhs_dims, rhs_dims, window_strides)
    if not isinstance(padding, Iterable):
        raise ShapeError(
            f"padding must be 'SAME', 'VALID', a PaddingType or a sequence of (lo, hi), got {padding!r}"
        )
    pairs = []
    for i, entry in enumerate(padding):
        if isinstance(entry, (str, bytes)) or not isinstance(entry, Iterable):
            raise ShapeError(f"padding[{i}] must be a (lo, hi) pair of ints, got {entry!r}")
        values = list(entry)
        if len(values) != 2:
            raise ShapeError(f"padding[{i}] must be a (lo, hi) pair of ints, got {entry!r}")
        pairs.append((_int(values[0], f"padding[{i}][0]"), _int(values[1], f"padding[{i}][1]")))
    n = len(lhs_dims)
    if len(pairs) != n:
        raise ShapeError(f"padding has {len(pairs)} (lo, hi) pairs, expected one per spatial dimension ({n})")
    return pairs
