"""``xlasdk.xla_client``: tests in the style of jaxlib's former ``xla_client_test.py``.

Each test builds with ``XlaBuilder`` + ``ops``, compiles with ``backend.compile(c.build())`` and
runs with ``execute_with_python_values``, as code written against ``jaxlib.xla_client`` does,
and checks values against numpy.
"""

from __future__ import annotations

import copy
import gc
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from xlasdk import xla_client

ops = xla_client.ops
bfloat16 = xla_client.bfloat16


@pytest.fixture(scope="module")
def backend() -> xla_client.Client:
    return xla_client.make_cpu_client()


def _run(backend: xla_client.Client, c: xla_client.XlaBuilder, *args: Any) -> list[np.ndarray[Any, Any]]:
    compiled = backend.compile(c.build())
    return xla_client.execute_with_python_values(compiled, list(args), backend)


def _binary_add(dtype: Any) -> xla_client.XlaComputation:
    c = xla_client.XlaBuilder("add_param0_by_param1")
    shape = xla_client.shape_from_pyval(np.array(0, dtype=dtype))
    ops.Add(ops.Parameter(c, 0, shape), ops.Parameter(c, 1, shape))
    return c.build()


def _binary_max(dtype: Any) -> xla_client.XlaComputation:
    c = xla_client.XlaBuilder("max_param0_by_param1")
    shape = xla_client.shape_from_pyval(np.array(0, dtype=dtype))
    ops.Max(ops.Parameter(c, 0, shape), ops.Parameter(c, 1, shape))
    return c.build()


# -- module surface ---------------------------------------------------------------------------
def test_module_surface_names_and_types() -> None:
    assert issubclass(xla_client.Shape, xs.Shape) and xla_client.PrimitiveType is xs.PrimitiveType
    assert xla_client.XlaRuntimeError is xs.XlaRuntimeError
    assert xla_client.bfloat16 is ml_dtypes.bfloat16
    assert xla_client.dtype_to_etype(np.float32) == xla_client.PrimitiveType.F32
    assert xla_client.dtype_to_etype(bfloat16) == xla_client.PrimitiveType.BF16
    assert xla_client.XLA_ELEMENT_TYPE_TO_DTYPE[xla_client.PrimitiveType.S8] == np.int8
    assert xla_client.DTYPE_TO_XLA_ELEMENT_TYPE["float64"] == xla_client.PrimitiveType.F64
    assert xla_client.PrimitiveType.TUPLE not in xla_client.XLA_ELEMENT_TYPE_TO_DTYPE
    # ops: xlasdk's ops plus the former ops-namespace enums
    assert ops.Add is xs.ops.Add and ops.ConvGeneralDilated is xs.ops.ConvGeneralDilated
    assert ops.TriangularSolveOptions_Transpose.ADJOINT.name == "ADJOINT"
    assert ops.RandomAlgorithm is xs.RandomAlgorithm and ops.FftType is xs.FftType
    assert "Reduce" in dir(ops) and "TriangularSolveOptions_Transpose" in dir(ops)
    with pytest.raises(AttributeError, match="NoSuchOp"):
        ops.NoSuchOp  # noqa: B018
    assert isinstance(xla_client._version, int)


def test_shape_from_pyval() -> None:
    s = xla_client.shape_from_pyval(np.zeros((2, 3), np.float32))
    assert str(s) == "f32[2,3]" and s.dimensions() == (2, 3)
    t = xla_client.shape_from_pyval((np.int8(1), (np.zeros(4, np.float64), True)))
    assert str(t) == "(s8[], (f64[4], pred[]))"
    laid = xla_client.shape_from_pyval(np.zeros((2, 3), np.float32), layout=(0, 1))
    layout = laid.layout()
    assert layout is not None and layout.minor_to_major() == (0, 1)


# -- constants --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8, np.int8, np.float16, bfloat16]
)
def test_constant_scalar_sum_and_vector(backend: xla_client.Client, dtype: Any) -> None:
    c = xla_client.XlaBuilder("constants")
    a, b = np.array(3, dtype), np.array(4, dtype)
    vec = np.array([1, 2, 7], dtype)
    ops.Tuple(c, [ops.Add(ops.Constant(c, a), ops.Constant(c, b)), ops.Mul(ops.Constant(c, vec), ops.Constant(c, vec))])
    got_sum, got_sq = _run(backend, c)
    assert got_sum.dtype == np.dtype(dtype) and got_sum.shape == ()
    np.testing.assert_array_equal(got_sum, (a + b).astype(dtype))
    np.testing.assert_array_equal(got_sq, (vec * vec).astype(dtype))


def test_constant_pred_complex_and_empty(backend: xla_client.Client) -> None:
    c = xla_client.XlaBuilder("constants2")
    bools = np.array([True, False, True])
    cplx = np.array([1 + 2j, -3j], np.complex64)
    ops.Tuple(
        c,
        [
            ops.Not(ops.Constant(c, bools)),
            ops.Mul(ops.Constant(c, cplx), ops.Constant(c, cplx)),
            ops.Constant(c, np.zeros((0, 3), np.float32)),
        ],
    )
    nb, sq, empty = _run(backend, c)
    np.testing.assert_array_equal(nb, ~bools)
    np.testing.assert_allclose(sq, cplx * cplx)
    assert empty.shape == (0, 3) and empty.dtype == np.float32


# -- element-wise with broadcast_dimensions ---------------------------------------------------
def test_binary_ops_with_broadcast_dimensions(backend: xla_client.Client) -> None:
    m = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    row = np.array([10.0, 20.0, 30.0], np.float32)
    col = np.array([100.0, 200.0], np.float32)
    c = xla_client.XlaBuilder("broadcasts")
    cm, crow, ccol = ops.Constant(c, m), ops.Constant(c, row), ops.Constant(c, col)
    ops.Tuple(
        c,
        [
            ops.Add(cm, crow, broadcast_dimensions=(1,)),
            ops.Sub(cm, ccol, broadcast_dimensions=(0,)),
            ops.Mul(crow, cm, broadcast_dimensions=(1,)),
            ops.Div(cm, ccol, broadcast_dimensions=(0,)),
            ops.Max(cm, ops.Constant(c, np.float32(3.5))),
            ops.Min(cm, ops.Constant(c, np.float32(3.5))),
            ops.Pow(cm, ops.Constant(c, np.full((2, 3), 2.0, np.float32))),
            ops.Lt(cm, crow, broadcast_dimensions=(1,)),
            ops.Eq(cm, ops.Constant(c, np.array([2.0, 5.0], np.float32)), broadcast_dimensions=(0,)),
        ],
    )
    got = _run(backend, c)
    expected = [
        m + row,
        m - col[:, None],
        row * m,
        m / col[:, None],
        np.maximum(m, 3.5),
        np.minimum(m, 3.5),
        m**2,
        m < row,
        m == np.array([2.0, 5.0])[:, None],
    ]
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-6)


def test_integer_and_shift_ops(backend: xla_client.Client) -> None:
    a = np.array([[7, -8, 9], [1, 2, -3]], np.int32)
    b = np.array([2, 3, 1], np.int32)
    c = xla_client.XlaBuilder("ints")
    ca, cb = ops.Constant(c, a), ops.Constant(c, b)
    ops.Tuple(
        c,
        [
            ops.Rem(ca, cb, broadcast_dimensions=(1,)),
            ops.ShiftLeft(ca, cb, broadcast_dimensions=(1,)),
            ops.And(ca, ops.Constant(c, np.int32(6))),
        ],
    )
    rem, shl, band = _run(backend, c)
    np.testing.assert_array_equal(rem, np.fmod(a, b))  # XLA Rem truncates like C
    np.testing.assert_array_equal(shl, a << b)
    np.testing.assert_array_equal(band, a & 6)


# -- Dot / DotGeneral -------------------------------------------------------------------------
def test_dot_matrix_vector_and_matrix_matrix(backend: xla_client.Client) -> None:
    rng = np.random.default_rng(0)
    lhs = rng.standard_normal((4, 3)).astype(np.float32)
    rhs = rng.standard_normal((3, 5)).astype(np.float32)
    vec = rng.standard_normal(3).astype(np.float32)
    c = xla_client.XlaBuilder("dots")
    p0 = ops.Parameter(c, 0, xla_client.shape_from_pyval(lhs))
    p1 = ops.Parameter(c, 1, xla_client.shape_from_pyval(rhs))
    config = xla_client.PrecisionConfig()
    config.operand_precision.append(config.Precision.HIGHEST)
    config.operand_precision.append(config.Precision.HIGHEST)
    ops.Tuple(c, [ops.Dot(p0, p1, precision_config=config), ops.Dot(p0, ops.Constant(c, vec))])
    mm, mv = _run(backend, c, lhs, rhs)
    np.testing.assert_allclose(mm, lhs @ rhs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mv, lhs @ vec, rtol=1e-5, atol=1e-6)


def test_dot_general_batched(backend: xla_client.Client) -> None:
    rng = np.random.default_rng(1)
    lhs = rng.standard_normal((10, 3, 4)).astype(np.float32)
    rhs = rng.standard_normal((10, 4, 5)).astype(np.float32)
    c = xla_client.XlaBuilder("dot_general")
    dnums = xla_client.make_dot_dimension_numbers((([2], [1]), ([0], [0])))
    # the former proto style: construct empty, append to the list fields
    proto = xla_client.DotDimensionNumbers()
    proto.lhs_contracting_dimensions.append(2)
    proto.rhs_contracting_dimensions.append(1)
    proto.lhs_batch_dimensions.append(0)
    proto.rhs_batch_dimensions.append(0)
    cl, cr = ops.Constant(c, lhs), ops.Constant(c, rhs)
    ops.Tuple(
        c,
        [
            ops.DotGeneral(cl, cr, dnums),
            ops.DotGeneral(cl, cr, proto, preferred_element_type=np.float64),
        ],
    )
    a, b = _run(backend, c)
    expected = np.matmul(lhs.astype(np.float64), rhs.astype(np.float64))
    np.testing.assert_allclose(a, expected, rtol=1e-5, atol=1e-5)
    assert b.dtype == np.float64
    np.testing.assert_allclose(b, expected, rtol=1e-5, atol=1e-5)


def test_dot_general_int_preferred_type(backend: xla_client.Client) -> None:
    lhs = np.arange(6, dtype=np.int8).reshape(2, 3) * 40
    rhs = np.arange(12, dtype=np.int8).reshape(3, 4)
    c = xla_client.XlaBuilder("dot_int")
    dnums = xla_client.make_dot_dimension_numbers((([1], [0]), ([], [])))
    ops.DotGeneral(ops.Constant(c, lhs), ops.Constant(c, rhs), dnums, preferred_element_type=np.int32)
    [got] = _run(backend, c)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, lhs.astype(np.int32) @ rhs.astype(np.int32))


# -- ConvGeneralDilated -----------------------------------------------------------------------
def _conv_nchw(
    lhs: np.ndarray[Any, Any],
    rhs: np.ndarray[Any, Any],
    strides: tuple[int, int],
    pads: list[tuple[int, int]],
    lhs_dil: tuple[int, int],
    rhs_dil: tuple[int, int],
    groups: int = 1,
) -> np.ndarray[Any, Any]:
    """Direct-loop convolution oracle, NCHW x OIHW -> NCHW."""
    n, ch, h, w = lhs.shape
    o, _, kh, kw = rhs.shape
    x = np.zeros((n, ch, (h - 1) * lhs_dil[0] + 1, (w - 1) * lhs_dil[1] + 1), np.float64)
    x[:, :, :: lhs_dil[0], :: lhs_dil[1]] = lhs
    x = np.pad(x, ((0, 0), (0, 0), pads[0], pads[1]))
    k = np.zeros((o, rhs.shape[1], (kh - 1) * rhs_dil[0] + 1, (kw - 1) * rhs_dil[1] + 1), np.float64)
    k[:, :, :: rhs_dil[0], :: rhs_dil[1]] = rhs
    oh = (x.shape[2] - k.shape[2]) // strides[0] + 1
    ow = (x.shape[3] - k.shape[3]) // strides[1] + 1
    out = np.zeros((n, o, oh, ow))
    cg, og = ch // groups, o // groups
    for g in range(groups):
        for i in range(oh):
            for j in range(ow):
                patch = x[:, g * cg : (g + 1) * cg, i * strides[0] : i * strides[0] + k.shape[2],
                          j * strides[1] : j * strides[1] + k.shape[3]]
                out[:, g * og : (g + 1) * og, i, j] = np.einsum("nchw,ochw->no", patch, k[g * og : (g + 1) * og])
    return out


def test_conv_general_dilated_nchw(backend: xla_client.Client) -> None:
    lhs = np.arange(6).reshape(1, 1, 2, 3).astype("float32")
    rhs = np.arange(2).reshape(1, 1, 1, 2).astype("float32") * 10
    dimension_numbers = xla_client.make_convolution_dimension_numbers(("NCHW", "OIHW", "NCHW"), 2)
    rng = np.random.default_rng(2)
    lhs2 = rng.standard_normal((2, 4, 7, 6)).astype(np.float32)
    rhs2 = rng.standard_normal((6, 2, 3, 2)).astype(np.float32)
    c = xla_client.XlaBuilder("conv")
    ops.Tuple(
        c,
        [
            ops.ConvGeneralDilated(
                ops.Constant(c, lhs), ops.Constant(c, rhs), [1, 1], [(1, 0), (0, 1)], (2, 1), (1, 1),
                dimension_numbers,
            ),
            ops.ConvGeneralDilated(
                ops.Constant(c, lhs2), ops.Constant(c, rhs2), [2, 1], [(1, 2), (0, 1)], (1, 2), (2, 1),
                dimension_numbers, feature_group_count=2,
            ),
        ],
    )
    got1, got2 = _run(backend, c)
    # jaxlib's own expected value for the first case
    expected1 = np.array([[[[0.0, 0.0, 0.0], [10.0, 20.0, 0.0], [0.0, 0.0, 0.0], [40.0, 50.0, 0.0]]]])
    np.testing.assert_allclose(got1, expected1)
    np.testing.assert_allclose(
        got1, _conv_nchw(lhs, rhs, (1, 1), [(1, 0), (0, 1)], (2, 1), (1, 1)), rtol=1e-6
    )
    expected2 = _conv_nchw(lhs2, rhs2, (2, 1), [(1, 2), (0, 1)], (1, 2), (2, 1), groups=2)
    assert got2.shape == expected2.shape
    np.testing.assert_allclose(got2, expected2, rtol=1e-4, atol=1e-4)


def test_conv_nhwc_layout_and_same_padding(backend: xla_client.Client) -> None:
    rng = np.random.default_rng(3)
    lhs = rng.standard_normal((1, 5, 6, 3)).astype(np.float32)  # NHWC
    rhs = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)  # HWIO
    strides = (2, 2)
    pads = xla_client.window_padding_type_to_pad_values(xla_client.PaddingType.SAME, (5, 6), (3, 3), strides)
    assert pads == [(1, 1), (0, 1)]  # totals (ceil(5/2)-1)*2+3-5 = 2 and (ceil(6/2)-1)*2+3-6 = 1
    dnums = xla_client.make_convolution_dimension_numbers(("NHWC", "HWIO", "NHWC"), 2)
    c = xla_client.XlaBuilder("conv_nhwc")
    ops.ConvGeneralDilated(ops.Constant(c, lhs), ops.Constant(c, rhs), strides, pads, (1, 1), (1, 1), dnums)
    [got] = _run(backend, c)
    expected = _conv_nchw(lhs.transpose(0, 3, 1, 2), rhs.transpose(3, 2, 0, 1), strides, pads, (1, 1), (1, 1))
    assert got.shape == (1, 3, 3, 4)  # SAME: ceil(5/2), ceil(6/2)
    np.testing.assert_allclose(got, expected.transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-4)


# -- Reduce with a computation from another builder --------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64])
def test_reduce_with_sub_builder_computation(backend: xla_client.Client, dtype: Any) -> None:
    x = (np.arange(24).reshape(2, 3, 4) - 7).astype(dtype)
    add, mx = _binary_add(dtype), _binary_max(dtype)
    c = xla_client.XlaBuilder("reduce")
    cx = ops.Constant(c, x)
    zero = ops.Constant(c, np.array(0, dtype))
    low = ops.Constant(c, np.array(-1000, dtype))
    ops.Tuple(
        c,
        [
            ops.Reduce(c, operands=[cx], init_values=[zero], computation=add, dimensions_to_reduce=[0]),
            ops.Reduce(c, [cx], [zero], add, [1, 2]),
            ops.Reduce(c, [cx], [low], mx, [0, 1, 2]),
            ops.Reduce(c, [cx], [low], mx, [2]),
        ],
    )
    s0, s12, mall, m2 = _run(backend, c)
    np.testing.assert_allclose(s0, x.sum(axis=0), rtol=1e-6)
    np.testing.assert_allclose(s12, x.sum(axis=(1, 2)), rtol=1e-6)
    assert mall.shape == () and mall == x.max()
    np.testing.assert_array_equal(m2, x.max(axis=2))
    assert s0.dtype == np.dtype(dtype)


def test_reduce_rejects_mismatched_computation() -> None:
    c = xla_client.XlaBuilder("bad_reduce")
    cx = ops.Constant(c, np.zeros((3,), np.float32))
    with pytest.raises(xs.ShapeError, match=r"Reduce.*add_param0_by_param1.*test_xla_client\.py:\d+"):
        ops.Reduce(c, [cx], [ops.Constant(c, np.float32(0))], _binary_add(np.int32), [0])


# -- tuples and other ops through the compat layer ----------------------------------------------
def test_tuple_result_and_get_tuple_element(backend: xla_client.Client) -> None:
    c = xla_client.XlaBuilder("tuple")
    t = ops.Tuple(
        c,
        [
            ops.Constant(c, np.int32(42)),
            ops.Constant(c, np.array([1.0, 2.0], np.float32)),
            ops.Constant(c, np.array([True, False])),
        ],
    )
    inner = ops.Tuple(c, [ops.GetTupleElement(t, 1), ops.Add(ops.GetTupleElement(t, 0), ops.GetTupleElement(t, 0))])
    comp = c.build(inner)
    assert str(comp.program_shape().result_shape()) == "(f32[2], s32[])"
    compiled = backend.compile(comp)
    got = xla_client.execute_with_python_values(compiled, [], backend)
    assert len(got) == 2
    np.testing.assert_array_equal(got[0], np.array([1.0, 2.0], np.float32))
    assert got[1].dtype == np.int32 and int(got[1]) == 84


def test_pad_with_make_padding_config_and_reduce_window(backend: xla_client.Client) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = xla_client.XlaBuilder("pad")
    cfg = xla_client.make_padding_config([(1, 0, 1), (0, 2, 0)])
    proto = xla_client.PaddingConfig()
    for lo, hi, interior in [(0, 1, 0), (1, 1, 1)]:
        d = xla_client.PaddingConfigDimension()
        d.edge_padding_low, d.edge_padding_high, d.interior_padding = lo, hi, interior
        proto.dimensions.append(d)
    cx = ops.Constant(c, x)
    pads = xla_client.window_padding_type_to_pad_values(xla_client.PaddingType.VALID, (2, 3), (2, 2), (1, 1))
    ops.Tuple(
        c,
        [
            ops.Pad(cx, ops.Constant(c, np.float32(-1)), cfg),
            ops.Pad(cx, ops.Constant(c, np.float32(9)), proto),
            ops.ReduceWindowWithGeneralPadding(
                cx, ops.Constant(c, np.float32(0)), _binary_add(np.float32), (2, 2), (1, 1), (), (), pads
            ),
        ],
    )
    p1, p2, rw = _run(backend, c)
    e1 = np.full((4, 5), -1.0, np.float32)
    e1[1::2, :3] = x
    np.testing.assert_array_equal(p1, e1)
    e2 = np.full((3, 7), 9.0, np.float32)
    e2[:2, 1:6:2] = x
    np.testing.assert_array_equal(p2, e2)
    np.testing.assert_array_equal(rw, x[:-1, :-1] + x[1:, :-1] + x[:-1, 1:] + x[1:, 1:])


def test_op_metadata_in_hlo_text() -> None:
    c = xla_client.XlaBuilder("metadata")
    c.set_op_metadata(xla_client.CurrentSourceInfoMetadata(op_type="Add", op_name="my_add"))
    x = ops.Parameter(c, 0, xla_client.shape_from_pyval(np.float32(0)))
    ops.Add(x, x)
    c.clear_op_metadata()
    text = c.build().as_hlo_text()
    assert 'op_name="my_add"' in text
    assert 'source_file="test_xla_client.py"' in text


# -- buffers ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value",
    [
        np.array([[0.0, 1.0, 2.0]], np.float32),
        np.array([[3.0, 4.0, 5.0]], bfloat16),
        np.arange(8, dtype=np.int8),
        np.array([1 + 1j, 2 - 3j], np.complex64),
        np.array([True, False]),
        np.array(7.5, np.float64),
        np.zeros((0, 4), np.uint16),
        np.arange(12, dtype=np.int64).reshape(3, 4)[:, ::2],  # non-contiguous
    ],
    ids=["f32", "bf16", "s8", "c64", "pred", "f64-scalar", "u16-empty", "s64-strided"],
)
def test_buffer_from_pyval_round_trip(backend: xla_client.Client, value: np.ndarray[Any, Any]) -> None:
    buf = backend.buffer_from_pyval(value)
    assert isinstance(buf, xla_client.Buffer)
    assert buf.shape == value.shape and buf.dtype == value.dtype
    assert buf.xla_shape() == xla_client.shape_from_pyval(value)
    assert buf.device() == backend.devices()[0] and buf.platform() == "cpu"
    assert buf.block_until_ready() is buf
    np.testing.assert_array_equal(np.asarray(buf), value)
    np.testing.assert_array_equal(buf.to_py(), value)
    assert buf.on_device_size_in_bytes() >= (value.nbytes if value.size else 0)
    if value.size:
        assert buf.unsafe_buffer_pointer() > 0
    value_copy = np.array(buf)  # writable copy
    value_copy[...] = 0
    np.testing.assert_array_equal(np.asarray(buf), value)  # the buffer is unaffected


def test_buffer_from_python_scalars_and_device_argument(backend: xla_client.Client) -> None:
    f, i, b = backend.buffer_from_pyval(1.5), backend.buffer_from_pyval(3), backend.buffer_from_pyval(True)
    assert (f.dtype, i.dtype, b.dtype) == (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.bool_))
    assert float(np.asarray(f)) == 1.5 and int(np.asarray(i)) == 3 and bool(np.asarray(b))
    x = np.arange(8, dtype=np.int32)
    for device in backend.local_devices():
        buf = backend.buffer_from_pyval(x, device=device)
        assert buf.device() == device
        np.testing.assert_array_equal(x, np.asarray(buf))
        again = backend.buffer_from_pyval(buf)  # a fresh copy, not an alias
        buf.delete()
        np.testing.assert_array_equal(np.asarray(again), x)
    with pytest.raises(xs.DTypeError):
        backend.buffer_from_pyval(np.array(["a", "b"]))


def test_buffer_delete_then_use(backend: xla_client.Client) -> None:
    c = xla_client.XlaBuilder("neg")
    ops.Neg(ops.Parameter(c, 0, xla_client.shape_from_pyval(np.zeros(2, np.float32))))
    compiled = backend.compile(c.build())
    buf = backend.buffer_from_pyval(np.array([1.0, 2.0], np.float32))
    assert not buf.is_deleted()
    buf.delete()
    assert buf.is_deleted()
    buf.delete()  # twice is fine
    with pytest.raises(RuntimeError, match="deleted"):
        compiled.execute([buf])
    with pytest.raises(xla_client.XlaRuntimeError, match="deleted"):
        np.asarray(buf)
    with pytest.raises(xla_client.XlaRuntimeError, match="deleted"):
        buf.block_until_ready()
    with pytest.raises(xla_client.XlaRuntimeError, match="deleted"):
        buf.copy_to_host_async()


def test_live_buffers() -> None:
    backend = xla_client.make_cpu_client()  # a fresh client: nothing tracked yet
    assert backend.live_buffers() == []
    arg0 = backend.buffer_from_pyval(np.array([]))
    arg1 = backend.buffer_from_pyval(np.array([[0.0, 1.0, 2.0]], np.float32))
    arg2 = backend.buffer_from_pyval(np.array([[3.0, 4.0, 5.0]], bfloat16))
    live = backend.live_buffers()
    assert len(live) == 3
    assert live[0] is arg2 and live[1] is arg1 and live[2] is arg0
    arg1.delete()
    assert backend.live_buffers() == [arg2, arg0]
    del arg2, live
    gc.collect()
    assert backend.live_buffers() == [arg0]
    arg0.delete()
    assert backend.live_buffers() == []
    # executable outputs are tracked too
    c = xla_client.XlaBuilder("two")
    ops.Tuple(c, [ops.Constant(c, np.int32(1)), ops.Constant(c, np.int32(2))])
    outs = backend.compile(c.build()).execute([])
    assert backend.live_buffers() == outs[::-1]


# -- executing with buffers -------------------------------------------------------------------
def test_execute_with_buffers(backend: xla_client.Client) -> None:
    a = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    b = np.array([10.0, 20.0], np.float32)
    c = xla_client.XlaBuilder("axpy")
    pa = ops.Parameter(c, 0, xla_client.shape_from_pyval(a), "a")
    pb = ops.Parameter(c, 1, xla_client.shape_from_pyval(b), "b")
    ops.Tuple(c, [ops.Add(pa, pb, broadcast_dimensions=(1,)), ops.Reduce(c, [pa], [ops.Constant(c, np.float32(0))],
                                                                          _binary_add(np.float32), [0, 1])])
    compiled = backend.compile(c.build())
    assert compiled.local_devices() == [backend.devices()[0]]
    ba, bb = backend.buffer_from_pyval(a), backend.buffer_from_pyval(b)
    out = compiled.execute([ba, bb])
    assert isinstance(out, list) and len(out) == 2 and all(isinstance(o, xla_client.Buffer) for o in out)
    np.testing.assert_array_equal(np.asarray(out[0]), a + b)
    assert float(np.asarray(out[1])) == a.sum()
    # outputs feed straight back in
    again = compiled.execute([out[0], bb])
    np.testing.assert_array_equal(np.asarray(again[0]), a + 2 * b)
    # the sharded form on one device: [argument][device] in, [output][device] out
    sharded = compiled.execute_sharded_on_local_devices([[ba], [bb]])
    assert len(sharded) == 2 and len(sharded[0]) == 1
    np.testing.assert_array_equal(np.asarray(sharded[0][0]), a + b)
    res = compiled.execute_sharded([ba, bb]).disassemble_into_single_device_arrays()
    assert float(np.asarray(res[1][0])) == a.sum()


def test_execute_argument_errors(backend: xla_client.Client) -> None:
    c = xla_client.XlaBuilder("argcheck")
    ops.Neg(ops.Parameter(c, 0, xla_client.shape_from_pyval(np.zeros((2, 3), np.float32)), "x"))
    compiled = backend.compile(c.build())
    with pytest.raises(xs.ShapeError, match=r"argument 0 \('x'\).*f32\[3,2\].*expected f32\[2,3\]"):
        compiled.execute([backend.buffer_from_pyval(np.zeros((3, 2), np.float32))])
    with pytest.raises(xs.DTypeError, match=r"argument 0 \('x'\).*f64\[2,3\]"):
        xla_client.execute_with_python_values(compiled, [np.zeros((2, 3))], backend)
    with pytest.raises(xs.ShapeError, match="expected 1 argument"):
        compiled.execute([])
    with pytest.raises(xs.ShapeError, match="argument 0 must be a list of 1 buffers"):
        compiled.execute_sharded_on_local_devices([[]])


# -- computations from proto bytes, HLO modules ---------------------------------------------------
def _dot_add_computation() -> xla_client.XlaComputation:
    c = xla_client.XlaBuilder("dot_add")
    x = ops.Parameter(c, 0, xla_client.Shape.array_shape(xla_client.PrimitiveType.F32, (2, 2)))
    ops.Add(ops.Dot(x, x), ops.Constant(c, np.float32(1)))
    return c.build()


def test_xla_computation_from_proto_bytes(backend: xla_client.Client) -> None:
    comp = _dot_add_computation()
    assert isinstance(comp, xla_client.XlaComputation) and isinstance(comp, xs.XlaComputation)
    assert comp.name == "dot_add" and comp.name() == "dot_add"
    proto = comp.as_serialized_hlo_module_proto()
    loaded = xla_client.XlaComputation(proto)
    assert isinstance(loaded, xla_client.XlaComputation)
    assert loaded.name() == "dot_add"
    assert str(loaded.program_shape().result_shape()) == "f32[2,2]"
    text = loaded.as_hlo_text()
    assert "dot(" in text and "add(" in text
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    [got] = xla_client.execute_with_python_values(backend.compile(loaded), [x], backend)
    np.testing.assert_allclose(got, x @ x + 1)
    # HloModule: text, proto and name
    module = comp.get_hlo_module()
    assert module.name == "dot_add" and "dot(" in module.to_string()
    assert comp.as_hlo_module().to_string() == module.to_string()
    again = xla_client.HloModule.from_serialized_hlo_module_proto(module.as_serialized_hlo_module_proto())
    assert "dot(" in again.to_string()
    twin = copy.copy(comp)
    assert isinstance(twin, xla_client.XlaComputation) and twin.as_hlo_text() == comp.as_hlo_text()


def test_xla_computation_bad_input() -> None:
    with pytest.raises(xla_client.XlaRuntimeError) as info:
        xla_client.XlaComputation(b"\x08\x01garbage that is no proto")
    assert isinstance(info.value, xs.FormatError)
    with pytest.raises(TypeError, match="expected bytes"):
        xla_client.XlaComputation("HloModule m")  # type: ignore[arg-type]
    with pytest.raises(xla_client.XlaRuntimeError):
        xla_client.HloModule.from_serialized_hlo_module_proto(b"\xff\xff")


def test_hlo_modules_of_compiled_executable(backend: xla_client.Client) -> None:
    compiled = backend.compile(_dot_add_computation())
    modules = compiled.hlo_modules()
    assert len(modules) >= 1
    text = modules[0].to_string()
    assert text.startswith("HloModule dot_add")
    assert "dot(" in text and "add(" in text
    assert modules[0].name == "dot_add"
    assert len(modules[0].as_serialized_hlo_module_proto()) > 0
    assert "dot(" in compiled.get_hlo_text() and compiled.as_text() == compiled.get_hlo_text()
    assert compiled.get_compiled_memory_stats().argument_size_in_bytes == 16
    assert compiled.cost_analysis()["flops"] > 0


def test_compile_from_stablehlo_text(backend: xla_client.Client) -> None:
    text = xla_client._xla.mlir.xla_computation_to_mlir_module(_dot_add_computation())
    assert "stablehlo.dot" in text
    x = np.eye(2, dtype=np.float32) * 3
    [got] = xla_client.execute_with_python_values(backend.compile(text), [x], backend)
    np.testing.assert_allclose(got, x @ x + 1)
    comp = xla_client._xla.mlir.mlir_module_to_xla_computation(text)
    assert isinstance(comp, xla_client.XlaComputation) and "dot(" in comp.as_hlo_text()
    with pytest.raises(xla_client.XlaRuntimeError):
        backend.compile("module { this is not mlir")


# -- serialization ------------------------------------------------------------------------------
def test_serialize_deserialize_executable(backend: xla_client.Client) -> None:
    compiled = backend.compile(_dot_add_computation())
    data = backend.serialize_executable(compiled)
    assert isinstance(data, bytes) and data
    loaded = backend.deserialize_executable(data)
    assert loaded.fingerprint == compiled.fingerprint
    x = np.array([[0.5, -1.0], [2.0, 0.0]], np.float32)
    [a] = xla_client.execute_with_python_values(compiled, [x], backend)
    [b] = xla_client.execute_with_python_values(loaded, [x], backend)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(b, x @ x + 1)
    # the former (serialized, compile_options) order works too
    also = backend.deserialize_executable(data, xla_client.CompileOptions())
    np.testing.assert_array_equal(xla_client.execute_with_python_values(also, [x], backend)[0], a)
    with pytest.raises(xla_client.XlaRuntimeError, match="corrupt|truncated"):
        backend.deserialize_executable(data[:-3])
    compiled.delete()
    assert compiled.is_deleted()
    with pytest.raises(xla_client.XlaRuntimeError, match="deleted"):
        compiled.execute([x])


# -- compile options, replicas ------------------------------------------------------------------
def test_compile_options_surface() -> None:
    options = xla_client.CompileOptions()
    assert options.num_replicas == 1 and options.num_partitions == 1
    build = options.executable_build_options
    build.num_replicas = 2
    assert options.num_replicas == 2
    options.device_assignment = xla_client.DeviceAssignment.create(np.array([[0], [1]]))
    assert build.device_assignment is not None and build.device_assignment.replica_count() == 2
    assert build.device_assignment.computation_count() == 1
    build.debug_options.xla_cpu_enable_fast_math = False
    assert ("xla_cpu_enable_fast_math", False) in options.env_option_overrides
    assert build.debug_options.xla_cpu_enable_fast_math is False
    with pytest.raises(AttributeError):
        build.debug_options.not_an_option = 1
    with pytest.raises(xs.ShapeError, match="DeviceAssignment.create"):
        xla_client.DeviceAssignment.create(np.array([[0.5]]))
    da = xla_client.DeviceAssignment.create([[0, 1], [2, 3]])
    assert (da.replica_count(), da.computation_count()) == (2, 2)


def test_compile_errors_are_runtime_errors(backend: xla_client.Client) -> None:
    comp = _dot_add_computation()
    options = xla_client.CompileOptions()
    options.num_replicas = 2  # the default client has one device
    with pytest.raises(xla_client.XlaRuntimeError) as info:
        backend.compile(comp, compile_options=options)
    assert isinstance(info.value, xs.CompileError) and "num_replicas=2" in str(info.value)
    options = xla_client.CompileOptions()
    options.tuple_arguments = True
    with pytest.raises(xla_client.CompileError, match="tuple_arguments"):
        backend.compile(comp, compile_options=options)
    options = xla_client.CompileOptions()
    options.device_assignment = xla_client.DeviceAssignment.create([[5]])  # no device 5
    with pytest.raises(xla_client.CompileError, match="5"):
        backend.compile(comp, compile_options=options)
    with pytest.raises(TypeError, match="XlaComputation"):
        backend.compile(42)


def test_replicated_execution_on_two_cpu_devices() -> None:
    backend = xla_client.make_cpu_client(num_devices=2)
    assert backend.device_count() == 2 and backend.platform == "cpu"
    devices = backend.devices()
    assert backend.get_default_device_assignment(2) == devices
    c = xla_client.XlaBuilder("replicas")
    x = ops.Parameter(c, 0, xla_client.shape_from_pyval(np.zeros(3, np.float32)))
    rid = ops.ConvertElementType(ops.ReplicaId(c), xla_client.PrimitiveType.F32)
    ops.Tuple(c, [ops.Add(x, rid), ops.CrossReplicaSum(x)])
    options = xla_client.CompileOptions()
    options.num_replicas = 2
    options.device_assignment = xla_client.DeviceAssignment.create([[1], [0]])  # replica 0 on device 1
    compiled = backend.compile(c.build(), compile_options=options)
    assert compiled.local_devices() == [devices[1], devices[0]]
    v0, v1 = np.array([1.0, 2.0, 3.0], np.float32), np.array([10.0, 20.0, 30.0], np.float32)
    results = xla_client.execute_with_python_values_replicated(compiled, [[v0], [v1]], backend)
    assert len(results) == 2 and len(results[0]) == 2
    np.testing.assert_array_equal(results[0][0], v0 + 0)
    np.testing.assert_array_equal(results[1][0], v1 + 1)
    np.testing.assert_array_equal(results[0][1], v0 + v1)
    np.testing.assert_array_equal(results[1][1], v0 + v1)
    bufs = [backend.buffer_from_pyval(v, d) for v, d in zip((v0, v1), compiled.local_devices(), strict=True)]
    out = compiled.execute_sharded_on_local_devices([bufs])
    assert [o.device() for o in out[0]] == compiled.local_devices()
    np.testing.assert_array_equal(np.asarray(out[0][1]), v1 + 1)
    # the newer compile(module, executable_devices, options) form
    single = backend.compile(_dot_add_computation(), [devices[1]])
    assert single.local_devices() == [devices[1]]
    with pytest.raises(xla_client.CompileError, match="executable_devices"):
        backend.compile(_dot_add_computation(), devices)
    with pytest.raises(xla_client.XlaRuntimeError, match="execute_replicated"):
        compiled.execute([bufs[0]])


def test_gpu_backends_explain_the_plugin_route() -> None:
    assert xla_client.get_local_backend().platform == "cpu"
    with pytest.raises(xla_client.XlaRuntimeError, match="load_pjrt_plugin"):
        xla_client.make_gpu_client()
    with pytest.raises(xla_client.XlaRuntimeError, match="load_pjrt_plugin"):
        xla_client.get_local_backend("gpu")
