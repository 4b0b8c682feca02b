"""Tests of xlasdk/attrs.py: attribute classes, converters, enums and their MLIR text."""

from __future__ import annotations

import math
import pickle
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from xlasdk import attrs as A  # noqa: N812 - short alias used throughout
from xlasdk._jaxlib.mlir import context
from xlasdk.errors import ShapeError, XlaSdkError


def parse(text: str) -> Any:
    """Parse MLIR attribute text (the only use of jaxlib.mlir here)."""
    from jaxlib.mlir import ir

    with context():
        return ir.Attribute.parse(text)


def same_attr(a: str, b: str) -> bool:
    return str(parse(a)) == str(parse(b))


# ---------------------------------------------------------------------------------- enums

ENUMS = [
    (A.ComparisonDirection, ["EQ", "NE", "GE", "GT", "LE", "LT"], "#stablehlo<comparison_direction {}>"),
    (A.ComparisonType, ["FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"], "#stablehlo<comparison_type {}>"),
    (A.FftType, ["FFT", "IFFT", "RFFT", "IRFFT"], "#stablehlo<fft_type {}>"),
    (A.RandomAlgorithm, ["DEFAULT", "THREE_FRY", "PHILOX"], "#stablehlo<rng_algorithm {}>"),
    (
        A.TriangularSolveOptions_Transpose,
        ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"],
        "#stablehlo<transpose {}>",
    ),
    (A.RandomDistribution, ["UNIFORM", "NORMAL"], "#stablehlo<rng_distribution {}>"),
    (A.Precision, ["DEFAULT", "HIGH", "HIGHEST"], "#stablehlo<precision {}>"),
    (A.ResultAccuracy.Mode, ["DEFAULT", "HIGHEST", "TOLERANCE"], "#stablehlo.result_accuracy_mode<{}>"),
]


@pytest.mark.parametrize(("cls", "names", "fmt"), ENUMS, ids=[e[0].__name__ for e in ENUMS])
def test_enum_members_parse_and_mlir(cls: Any, names: list[str], fmt: str) -> None:
    assert list(cls.__members__) == names
    for name in names:
        member = cls[name]
        assert cls.parse(member) is member
        assert cls.parse(name) is member
        assert cls.parse(name.lower()) is member
        assert cls.parse(member.value) is member
        assert cls.parse(np.int64(member.value)) is member
        text = member.to_mlir()
        assert text == fmt.format(name)
        assert str(parse(text)) == text


@pytest.mark.parametrize(("cls", "names", "fmt"), ENUMS, ids=[e[0].__name__ for e in ENUMS])
def test_enum_unknown_name_raises_not_aborts(cls: Any, names: list[str], fmt: str) -> None:
    for bad in ["FOO", "", "L T", "NOTYPE" if cls is A.ComparisonType else "X"]:
        with pytest.raises(ShapeError) as info:
            cls.parse(bad)
        assert cls.__name__ in str(info.value)
        for name in names:
            assert name in str(info.value)
    with pytest.raises(ShapeError):
        cls.parse(99)
    with pytest.raises(ShapeError):
        cls.parse(True)
    with pytest.raises(ShapeError):
        cls.parse(1.0)
    with pytest.raises(ShapeError):
        cls.parse(None)


def test_enum_values_and_aliases() -> None:
    assert A.FftType.IRFFT.value == 3
    assert A.Precision.HIGHEST.value == 2
    assert A.ComparisonDirection.LT.value == 5
    assert A.RandomAlgorithm.parse("RNG_PHILOX") is A.RandomAlgorithm.PHILOX
    assert A.RandomDistribution.parse("rng_normal") is A.RandomDistribution.NORMAL
    assert A.PrecisionConfig.Precision is A.Precision
    assert repr(A.Precision.HIGH) == "<Precision.HIGH: 1>"
    assert pickle.loads(pickle.dumps(A.Precision.HIGH)) is A.Precision.HIGH
    assert pickle.loads(pickle.dumps(A.ResultAccuracy.Mode.HIGHEST)) is A.ResultAccuracy.Mode.HIGHEST
    assert pickle.loads(pickle.dumps(A.OpSharding.Type.MANUAL)) is A.OpSharding.Type.MANUAL
    assert issubclass(ShapeError, XlaSdkError) and issubclass(ShapeError, ValueError)


def test_padding_type() -> None:
    assert A.PaddingType.parse("same") is A.PaddingType.SAME
    assert A.PaddingType.parse("VALID") is A.PaddingType.VALID
    with pytest.raises(ShapeError, match="SAME"):
        A.PaddingType.parse("FULL")
    with pytest.raises(ShapeError):
        A.PaddingType.SAME.to_mlir()


# ---------------------------------------------------------------------------------- metadata


def test_op_metadata_both_styles() -> None:
    md = A.OpMetadata(op_type="Add", op_name="f/add", source_file="m.py", source_line=3)
    empty = A.OpMetadata()
    assert (empty.op_type, empty.op_name, empty.source_file, empty.source_line) == ("", "", "", 0)
    empty.op_type, empty.op_name, empty.source_file, empty.source_line = "Add", "f/add", "m.py", 3
    assert empty == md
    assert md != A.OpMetadata(op_type="Add")
    assert repr(md) == "OpMetadata(op_type='Add', op_name='f/add', source_file='m.py', source_line=3)"


def test_op_metadata_location() -> None:
    assert A.OpMetadata().to_mlir_location() == "loc(unknown)"
    assert A.OpMetadata(op_name="n").to_mlir_location() == 'loc("n")'
    assert A.OpMetadata(source_file="b.py", source_line=11).to_mlir_location() == 'loc("b.py":11:0)'
    loc = A.OpMetadata(op_name='we"ird', source_file="b.py", source_line=11).to_mlir_location()
    assert loc == 'loc(fused["we\\"ird", "b.py":11:0])'
    from jaxlib.mlir import ir

    with context():
        # Locations are not attributes; check them inside a tiny module.
        text = f"module {{\n}} {loc}"
        ir.Module.parse(text)


def test_current_source_info_metadata() -> None:
    md = A.current_source_info_metadata(op_type="T", op_name="N")
    line = test_current_source_info_metadata.__code__.co_firstlineno + 1
    assert md == A.OpMetadata(op_type="T", op_name="N", source_file="test_attrs.py", source_line=line)

    def helper() -> A.OpMetadata:
        return A.CurrentSourceInfoMetadata(skip_frames=2)

    md2 = helper()
    assert md2.source_line == line + 7
    assert md2.op_type == "" and md2.op_name == ""
    assert A.CurrentSourceInfoMetadata is A.current_source_info_metadata
    with pytest.raises(ShapeError):
        A.current_source_info_metadata(skip_frames=-1)
    with pytest.raises(ShapeError):
        A.current_source_info_metadata(skip_frames=100000)


# ---------------------------------------------------------------------------------- precision


def test_precision_config_both_styles() -> None:
    pc = A.PrecisionConfig()
    assert pc.operand_precision == []
    pc.operand_precision.append(A.PrecisionConfig.Precision.DEFAULT)
    pc.operand_precision.append("highest")
    kw = A.PrecisionConfig(operand_precision=["DEFAULT", A.Precision.HIGHEST])
    assert kw.operand_precision == [A.Precision.DEFAULT, A.Precision.HIGHEST]
    assert pc == kw
    text = kw.to_mlir()
    assert text == "[#stablehlo<precision DEFAULT>, #stablehlo<precision HIGHEST>]"
    assert str(parse(text)) == text
    assert pc.to_mlir() == text
    assert A.PrecisionConfig().to_mlir() == "[]"
    parse(A.PrecisionConfig().to_mlir())
    assert "HIGHEST" in repr(kw)


def test_precision_config_invalid() -> None:
    with pytest.raises(ShapeError, match="DEFAULT, HIGH, HIGHEST"):
        A.PrecisionConfig(["FASTEST"])
    pc = A.PrecisionConfig()
    pc.operand_precision.append("FOO")
    with pytest.raises(ShapeError, match="FOO"):
        pc.to_mlir()


# ---------------------------------------------------------------------------------- result accuracy


def test_result_accuracy_mlir_matches_builder() -> None:
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo

    ra = A.ResultAccuracy(mode="TOLERANCE", atol=1e-5, rtol=0.0, ulps=2)
    text = ra.to_mlir()
    assert text == (
        "#stablehlo.result_accuracy<atol = 1.0e-05, rtol = 0.0, ulps = 2, "
        "mode = #stablehlo.result_accuracy_mode<TOLERANCE>>"
    )
    with context(), ir.Location.unknown():
        built = stablehlo.ResultAccuracyAttr.get(atol=1e-5, rtol=0.0, ulps=2, mode="TOLERANCE")
        assert ir.Attribute.parse(text) == built
        highest = stablehlo.ResultAccuracyAttr.get(atol=0.0, rtol=0.0, ulps=0, mode="HIGHEST")
        assert ir.Attribute.parse(A.ResultAccuracy("highest").to_mlir()) == highest
    parse(A.ResultAccuracy("DEFAULT").to_mlir())


@given(
    st.floats(min_value=0, max_value=1e300, allow_nan=False, allow_infinity=False),
    st.floats(min_value=0, max_value=1e300, allow_nan=False, allow_infinity=False),
    st.integers(min_value=0, max_value=2**31),
)
def test_result_accuracy_floats_round_trip(atol: float, rtol: float, ulps: int) -> None:
    attr = parse(A.ResultAccuracy("TOLERANCE", atol=atol, rtol=rtol, ulps=ulps).to_mlir())
    from jaxlib.mlir.dialects import stablehlo

    got = stablehlo.ResultAccuracyAttr(attr)
    assert (got.atol, got.rtol, got.ulps) == (atol, rtol, ulps)


def test_result_accuracy_both_styles_and_validation() -> None:
    ra = A.ResultAccuracy()
    assert ra.mode is A.ResultAccuracy.Mode.TOLERANCE
    ra.atol = 0.5
    ra.ulps = 1
    assert ra == A.ResultAccuracy(mode=A.ResultAccuracy.Mode.TOLERANCE, atol=0.5, ulps=1)
    assert ra != A.ResultAccuracy(atol=0.5)
    bad_kwargs: list[dict[str, Any]] = [
        {"atol": -1.0},
        {"rtol": math.inf},
        {"atol": math.nan},
        {"ulps": -1},
        {"ulps": 1.5},
        {"atol": "1"},
        {"mode": "FAST"},
        {"mode": "HIGHEST", "atol": 1e-3},
        {"mode": "DEFAULT", "ulps": 1},
    ]
    for kwargs in bad_kwargs:
        with pytest.raises(ShapeError):
            A.ResultAccuracy(**kwargs)
    ra.mode = "HIGHEST"
    with pytest.raises(ShapeError, match="TOLERANCE"):
        ra.to_mlir()


# ---------------------------------------------------------------------------------- dot


def test_dot_dimension_numbers_both_styles() -> None:
    kw = A.DotDimensionNumbers(
        lhs_contracting_dimensions=[2],
        rhs_contracting_dimensions=[1],
        lhs_batch_dimensions=[0],
        rhs_batch_dimensions=[0],
    )
    dn = A.DotDimensionNumbers()
    dn.lhs_contracting_dimensions.append(2)
    dn.rhs_contracting_dimensions.append(1)
    dn.lhs_batch_dimensions.append(0)
    dn.rhs_batch_dimensions.extend([0])
    assert dn == kw
    text = kw.to_mlir()
    assert text == (
        "#stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], "
        "lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>"
    )
    assert str(parse(text)) == text
    simple = A.DotDimensionNumbers(lhs_contracting_dimensions=[1], rhs_contracting_dimensions=[0])
    assert (
        simple.to_mlir()
        == "#stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>"
    )
    parse(simple.to_mlir())
    parse(A.DotDimensionNumbers().to_mlir())
    assert repr(simple).startswith("DotDimensionNumbers(lhs_contracting_dimensions=[1]")


def test_make_dot_dimension_numbers() -> None:
    dn = A.make_dot_dimension_numbers((([2], [1]), ([0], [0])))
    assert dn.lhs_contracting_dimensions == [2]
    assert dn.rhs_contracting_dimensions == [1]
    assert dn.lhs_batch_dimensions == [0]
    assert dn.rhs_batch_dimensions == [0]
    assert A.make_dot_dimension_numbers(dn) is dn
    assert A.make_dot_dimension_numbers([[(1,), np.array([0])], [(), ()]]) == A.DotDimensionNumbers([1], [0])
    with pytest.raises(ShapeError):
        A.make_dot_dimension_numbers(([1], [0]))
    with pytest.raises(ShapeError):
        A.make_dot_dimension_numbers(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lhs_contracting_dimensions": [-1], "rhs_contracting_dimensions": [0]},
        {"lhs_contracting_dimensions": [1, 1], "rhs_contracting_dimensions": [0, 2]},
        {"lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": []},
        {"lhs_batch_dimensions": [0], "rhs_batch_dimensions": []},
        {
            "lhs_contracting_dimensions": [0],
            "rhs_contracting_dimensions": [1],
            "lhs_batch_dimensions": [0],
            "rhs_batch_dimensions": [0],
        },
        {"lhs_contracting_dimensions": [1.0], "rhs_contracting_dimensions": [0]},
        {"lhs_contracting_dimensions": [True], "rhs_contracting_dimensions": [0]},
        {"lhs_contracting_dimensions": 1, "rhs_contracting_dimensions": [0]},
        {"lhs_contracting_dimensions": "1", "rhs_contracting_dimensions": [0]},
    ],
)
def test_dot_dimension_numbers_invalid(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ShapeError):
        A.DotDimensionNumbers(**kwargs)


def test_dot_dimension_numbers_checked_again_after_edit() -> None:
    dn = A.DotDimensionNumbers([1], [0])
    dn.lhs_contracting_dimensions.append(1)
    with pytest.raises(ShapeError, match="repeated"):
        dn.to_mlir()


# ---------------------------------------------------------------------------------- convolution

NCHW_MLIR = (
    "#stablehlo.conv<raw input_batch_dimension = 0, input_feature_dimension = 1, input_spatial_dimensions = [2, 3], "
    "kernel_input_feature_dimension = 1, kernel_output_feature_dimension = 0, kernel_spatial_dimensions = [2, 3], "
    "output_batch_dimension = 0, output_feature_dimension = 1, output_spatial_dimensions = [2, 3]>"
)


def test_convolution_dimension_numbers_both_styles() -> None:
    kw = A.ConvolutionDimensionNumbers(
        input_batch_dimension=0,
        input_feature_dimension=1,
        input_spatial_dimensions=[2, 3],
        kernel_input_feature_dimension=1,
        kernel_output_feature_dimension=0,
        kernel_spatial_dimensions=[2, 3],
        output_batch_dimension=0,
        output_feature_dimension=1,
        output_spatial_dimensions=[2, 3],
    )
    dn = A.ConvolutionDimensionNumbers()
    dn.input_batch_dimension = 0
    dn.input_feature_dimension = 1
    dn.input_spatial_dimensions.extend([2, 3])
    dn.kernel_input_feature_dimension = 1
    dn.kernel_output_feature_dimension = 0
    dn.kernel_spatial_dimensions.append(2)
    dn.kernel_spatial_dimensions.append(3)
    dn.output_batch_dimension = 0
    dn.output_feature_dimension = 1
    dn.output_spatial_dimensions.extend([2, 3])
    assert dn == kw
    assert kw.to_mlir() == NCHW_MLIR
    assert same_attr(NCHW_MLIR, "#stablehlo.conv<[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]>")
    assert A.make_convolution_dimension_numbers(None, 2) == kw
    assert A.make_convolution_dimension_numbers(("NCHW", "OIHW", "NCHW"), 2) == kw
    assert "kernel_spatial_dimensions=[2, 3]" in repr(kw)


def test_make_convolution_dimension_numbers_nhwc() -> None:
    dn = A.make_convolution_dimension_numbers(("NHWC", "HWIO", "NHWC"), 2)
    assert dn.input_batch_dimension == 0
    assert dn.input_feature_dimension == 3
    assert dn.input_spatial_dimensions == [1, 2]
    assert dn.kernel_input_feature_dimension == 2
    assert dn.kernel_output_feature_dimension == 3
    assert dn.kernel_spatial_dimensions == [0, 1]
    assert dn.output_batch_dimension == 0
    assert dn.output_feature_dimension == 3
    assert dn.output_spatial_dimensions == [1, 2]
    assert same_attr(dn.to_mlir(), "#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>")


def test_make_convolution_dimension_numbers_other_layouts() -> None:
    dn = A.make_convolution_dimension_numbers(["NCH", "OIH", "NCH"], 1)
    assert (dn.input_spatial_dimensions, dn.kernel_spatial_dimensions, dn.output_spatial_dimensions) == (
        [2],
        [2],
        [2],
    )
    # Spatial dims of lhs and out follow the letter order of rhs (as the former xla_client did).
    dn = A.make_convolution_dimension_numbers(("NWHC", "OIHW", "CHWN"), 2)
    assert dn.input_spatial_dimensions == [2, 1]
    assert dn.kernel_spatial_dimensions == [2, 3]
    assert dn.output_spatial_dimensions == [1, 2]
    assert (dn.output_batch_dimension, dn.output_feature_dimension) == (3, 0)
    assert same_attr(dn.to_mlir(), "#stablehlo.conv<[b, 1, 0, f]x[o, i, 0, 1]->[f, 0, 1, b]>")
    dn3 = A.make_convolution_dimension_numbers(("NDHWC", "DHWIO", "NDHWC"), 3)
    assert dn3.kernel_spatial_dimensions == [0, 1, 2]
    parse(dn3.to_mlir())
    dn0 = A.make_convolution_dimension_numbers(None, 0)
    assert same_attr(dn0.to_mlir(), "#stablehlo.conv<[b, f]x[o, i]->[b, f]>")
    existing = A.make_convolution_dimension_numbers(None, 2)
    assert A.make_convolution_dimension_numbers(existing, 2) is existing


@pytest.mark.parametrize(
    ("spec", "nd"),
    [
        (("NCHW", "OIHW", "NCHW"), 1),
        (("NCH", "OIHW", "NCHW"), 2),
        (("NXHW", "OIHW", "NCHW"), 2),
        (("NCHW", "OXHW", "NCHW"), 2),
        (("NCHH", "OIHW", "NCHW"), 2),
        (("NCHW", "OIHW", "NCWX"), 2),
        (("NCHW", "OIHW"), 2),
        ("NCHW", 2),
        ((1, 2, 3), 1),
        (("NCHW", "OIHW", "NCHW"), -1),
    ],
)
def test_make_convolution_dimension_numbers_invalid(spec: Any, nd: int) -> None:
    with pytest.raises(ShapeError):
        A.make_convolution_dimension_numbers(spec, nd)


def test_convolution_dimension_numbers_invalid() -> None:
    with pytest.raises(ShapeError):
        A.ConvolutionDimensionNumbers(input_batch_dimension=-1)
    dn = A.make_convolution_dimension_numbers(None, 2)
    with pytest.raises(ShapeError):
        A.make_convolution_dimension_numbers(dn, 3)
    dn.input_feature_dimension = 0
    with pytest.raises(ShapeError, match="input"):
        dn.to_mlir()
    dn = A.make_convolution_dimension_numbers(None, 2)
    dn.output_spatial_dimensions.pop()
    with pytest.raises(ShapeError, match="same length"):
        dn.to_mlir()


# ---------------------------------------------------------------------------------- gather / scatter


def test_gather_dimension_numbers_both_styles() -> None:
    kw = A.GatherDimensionNumbers(
        offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1
    )
    dn = A.GatherDimensionNumbers()
    dn.offset_dims.append(1)
    dn.collapsed_slice_dims.append(0)
    dn.start_index_map.append(0)
    dn.index_vector_dim = 1
    assert dn == kw
    text = kw.to_mlir()
    assert text == (
        "#stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>"
    )
    assert str(parse(text)) == text
    full = A.GatherDimensionNumbers(
        offset_dims=[2],
        collapsed_slice_dims=[1],
        start_index_map=[1],
        index_vector_dim=1,
        operand_batching_dims=[0],
        start_indices_batching_dims=[0],
    )
    text = full.to_mlir()
    assert str(parse(text)) == text
    assert "operand_batching_dims = [0], start_indices_batching_dims = [0]" in text
    assert A.GatherDimensionNumbers().to_mlir() == "#stablehlo.gather<index_vector_dim = 0>"
    parse(A.GatherDimensionNumbers().to_mlir())
    parse(A.ScatterDimensionNumbers().to_mlir())


@pytest.mark.parametrize(
    "kwargs",
    [
        {"offset_dims": [2, 1]},
        {"offset_dims": [1, 1]},
        {"collapsed_slice_dims": [1, 0]},
        {"start_index_map": [-1]},
        {"index_vector_dim": -1},
        {"collapsed_slice_dims": [0], "operand_batching_dims": [0], "start_indices_batching_dims": [0]},
        {"start_index_map": [0], "operand_batching_dims": [0], "start_indices_batching_dims": [1]},
        {"operand_batching_dims": [0], "start_indices_batching_dims": []},
        {"operand_batching_dims": [0], "start_indices_batching_dims": [1], "index_vector_dim": 1},
    ],
)
def test_gather_dimension_numbers_invalid(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ShapeError):
        A.GatherDimensionNumbers(**kwargs)


def test_scatter_dimension_numbers_both_styles() -> None:
    kw = A.ScatterDimensionNumbers(
        update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1
    )
    dn = A.ScatterDimensionNumbers()
    dn.update_window_dims.append(1)
    dn.inserted_window_dims.append(0)
    dn.scatter_dims_to_operand_dims.append(0)
    dn.index_vector_dim = 1
    assert dn == kw
    text = kw.to_mlir()
    assert text == (
        "#stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], "
        "scatter_dims_to_operand_dims = [0], index_vector_dim = 1>"
    )
    assert str(parse(text)) == text
    full = A.ScatterDimensionNumbers(
        update_window_dims=[1],
        inserted_window_dims=[1],
        scatter_dims_to_operand_dims=[1],
        index_vector_dim=1,
        input_batching_dims=[0],
        scatter_indices_batching_dims=[0],
    )
    text = full.to_mlir()
    assert str(parse(text)) == text
    assert "input_batching_dims = [0], scatter_indices_batching_dims = [0]" in text


@pytest.mark.parametrize(
    "kwargs",
    [
        {"update_window_dims": [2, 1]},
        {"inserted_window_dims": [1, 0]},
        {"scatter_dims_to_operand_dims": [0, 0]},
        {"inserted_window_dims": [0], "input_batching_dims": [0], "scatter_indices_batching_dims": [0]},
        {"input_batching_dims": [0, 1], "scatter_indices_batching_dims": [0]},
        {"input_batching_dims": [0], "scatter_indices_batching_dims": [0], "index_vector_dim": 0},
        {"index_vector_dim": "1"},
    ],
)
def test_scatter_dimension_numbers_invalid(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ShapeError):
        A.ScatterDimensionNumbers(**kwargs)


# ---------------------------------------------------------------------------------- padding


def test_padding_config_both_styles() -> None:
    pc = A.PaddingConfig()
    d = A.PaddingConfigDimension()
    d.edge_padding_low = 1
    d.edge_padding_high = 2
    d.interior_padding = 0
    pc.dimensions.append(d)
    pc.dimensions.append(
        A.PaddingConfigDimension(edge_padding_low=-1, edge_padding_high=0, interior_padding=3)
    )
    kw = A.PaddingConfig(dimensions=[A.PaddingConfigDimension(1, 2, 0), A.PaddingConfigDimension(-1, 0, 3)])
    assert pc == kw
    assert A.make_padding_config([(1, 2, 0), (-1, 0, 3)]) == kw
    assert A.make_padding_config([(1, 2), [-1, 0, 3]]) == kw
    assert A.make_padding_config(np.array([[1, 2, 0], [-1, 0, 3]])) == kw
    assert A.make_padding_config(kw) is kw
    assert (kw.lows(), kw.highs(), kw.interiors()) == ([1, -1], [2, 0], [0, 3])
    text = kw.to_mlir()
    assert text == (
        "edge_padding_low = array<i64: 1, -1>, edge_padding_high = array<i64: 2, 0>, "
        "interior_padding = array<i64: 0, 3>"
    )
    parse("{" + text + "}")
    parse("{" + A.PaddingConfig().to_mlir() + "}")
    assert "PaddingConfigDimension(edge_padding_low=1" in repr(kw)


@pytest.mark.parametrize("bad", [[(1,)], [(1, 2, 3, 4)], [(1, 2, -1)], [(1.5, 2)], ["ab"], [3], 5, "SAME"])
def test_make_padding_config_invalid(bad: Any) -> None:
    with pytest.raises(ShapeError):
        A.make_padding_config(bad)


def test_padding_config_invalid_entries() -> None:
    with pytest.raises(ShapeError):
        A.PaddingConfigDimension(interior_padding=-1)
    pc = A.PaddingConfig()
    pc.dimensions.append((1, 2))  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match="PaddingConfigDimension"):
        pc.to_mlir()


def pad_by_hand(size: int, window: int, stride: int) -> tuple[int, int]:
    total = max((math.ceil(size / stride) - 1) * stride + window - size, 0)
    return total // 2, total - total // 2


def test_window_padding_type_to_pad_values_hand_values() -> None:
    # in 5, window 3, stride 2: out 3, total (3-1)*2+3-5 = 2 -> (1, 1)
    # in 4, window 3, stride 2: out 2, total (2-1)*2+3-4 = 1 -> (0, 1)
    # in 7, window 4, stride 1: out 7, total 6+4-7 = 3 -> (1, 2)
    # in 10, window 3, stride 3: out 4, total 9+3-10 = 2 -> (1, 1)
    # in 6, window 1, stride 2: out 3, total 4+1-6 = -1 -> 0 -> (0, 0)
    # in 2, window 5, stride 1: out 2, total 1+5-2 = 4 -> (2, 2)
    got = A.window_padding_type_to_pad_values(
        A.PaddingType.SAME, [5, 4, 7, 10, 6, 2], [3, 3, 4, 3, 1, 5], [2, 2, 1, 3, 2, 1]
    )
    assert got == [(1, 1), (0, 1), (1, 2), (1, 1), (0, 0), (2, 2)]
    assert A.window_padding_type_to_pad_values("same", (5,), (3,), (2,)) == [(1, 1)]
    assert A.window_padding_type_to_pad_values("VALID", [5, 4], [3, 3], [2, 2]) == [(0, 0), (0, 0)]
    assert A.window_padding_type_to_pad_values(A.PaddingType.VALID, [], [], []) == []


@given(
    st.lists(
        st.tuples(st.integers(0, 50), st.integers(1, 10), st.integers(1, 6)),
        max_size=4,
    )
)
def test_window_padding_same_matches_formula(dims: list[tuple[int, int, int]]) -> None:
    ins, windows, strides = ([d[k] for d in dims] for k in range(3))
    got = A.window_padding_type_to_pad_values("SAME", ins, windows, strides)
    assert got == [pad_by_hand(*d) for d in dims]
    for (size, window, stride), (lo, hi) in zip(dims, got, strict=True):
        assert hi - lo in (0, 1)
        if size:
            out = (size + lo + hi - window) // stride + 1
            assert out == math.ceil(size / stride) or (lo + hi == 0 and out <= math.ceil(size / stride))


@pytest.mark.parametrize(
    "args",
    [
        ("FULL", [5], [3], [2]),
        ("SAME", [5, 4], [3], [2]),
        ("SAME", [5], [3], [0]),
        ("SAME", [-5], [3], [1]),
        ("SAME", [5], [3.0], [1]),
    ],
)
def test_window_padding_invalid(args: Any) -> None:
    with pytest.raises(ShapeError):
        A.window_padding_type_to_pad_values(*args)


def test_convert_padding() -> None:
    assert A.convert_padding("SAME", [5, 4], [3, 3], [2, 2]) == [(1, 1), (0, 1)]
    assert A.convert_padding(A.PaddingType.VALID, [5, 4], [3, 3], [2, 2]) == [(0, 0), (0, 0)]
    assert A.convert_padding([(1, 2), [-1, 0]], [5, 4], [3, 3], [2, 2]) == [(1, 2), (-1, 0)]
    assert A.convert_padding(np.array([[1, 2], [3, 4]]), [5, 4], [3, 3], [1, 1]) == [(1, 2), (3, 4)]
    bad: Any
    for bad in [
        [(1, 2)],
        [(1, 2), (3, 4), (5, 6)],
        [(1, 2, 3), (1, 2)],
        [(1.0, 2), (0, 0)],
        [1, 2],
        "FULL",
        3,
    ]:
        with pytest.raises(ShapeError):
            A.convert_padding(bad, [5, 4], [3, 3], [2, 2])


# ---------------------------------------------------------------------------------- sharding


def test_op_sharding_strings() -> None:
    assert A.OpSharding().to_hlo_string() == "{replicated}"
    m = A.OpSharding()
    m.type = A.OpSharding.Type.MAXIMAL
    m.tile_assignment_devices.append(0)
    assert m.to_hlo_string() == "{maximal device=0}"
    t = A.OpSharding(
        type=A.OpSharding.Type.OTHER, tile_assignment_dimensions=[2, 1], tile_assignment_devices=[0, 1]
    )
    assert t.to_hlo_string() == "{devices=[2,1]0,1}"
    assert str(t) == "{devices=[2,1]0,1}"
    r = A.OpSharding("OTHER", [2, 1, 2], [0, 1, 2, 3], replicate_on_last_tile_dim=True)
    assert r.to_hlo_string() == "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}"
    assert A.OpSharding(type="manual").to_hlo_string() == "{manual}"
    tup = A.OpSharding(type=A.OpSharding.Type.TUPLE, tuple_shardings=[A.OpSharding(), m])
    assert tup.to_hlo_string() == "{{replicated}, {maximal device=0}}"
    assert tup.to_mlir() == '"{{replicated}, {maximal device=0}}"'
    parse(tup.to_mlir())
    assert tup == A.OpSharding(A.OpSharding.Type.TUPLE, tuple_shardings=[A.OpSharding(), m])
    assert tup != A.OpSharding()


def test_op_sharding_invalid() -> None:
    with pytest.raises(ShapeError):
        A.OpSharding(type="SPLIT")
    with pytest.raises(ShapeError):
        A.OpSharding("MAXIMAL").to_hlo_string()
    with pytest.raises(ShapeError):
        A.OpSharding("OTHER", [2, 2], [0, 1, 2]).to_hlo_string()
    with pytest.raises(ShapeError):
        A.OpSharding("OTHER", [2], [0, 0]).to_hlo_string()
    with pytest.raises(ShapeError):
        A.OpSharding("OTHER").to_hlo_string()
    with pytest.raises(ShapeError):
        A.OpSharding("OTHER", [0], [])


def test_replica_groups() -> None:
    assert A.make_replica_groups([[0, 1], (2, 3)]) == [[0, 1], [2, 3]]
    assert A.make_replica_groups(np.array([[0, 2], [1, 3]])) == [[0, 2], [1, 3]]
    assert A.make_replica_groups(None) == []
    assert A.make_replica_groups([]) == []
    text = A.replica_groups_to_mlir([[0, 1], [2, 3]])
    assert text == "dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>"
    assert str(parse(text)) == text
    assert A.replica_groups_to_mlir([[0, 1, 2, 3]]) == "dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>"
    parse(A.replica_groups_to_mlir([[3]]))
    parse(A.replica_groups_to_mlir([]))
    bad: Any
    for bad in [[[0, 1], [1, 2]], [[0, 0]], [[0, 1], [2]], [[]], [[-1]], [[0.5]], [0, 1], "01"]:
        with pytest.raises(ShapeError):
            A.make_replica_groups(bad)


def test_all_exports_exist() -> None:
    for name in A.__all__:
        assert hasattr(A, name), name
    assert len(set(A.__all__)) == len(A.__all__)
