"""Dot, convolution, gather and scatter dimension numbers and their converters."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from .._proto import _ProtoLike
from ..errors import ShapeError
from ._base import _dim, _dims, _disjoint, _hlo_list, _mlir_list, _same_len

# --------------------------------------------------------------------------------------------
# Dot.


class DotDimensionNumbers(_ProtoLike):
    """Contracting and batch dimensions of DotGeneral (XLA ``DotDimensionNumbers`` proto;
    StableHLO ``#stablehlo.dot<...>``).

    Attributes
    ----------
    lhs_contracting_dimensions, rhs_contracting_dimensions : list of int
        Dimensions summed over, paired in order (equal lengths).
    lhs_batch_dimensions, rhs_batch_dimensions : list of int
        Batch dimensions, paired in order (equal lengths), disjoint from the contracting ones.

    Raises
    ------
    ShapeError
        On a negative or repeated dimension, unequal lhs/rhs lengths, or a dimension that is
        both batch and contracting.
    """

    _FIELDS = (
        "lhs_contracting_dimensions",
        "rhs_contracting_dimensions",
        "lhs_batch_dimensions",
        "rhs_batch_dimensions",
    )

    def __init__(
        self,
        lhs_contracting_dimensions: Iterable[int] = (),
        rhs_contracting_dimensions: Iterable[int] = (),
        lhs_batch_dimensions: Iterable[int] = (),
        rhs_batch_dimensions: Iterable[int] = (),
    ):
        self.lhs_contracting_dimensions = _dims(lhs_contracting_dimensions, "lhs_contracting_dimensions")
        self.rhs_contracting_dimensions = _dims(rhs_contracting_dimensions, "rhs_contracting_dimensions")
        self.lhs_batch_dimensions = _dims(lhs_batch_dimensions, "lhs_batch_dimensions")
        self.rhs_batch_dimensions = _dims(rhs_batch_dimensions, "rhs_batch_dimensions")
        self.validate()

    def validate(self) -> None:
        """Check the fields (they may have been edited in place); raises ShapeError."""
        lc = _dims(self.lhs_contracting_dimensions, "lhs_contracting_dimensions")
        rc = _dims(self.rhs_contracting_dimensions, "rhs_contracting_dimensions")
        lb = _dims(self.lhs_batch_dimensions, "lhs_batch_dimensions")
        rb = _dims(self.rhs_batch_dimensions, "rhs_batch_dimensions")
        _same_len(lc, rc, "lhs_contracting_dimensions", "rhs_contracting_dimensions")
        _same_len(lb, rb, "lhs_batch_dimensions", "rhs_batch_dimensions")
        _disjoint(lb, lc, "lhs_batch_dimensions", "lhs_contracting_dimensions")
        _disjoint(rb, rc, "rhs_batch_dimensions", "rhs_contracting_dimensions")

    def to_mlir(self) -> str:
        """``#stablehlo.dot<lhs_batching_dimensions = [...], ...>`` (empty lists omitted)."""
        self.validate()
        fields = (
            ("lhs_batching_dimensions", self.lhs_batch_dimensions),
            ("rhs_batching_dimensions", self.rhs_batch_dimensions),
            ("lhs_contracting_dimensions", self.lhs_contracting_dimensions),
            ("rhs_contracting_dimensions", self.rhs_contracting_dimensions),
        )
        return "#stablehlo.dot<" + ", ".join(f"{k} = {_mlir_list(v)}" for k, v in fields if len(v)) + ">"

    def to_hlo(self) -> str:
        """HLO's attributes: ``lhs_batch_dims={..}`` (when not empty), ``lhs_contracting_dims={..}``
        (always), then the same for rhs."""
        self.validate()
        parts = []
        for side in ("lhs", "rhs"):
            batch = getattr(self, f"{side}_batch_dimensions")
            if len(batch):
                parts.append(f"{side}_batch_dims={_hlo_list(batch)}")
            parts.append(f"{side}_contracting_dims={_hlo_list(getattr(self, f'{side}_contracting_dimensions'))}")
        return ", ".join(parts)


DotDimensionNumbersLike = (
    DotDimensionNumbers
    | tuple[tuple[Sequence[int], Sequence[int]], tuple[Sequence[int], Sequence[int]]]
    | Sequence[Any]
)


def make_dot_dimension_numbers(dimension_numbers: DotDimensionNumbersLike) -> DotDimensionNumbers:
    """A ``DotDimensionNumbers`` from ``((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))``.

    A ``DotDimensionNumbers`` is returned as it is (after validation).

    Raises
    ------
    ShapeError
        If the nesting is not two pairs of int sequences, or the dimensions are invalid.
    """
    if isinstance(dimension_numbers, DotDimensionNumbers):
        dimension_numbers.validate()
        return dimension_numbers
    try:
        (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    except (TypeError, ValueError):
        raise ShapeError(
            "dot dimension_numbers must be ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)) "
            f"or a DotDimensionNumbers, got {dimension_numbers!r}"
        ) from None
    return DotDimensionNumbers(
        lhs_contracting_dimensions=lhs_contract,
        rhs_contracting_dimensions=rhs_contract,
        lhs_batch_dimensions=lhs_batch,
        rhs_batch_dimensions=rhs_batch,
    )


# --------------------------------------------------------------------------------------------
# Convolution.


class ConvolutionDimensionNumbers(_ProtoLike):
    """Layout of the operands of a convolution (XLA ``ConvolutionDimensionNumbers`` proto;
    StableHLO ``#stablehlo.conv<...>``).

    Attributes
    ----------
    input_batch_dimension, input_feature_dimension : int
        Batch (N) and feature (C) dimensions of the input (lhs).
    input_spatial_dimensions : list of int
        Spatial dimensions of the input, in window order.
    kernel_input_feature_dimension, kernel_output_feature_dimension : int
        Input (I) and output (O) feature dimensions of the kernel (rhs).
    kernel_spatial_dimensions : list of int
        Spatial dimensions of the kernel, in window order.
    output_batch_dimension, output_feature_dimension : int
        Batch and feature dimensions of the output.
    output_spatial_dimensions : list of int
        Spatial dimensions of the output, in window order.

    Raises
    ------
    ShapeError
        On a negative dimension, a dimension used twice within one operand, or spatial lists
        of different lengths.
    """

    _FIELDS = (
        "input_batch_dimension",
        "input_feature_dimension",
        "input_spatial_dimensions",
        "kernel_input_feature_dimension",
        "kernel_output_feature_dimension",
        "kernel_spatial_dimensions",
        "output_batch_dimension",
        "output_feature_dimension",
        "output_spatial_dimensions",
    )

    def __init__(
        self,
        input_batch_dimension: int = 0,
        input_feature_dimension: int = 0,
        input_spatial_dimensions: Iterable[int] = (),
        kernel_input_feature_dimension: int = 0,
        kernel_output_feature_dimension: int = 0,
        kernel_spatial_dimensions: Iterable[int] = (),
        output_batch_dimension: int = 0,
        output_feature_dimension: int = 0,
        output_spatial_dimensions: Iterable[int] = (),
    ):
        # Scalar fields default to 0 like proto fields; so an empty object is only checked on use.
        self.input_batch_dimension = _dim(input_batch_dimension, "input_batch_dimension")
        self.input_feature_dimension = _dim(input_feature_dimension, "input_feature_dimension")
        self.input_spatial_dimensions = _dims(input_spatial_dimensions, "input_spatial_dimensions")
        self.kernel_input_feature_dimension = _dim(
            kernel_input_feature_dimension, "kernel_input_feature_dimension"
        )
        self.kernel_output_feature_dimension = _dim(
            kernel_output_feature_dimension, "kernel_output_feature_dimension"
        )
        self.kernel_spatial_dimensions = _dims(kernel_spatial_dimensions, "kernel_spatial_dimensions")
        self.output_batch_dimension = _dim(output_batch_dimension, "output_batch_dimension")
        self.output_feature_dimension = _dim(output_feature_dimension, "output_feature_dimension")
        self.output_spatial_dimensions = _dims(output_spatial_dimensions, "output_spatial_dimensions")

    def validate(self) -> None:
        """Check the fields as a whole (each operand's dimensions distinct); raises ShapeError."""
        groups = (
            ("input", ("input_batch_dimension", "input_feature_dimension"), "input_spatial_dimensions"),
            (
                "kernel",
                ("kernel_input_feature_dimension", "kernel_output_feature_dimension"),
                "kernel_spatial_dimensions",
            ),
            ("output", ("output_batch_dimension", "output_feature_dimension"), "output_spatial_dimensions"),
        )
        n_spatial = set()
        for operand, scalars, spatial in groups:
            dims = [_dim(getattr(self, f), f) for f in scalars] + _dims(getattr(self, spatial), spatial)
            if len(set(dims)) != len(dims):
                listed = ", ".join(f"{f}={getattr(self, f)}" for f in scalars)
                raise ShapeError(
                    f"ConvolutionDimensionNumbers: the {operand} dimensions repeat a dimension "
                    f"({listed}, {spatial}={list(getattr(self, spatial))})"
                )
            n_spatial.add(len(dims) - 2)
        if len(n_spatial) != 1:
            raise ShapeError(
                "ConvolutionDimensionNumbers: input, kernel and output spatial dimensions must have the same "
                f"length, got {list(self.input_spatial_dimensions)}, {list(self.kernel_spatial_dimensions)}, "
                f"{list(self.output_spatial_dimensions)}"
            )

    def to_mlir(self) -> str:
        """``#stablehlo.conv<raw input_batch_dimension = 0, ...>`` (every field spelled out)."""
        self.validate()
        body = ", ".join(
            f"{f} = {_mlir_list(v) if isinstance(v, (list, tuple)) else v}"
            for f, v in zip(self._FIELDS, self._values(), strict=True)
        )
        return f"#stablehlo.conv<raw {body}>"

    def to_hlo(self) -> str:
        """HLO's ``dim_labels`` value: ``b01f_01io->b01f`` (batch/feature/spatial letters by position)."""
        self.validate()
        n = len(self.input_spatial_dimensions)

        def labels(first: tuple[int, str], second: tuple[int, str], spatial: Sequence[int]) -> str:
            out = [""] * (n + 2)
            out[first[0]], out[second[0]] = first[1], second[1]
            for k, d in enumerate(spatial):
                out[d] = str(k)
            return "".join(out)

        return (
            labels(
                (self.input_batch_dimension, "b"), (self.input_feature_dimension, "f"), self.input_spatial_dimensions
            )
            + "_"
            + labels(
                (self.kernel_output_feature_dimension, "o"), (self.kernel_input_feature_dimension, "i"),
                self.kernel_spatial_dimensions,
            )
            + "->"
            + labels(
                (self.output_batch_dimension, "b"), (self.output_feature_dimension, "f"), self.output_spatial_dimensions
            )
        )


ConvDimensionNumbersLike = ConvolutionDimensionNumbers | Sequence[str] | None


def _layout_positions(spec: Any, what: str, required: str, rank: int) -> tuple[dict[str, int], list[str]]:
    """Positions of the ``required`` letters in a layout string and its other (spatial) letters."""
    if not isinstance(spec, str):
        raise ShapeError(f"{what} layout must be a string like 'NCHW', got {type(spec).__name__} {spec!r}")
    if len(spec) != rank:
        raise ShapeError(
            f"{what} layout {spec!r} must have {rank} letters (2 + number of spatial dimensions)"
        )
    if len(set(spec)) != len(spec):
        raise ShapeError(f"{what} layout {spec!r} repeats a letter")
    missing = [c for c in required if c not in spec]
    if missing:
        raise ShapeError(f"{what} layout {spec!r} must contain each of {', '.join(required)} exactly once")
    return {c: spec.index(c) for c in required}, [c for c in spec if c not in required]


def make_convolution_dimension_numbers(
    dimension_numbers: ConvDimensionNumbersLike, num_spatial_dimensions: int
) -> ConvolutionDimensionNumbers:
    """``ConvolutionDimensionNumbers`` from layout strings, like the former xla_client.

    Parameters
    ----------
    dimension_numbers : (lhs, rhs, out) strings, None or ConvolutionDimensionNumbers
        Layout strings such as ``("NCHW", "OIHW", "NCHW")`` or ``("NHWC", "HWIO", "NHWC")``.
        In ``lhs`` and ``out``, ``N`` is the batch and ``C`` the feature dimension; in ``rhs``,
        ``O`` is the output and ``I`` the input feature dimension; any other letters are
        spatial. The kernel's spatial dimensions are taken in the order their letters appear in
        ``rhs``, and the input and output spatial dimensions are matched to them by letter
        (so all three strings must use the same spatial letters). None means ``NC`` + spatial,
        ``OI`` + spatial, ``NC`` + spatial.
    num_spatial_dimensions : int
        Number of spatial dimensions (each string has ``num_spatial_dimensions + 2`` letters).

    Raises
    ------
    ShapeError
        On a string of the wrong length, missing or repeated letters, spatial letters that
        differ between the strings, or an existing object with the wrong number of spatial
        dimensions.
    """
    nd = _dim(num_spatial_dimensions, "num_spatial_dimensions")
    if dimension_numbers is None:
        spatial = list(range(2, 2 + nd))
        return ConvolutionDimensionNumbers(
            input_batch_dimension=0,
            input_feature_dimension=1,
            input_spatial_dimensions=spatial,
            kernel_output_feature_dimension=0,
            kernel_input_feature_dimension=1,
            kernel_spatial_dimensions=spatial,
            output_batch_dimension=0,
            output_feature_dimension=1,
            output_spatial_dimensions=spatial,
        )
    if isinstance(dimension_numbers, ConvolutionDimensionNumbers):
        dimension_numbers.validate()
        if len(dimension_numbers.input_spatial_dimensions) != nd:
            raise ShapeError(
                f"ConvolutionDimensionNumbers has {len(dimension_numbers.input_spatial_dimensions)} spatial "
                f"dimensions, expected num_spatial_dimensions={nd}"
            )
        return dimension_numbers
    if isinstance(dimension_numbers, str) or not isinstance(dimension_numbers, Sequence):
        raise ShapeError(
            "convolution dimension_numbers must be (lhs, rhs, out) layout strings such as "
            f"('NCHW', 'OIHW', 'NCHW'), None or a ConvolutionDimensionNumbers, got {dimension_numbers!r}"
        )
    if len(dimension_numbers) != 3:
        raise ShapeError(
            "convolution dimension_numbers must be 3 layout strings (lhs, rhs, out), "
            f"got {dimension_numbers!r}"
        )
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    lhs, lhs_sp = _layout_positions(lhs_spec, "lhs", "NC", nd + 2)
    rhs, rhs_sp = _layout_positions(rhs_spec, "rhs", "OI", nd + 2)
    out, out_sp = _layout_positions(out_spec, "out", "NC", nd + 2)
    for what, spec, letters in (("lhs", lhs_spec, lhs_sp), ("out", out_spec, out_sp)):
        if set(letters) != set(rhs_sp):
            raise ShapeError(
                f"{what} layout {spec!r} has spatial letters {''.join(letters)!r} but rhs layout "
                f"{rhs_spec!r} has {''.join(rhs_sp)!r}; they must be the same letters"
            )
    return ConvolutionDimensionNumbers(
        input_batch_dimension=lhs["N"],
        input_feature_dimension=lhs["C"],
        input_spatial_dimensions=[lhs_spec.index(c) for c in rhs_sp],
        kernel_output_feature_dimension=rhs["O"],
        kernel_input_feature_dimension=rhs["I"],
        kernel_spatial_dimensions=[rhs_spec.index(c) for c in rhs_sp],
        output_batch_dimension=out["N"],
        output_feature_dimension=out["C"],
        output_spatial_dimensions=[out_spec.index(c) for c in rhs_sp],
    )


# --------------------------------------------------------------------------------------------
# Gather and scatter.


class _GatherScatterDimensionNumbers(_ProtoLike):
    """What Gather and Scatter dimension numbers share: six fields of the same roles under
    different names, checked the same way and printed as ``#stablehlo.<_MNEMONIC><...>``.

    A subclass lists its fields in ``_FIELDS`` in this order of roles: the window dimensions
    (ascending), the operand dimensions absent from the window (ascending), the operand dimension
    each index-vector component indexes, ``index_vector_dim``, the operand batching dimensions
    (ascending) and the batching dimensions of the indices.
    """

    _MNEMONIC: ClassVar[str]

    def validate(self) -> None:
        """Check the fields (they may have been edited in place); raises ShapeError."""
        window, dropped, index_map, ivd_name, op_batching, idx_batching = self._FIELDS
        _dims(getattr(self, window), window, sort=True)
        dropped_dims = _dims(getattr(self, dropped), dropped, sort=True)
        index_map_dims = _dims(getattr(self, index_map), index_map)
        ivd = _dim(getattr(self, ivd_name), ivd_name)
        op_batch = _dims(getattr(self, op_batching), op_batching, sort=True)
        idx_batch = _dims(getattr(self, idx_batching), idx_batching)
        _disjoint(dropped_dims, op_batch, dropped, op_batching)
        _disjoint(index_map_dims, op_batch, index_map, op_batching)
        if ivd in idx_batch:
            raise ShapeError(f"{idx_batching} {idx_batch} must not contain {ivd_name} {ivd}")
        _same_len(op_batch, idx_batch, op_batching, idx_batching)

    def to_mlir(self) -> str:
        """``#stablehlo.gather<...>`` / ``#stablehlo.scatter<...>``: the window, dropped and
        batching lists, the index map, then ``index_vector_dim = n`` (empty lists omitted)."""
        self.validate()
        window, dropped, index_map, ivd_name, op_batching, idx_batching = self._FIELDS
        lists = (window, dropped, op_batching, idx_batching, index_map)
        parts = [f"{k} = {_mlir_list(v)}" for k in lists if len(v := getattr(self, k))]
        parts.append(f"{ivd_name} = {_dim(getattr(self, ivd_name), ivd_name)}")
        return f"#stablehlo.{self._MNEMONIC}<" + ", ".join(parts) + ">"

    def to_hlo(self) -> str:
        """HLO's attributes: the window, dropped and index-map lists (always), the batching lists
        (when not empty), then ``index_vector_dim=n``."""
        self.validate()
        window, dropped, index_map, ivd_name, op_batching, idx_batching = self._FIELDS
        parts = [f"{k}={_hlo_list(getattr(self, k))}" for k in (window, dropped, index_map)]
        parts += [f"{k}={_hlo_list(v)}" for k in (op_batching, idx_batching) if len(v := getattr(self, k))]
        parts.append(f"{ivd_name}={_dim(getattr(self, ivd_name), ivd_name)}")
        return ", ".join(parts)


class GatherDimensionNumbers(_GatherScatterDimensionNumbers):
    """Dimension numbers of Gather (XLA ``GatherDimensionNumbers`` proto;
    StableHLO ``#stablehlo.gather<...>``).

    Attributes
    ----------
    offset_dims : list of int
        Output dimensions that index into a slice (ascending).
    collapsed_slice_dims : list of int
        Operand dimensions whose slice size is 1 and which are dropped (ascending).
    start_index_map : list of int
        Operand dimension each start-index component indexes.
    index_vector_dim : int
        Dimension of ``start_indices`` holding the index vectors.
    operand_batching_dims : list of int
        Operand batch dimensions (ascending), paired with ``start_indices_batching_dims``.
    start_indices_batching_dims : list of int
        Batch dimensions of ``start_indices``.

    Raises
    ------
    ShapeError
        On negative or repeated dimensions, unsorted lists that must be ascending, an operand
        dimension both collapsed / mapped and batching, ``index_vector_dim`` among the batching
        dimensions of the indices, or batching lists of unequal length.
    """

    _FIELDS = (
        "offset_dims",
        "collapsed_slice_dims",
        "start_index_map",
        "index_vector_dim",
        "operand_batching_dims",
        "start_indices_batching_dims",
    )
    _MNEMONIC = "gather"

    def __init__(
        self,
        offset_dims: Iterable[int] = (),
        collapsed_slice_dims: Iterable[int] = (),
        start_index_map: Iterable[int] = (),
        index_vector_dim: int = 0,
        operand_batching_dims: Iterable[int] = (),
        start_indices_batching_dims: Iterable[int] = (),
    ):
        self.offset_dims = _dims(offset_dims, "offset_dims")
        self.collapsed_slice_dims = _dims(collapsed_slice_dims, "collapsed_slice_dims")
        self.start_index_map = _dims(start_index_map, "start_index_map")
        self.index_vector_dim = _dim(index_vector_dim, "index_vector_dim")
        self.operand_batching_dims = _dims(operand_batching_dims, "operand_batching_dims")
        self.start_indices_batching_dims = _dims(start_indices_batching_dims, "start_indices_batching_dims")
        self.validate()


class ScatterDimensionNumbers(_GatherScatterDimensionNumbers):
    """Dimension numbers of Scatter (XLA ``ScatterDimensionNumbers`` proto;
    StableHLO ``#stablehlo.scatter<...>``).

    Attributes
    ----------
    update_window_dims : list of int
        Dimensions of ``updates`` that are window dimensions (ascending).
    inserted_window_dims : list of int
        Operand dimensions with window size 1 absent from ``updates`` (ascending).
    scatter_dims_to_operand_dims : list of int
        Operand dimension each scatter-index component indexes.
    index_vector_dim : int
        Dimension of ``scatter_indices`` holding the index vectors.
    input_batching_dims : list of int
        Operand batch dimensions (ascending), paired with ``scatter_indices_batching_dims``.
    scatter_indices_batching_dims : list of int
        Batch dimensions of ``scatter_indices``.

    Raises
    ------
    ShapeError
        The same checks as :class:`GatherDimensionNumbers`, on the scatter fields.
    """

    _FIELDS = (
        "update_window_dims",
        "inserted_window_dims",
        "scatter_dims_to_operand_dims",
        "index_vector_dim",
        "input_batching_dims",
        "scatter_indices_batching_dims",
    )
    _MNEMONIC = "scatter"

    def __init__(
        self,
        update_window_dims: Iterable[int] = (),
        inserted_window_dims: Iterable[int] = (),
        scatter_dims_to_operand_dims: Iterable[int] = (),
        index_vector_dim: int = 0,
        input_batching_dims: Iterable[int] = (),
        scatter_indices_batching_dims: Iterable[int] = (),
    ):
        self.update_window_dims = _dims(update_window_dims, "update_window_dims")
        self.inserted_window_dims = _dims(inserted_window_dims, "inserted_window_dims")
        self.scatter_dims_to_operand_dims = _dims(
            scatter_dims_to_operand_dims, "scatter_dims_to_operand_dims"
        )
        self.index_vector_dim = _dim(index_vector_dim, "index_vector_dim")
        self.input_batching_dims = _dims(input_batching_dims, "input_batching_dims")
        self.scatter_indices_batching_dims = _dims(
            scatter_indices_batching_dims, "scatter_indices_batching_dims"
        )
        self.validate()
