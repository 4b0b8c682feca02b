"""Attribute types of XLA operations: dimension numbers, precision, padding, enums, metadata.

The classes mirror XLA's protos (``xla_data.proto``) and the former ``jaxlib.xla_client`` classes:
each takes its fields as keyword arguments, or can be built empty and filled in the former proto
style (``dn.lhs_contracting_dimensions.append(1)``): list fields are plain mutable Python lists.
Each knows how to print itself as the StableHLO attribute it maps to (``to_mlir()``, MLIR
attribute syntax, exactly what goes inside an op's attribute dictionary).

Every enum value is checked in Python against the names StableHLO knows before any text reaches
MLIR: jaxlib's enum attribute builders abort the whole process on an unknown string.

Validation here needs no shapes (an unknown enum name, a negative or repeated dimension number,
mismatched list lengths) and raises :class:`~xlasdk.errors.ShapeError`; checks against operand
shapes are made by the ops.

:class:`OpSharding` is defined in :mod:`xlasdk.sharding`, beside the :class:`~xlasdk.HloSharding`
it converts to and from, and exported here too (the package depends on ``sharding``, never the
reverse).
"""

from __future__ import annotations

from ..sharding._hlo_sharding import OpSharding  # defined beside HloSharding, which it converts to and from
from ._dimension_numbers import (
    ConvDimensionNumbersLike,
    ConvolutionDimensionNumbers,
    DotDimensionNumbers,
    DotDimensionNumbersLike,
    GatherDimensionNumbers,
    ScatterDimensionNumbers,
    make_convolution_dimension_numbers,
    make_dot_dimension_numbers,
)
from ._enums import (
    ComparisonDirection,
    ComparisonType,
    FftType,
    PaddingType,
    RandomAlgorithm,
    RandomDistribution,
    TriangularSolveOptions_Transpose,
)
from ._metadata import CurrentSourceInfoMetadata, OpMetadata, current_source_info_metadata
from ._padding import (
    PaddingConfig,
    PaddingConfigDimension,
    convert_padding,
    make_padding_config,
    window_padding_type_to_pad_values,
)
from ._precision import Precision, PrecisionConfig, ResultAccuracy
from ._replica_groups import ChannelHandle, make_replica_groups, replica_groups_to_mlir

__all__ = [
    "ComparisonDirection",
    "ComparisonType",
    "ConvDimensionNumbersLike",
    "ConvolutionDimensionNumbers",
    "CurrentSourceInfoMetadata",
    "DotDimensionNumbers",
    "DotDimensionNumbersLike",
    "FftType",
    "GatherDimensionNumbers",
    "OpMetadata",
    "OpSharding",
    "PaddingConfig",
    "PaddingConfigDimension",
    "PaddingType",
    "Precision",
    "PrecisionConfig",
    "RandomAlgorithm",
    "RandomDistribution",
    "ResultAccuracy",
    "ScatterDimensionNumbers",
    "TriangularSolveOptions_Transpose",
    "convert_padding",
    "current_source_info_metadata",
    "make_convolution_dimension_numbers",
    "make_dot_dimension_numbers",
    "make_padding_config",
    "make_replica_groups",
    "ChannelHandle",
    "replica_groups_to_mlir",
    "window_padding_type_to_pad_values",
]
