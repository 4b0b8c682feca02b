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
"""

from __future__ import annotations

import types as _types
from collections.abc import Iterable as Iterable
from collections.abc import Sequence as Sequence
from typing import Any as Any
from typing import ClassVar as ClassVar
from typing import TypeVar as TypeVar

from ..errors import ShapeError as ShapeError
from ._base import _E as _E
from ._base import _AttrEnum as _AttrEnum
from ._base import _dim as _dim
from ._base import _dims as _dims
from ._base import _disjoint as _disjoint
from ._base import _hlo_list as _hlo_list
from ._base import _int as _int
from ._base import _mlir_float as _mlir_float
from ._base import _mlir_list as _mlir_list
from ._base import _ProtoLike as _ProtoLike
from ._base import _same_len as _same_len
from ._dimension_numbers import ConvDimensionNumbersLike as ConvDimensionNumbersLike
from ._dimension_numbers import (
    ConvolutionDimensionNumbers,
    DotDimensionNumbers,
    GatherDimensionNumbers,
    ScatterDimensionNumbers,
    make_convolution_dimension_numbers,
    make_dot_dimension_numbers,
)
from ._dimension_numbers import DotDimensionNumbersLike as DotDimensionNumbersLike
from ._dimension_numbers import _GatherScatterDimensionNumbers as _GatherScatterDimensionNumbers
from ._dimension_numbers import _layout_positions as _layout_positions
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
from ._metadata import _mlir_str as _mlir_str
from ._padding import (
    PaddingConfig,
    PaddingConfigDimension,
    convert_padding,
    make_padding_config,
    window_padding_type_to_pad_values,
)
from ._padding import _spatial_ints as _spatial_ints
from ._precision import Precision, PrecisionConfig, ResultAccuracy
from ._precision import _Mode as _Mode
from ._precision import _Precision as _Precision
from ._sharding import OpSharding, make_replica_groups, replica_groups_to_mlir
from ._sharding import _sharding_type as _sharding_type
from ._sharding import _ShardingType as _ShardingType

__all__ = [
    "ComparisonDirection",
    "ComparisonType",
    "ConvolutionDimensionNumbers",
    "CurrentSourceInfoMetadata",
    "DotDimensionNumbers",
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
    "replica_groups_to_mlir",
    "window_padding_type_to_pad_values",
]

# The classes and functions keep the module they had when this was one file (reprs, pickles, docs).
for _obj in list(globals().values()):
    if isinstance(_obj, (type, _types.FunctionType)) and _obj.__module__.startswith(__name__ + "._"):
        _obj.__module__ = __name__
del _obj
