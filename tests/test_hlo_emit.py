"""The direct HLO printer (``xlasdk/_hlo_emit.py``), the fast path of ``as_hlo_text()``.

Every check goes through XLA: the printed text must parse with XLA's HLO parser
(``XlaComputation.from_hlo_text``), have the computation's program shape, and compute the same
values as the computation compiled from StableHLO (``helpers.check_direct_hlo``). Constants are
checked bit for bit against the numpy arrays they came from; metadata against what XLA's own
converter writes. ``test_fuzz_shape_rules.py`` runs the same check on its random graphs.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import PerTestRng, assert_same_outputs, check_direct_hlo, run
from xlasdk import ops
from xlasdk._jaxlib import mlir as _mlir

RNG = PerTestRng(7)


def p(b: xs.XlaBuilder, i: int, dt: Any, dims: tuple[int, ...], name: str = "") -> xs.XlaOp:
    return ops.Parameter(b, i, xs.Shape.array_shape(np.dtype(dt), dims), name)


def data(dt: Any, dims: tuple[int, ...], lo: float = -3, hi: float = 3) -> np.ndarray[Any, Any]:
    dt = np.dtype(dt)
    if dt == np.bool_:
        return RNG.integers(0, 2, dims).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return RNG.integers(max(info.min, -100), min(info.max, 100), dims, endpoint=True).astype(dt)
    if dt.kind == "c":
        return (RNG.uniform(lo, hi, dims) + 1j * RNG.uniform(lo, hi, dims)).astype(dt)
    return RNG.uniform(lo, hi, dims).astype(dt)


def direct(comp: xs.XlaComputation, *args: Any) -> None:
    """The direct printer handles ``comp`` and XLA agrees with it."""
    assert check_direct_hlo(comp, *args), "expected the direct HLO printer to handle this computation"


# -- element-wise ----------------------------------------------------------------------------------

UNARY_FLOAT = [
    "Abs", "Neg", "Exp", "Expm1", "Log", "Log1p", "Sqrt", "Rsqrt", "Cbrt", "Sin", "Cos", "Tan", "Tanh",
    "Logistic", "Floor", "Ceil", "Round", "RoundNearestEven", "Sign", "IsFinite",
]
BINARY_FLOAT = ["Add", "Sub", "Mul", "Div", "Rem", "Max", "Min", "Pow", "Atan2"]
BINARY_INT = ["Add", "Sub", "Mul", "Div", "Rem", "Max", "Min", "Pow", "And", "Or", "Xor",
              "ShiftLeft", "ShiftRightArithmetic", "ShiftRightLogical"]


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
def test_float_elementwise(dt: Any) -> None:
    b = xs.XlaBuilder("float_ops")
    x, y = p(b, 0, dt, (2, 3), "x"), p(b, 1, dt, (2, 3), "y")
    outs = [getattr(ops, n)(x) for n in UNARY_FLOAT] + [getattr(ops, n)(x, y) for n in BINARY_FLOAT]
    direct(b.build(ops.Tuple(b, outs)), data(dt, (2, 3), 0.1, 3), data(dt, (2, 3), 0.5, 2))


@pytest.mark.parametrize("dt", [np.int8, np.int32, np.int64, np.uint8, np.uint32])
def test_int_elementwise(dt: Any) -> None:
    b = xs.XlaBuilder("int_ops")
    x, y = p(b, 0, dt, (7,)), p(b, 1, dt, (7,))
    outs = [getattr(ops, n)(x, y) for n in BINARY_INT]
    outs += [ops.Not(x), ops.PopulationCount(x), ops.Clz(x), ops.ConvertElementType(x, np.float32)]
    if np.dtype(dt).kind == "i":
        outs += [ops.Abs(x), ops.Neg(x), ops.Sign(x)]
    y_data = np.array([1, 2, 3, 0, 5, 7, 2], dt)  # includes a zero divisor (guarded in xlasdk)
    direct(b.build(ops.Tuple(b, outs)), data(dt, (7,)), y_data)


def test_complex_pred_and_conversions() -> None:
    b = xs.XlaBuilder("mixed")
    re_, im = p(b, 0, np.float32, (3,)), p(b, 1, np.float32, (3,))
    c = ops.Complex(re_, im)
    m = p(b, 2, np.bool_, (3,))
    outs = [
        c, ops.Real(c), ops.Imag(c), ops.Abs(c), ops.Exp(c), ops.Mul(c, c),
        ops.And(m, ops.Not(m)), ops.Or(m, m), ops.Xor(m, m),
        ops.ConvertElementType(re_, np.int32), ops.ConvertElementType(m, np.float32),
        ops.BitcastConvertType(re_, np.uint32), ops.BitcastConvertType(re_, np.uint8),
        ops.ConvertElementType(re_, ml_dtypes.bfloat16),
    ]
    direct(b.build(ops.Tuple(b, outs)), data(np.float32, (3,)), data(np.float32, (3,)), data(np.bool_, (3,)))


@pytest.mark.parametrize("dt", [np.float32, np.int32, np.uint16, np.bool_])
def test_compare_every_direction(dt: Any) -> None:
    b = xs.XlaBuilder("cmp")
    x, y = p(b, 0, dt, (4,)), p(b, 1, dt, (4,))
    outs = [ops.Compare(x, y, d) for d in ("EQ", "NE", "LT", "LE", "GT", "GE")]
    if np.dtype(dt).kind == "f":
        outs += [ops.Compare(x, y, d, "TOTALORDER") for d in ("EQ", "LT", "GE")]
    xd, yd = data(dt, (4,)), data(dt, (4,))
    if np.dtype(dt).kind == "f":
        xd[:2] = [np.nan, -0.0]
        yd[:2] = [np.nan, 0.0]  # FLOAT and TOTALORDER disagree on both
    direct(b.build(ops.Tuple(b, outs)), xd, yd)


def test_compare_type_printed_only_when_not_default() -> None:
    b = xs.XlaBuilder("cmp")
    x = p(b, 0, np.float32, (2,))
    comp = b.build(ops.Tuple(b, [ops.Lt(x, x), ops.Compare(x, x, "LT", "TOTALORDER")]))
    text = comp.as_hlo_text()
    assert "direction=LT, metadata" in text
    assert "direction=LT, type=TOTALORDER" in text


def test_select_and_clamp_broadcast_scalars() -> None:
    b = xs.XlaBuilder("sel")
    x, y = p(b, 0, np.float32, (2, 3)), p(b, 1, np.float32, (2, 3))
    flag = p(b, 2, np.bool_, ())
    lo, hi = p(b, 3, np.float32, ()), p(b, 4, np.float32, ())
    outs = [ops.Select(flag, x, y), ops.Select(ops.Lt(x, y), x, y), ops.Clamp(lo, x, hi), ops.Clamp(y, x, y)]
    comp = b.build(ops.Tuple(b, outs))
    assert comp.as_hlo_text().count("broadcast(") == 3  # scalar pred, lo and hi
    for flag_v in (True, False):
        direct(comp, data(np.float32, (2, 3)), data(np.float32, (2, 3)), np.bool_(flag_v), np.float32(-1),
               np.float32(1))


# -- constants, bit for bit ----------------------------------------------------------------------

def _special(dt: Any) -> np.ndarray[Any, Any]:
    dt = np.dtype(dt)
    if dt == np.bool_:
        return np.array([True, False, True, True, False])
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return np.array([info.min, info.max, 0, 1, info.max // 3], dt)
    if dt.kind == "c":  # XLA's parser makes (nan, x) all NaN: no NaN parts here
        part = np.float32 if dt == np.complex64 else np.float64
        v = _special(part)
        v = v[~np.isnan(v)]
        out = np.zeros(len(v), dt)
        out.real, out.imag = v, v[::-1]
        return out
    fi = ml_dtypes.finfo(dt)
    # No -0.0: XLA's HLO parser reads "-0" (which its printer writes too) as +0.
    vals = [0.0, np.inf, -np.inf, np.nan, float(fi.max), float(-fi.max), float(fi.tiny),
            float(fi.smallest_subnormal), 0.1, 1 / 3, -2.5, 1e4]
    rand = (RNG.standard_normal(40) * 10.0 ** RNG.integers(-8, 8, 40)).astype(np.float64)
    with np.errstate(over="ignore"):
        out = np.concatenate([np.array(vals), rand]).astype(dt)
    out[out == 0] = 0  # values that underflowed to -0.0 (see above)
    return out


def bits(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The raw bits of ``a`` (complex: of each part), flattened."""
    flat = np.ascontiguousarray(a).reshape(-1)
    size = flat.dtype.itemsize // (2 if flat.dtype.kind == "c" else 1)
    return flat.view(f"u{size}")


@pytest.mark.parametrize(
    "dt", [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
           np.float16, ml_dtypes.bfloat16, np.float32, np.float64, np.complex64, np.complex128],
)
def test_constants_round_trip_bit_for_bit(dt: Any) -> None:
    """Every value, including extremes, subnormals, infinities and NaN, reads back bit for bit."""
    v = _special(dt)
    b = xs.XlaBuilder("consts")
    outs = [ops.Constant(b, v), ops.Constant(b, v[2]), ops.Constant(b, v[:4].reshape(2, 2))]
    comp = b.build(ops.Tuple(b, outs))
    text = comp.as_hlo_text()
    assert text == comp._direct_hlo_text(True, True)
    got = run(xs.XlaComputation.from_hlo_text(text))
    for g, want in zip(got, [v, v[2], v[:4].reshape(2, 2)], strict=True):
        assert g.dtype == want.dtype and g.shape == want.shape
        np.testing.assert_array_equal(bits(g), bits(np.asarray(want)))


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
def test_large_float_constants_round_trip_bit_for_bit(dt: Any) -> None:
    """Constants of more than 1000 elements take the vectorized %.Ng path: still exact."""
    v = np.concatenate([_special(dt)] * 3 + [
        (RNG.standard_normal(3000) * 10.0 ** RNG.integers(-30, 30, 3000)).astype(np.float64)
    ]).astype(dt) if dt is not np.float16 else np.concatenate(
        [_special(dt)] * 3 + [RNG.standard_normal(3000).astype(dt)]
    )
    v[v == 0] = 0  # no -0.0 (see _special)
    b = xs.XlaBuilder("big")
    comp = b.build(ops.Constant(b, v.reshape(-1, 3)[:1000]))
    got = run(xs.XlaComputation.from_hlo_text(comp.as_hlo_text()))[0]
    np.testing.assert_array_equal(bits(got), bits(v.reshape(-1, 3)[:1000]))


def test_constant_text_reads_like_xla() -> None:
    b = xs.XlaBuilder("c")
    outs = [ops.Constant(b, np.float32(0.1)), ops.Constant(b, np.array([[1, 2], [3, 4]], np.int32)),
            ops.Constant(b, np.array([1.5, -np.inf, np.nan, -0.0], np.float32)), ops.Constant(b, True)]
    text = b.build(ops.Tuple(b, outs)).as_hlo_text()
    assert "f32[] constant(0.1)" in text
    assert "s32[2,2]{1,0} constant({ { 1, 2 }, { 3, 4 } })" in text
    assert "f32[4]{0} constant({1.5, -inf, nan, -0.0})" in text  # XLA writes -0, which it reads as +0
    assert "pred[] constant(true)" in text


def test_negative_zero_constants_keep_their_sign_in_the_parsed_module() -> None:
    """XLA's printer writes -0 and its parser reads that as +0; xlasdk writes -0.0. (XLA:CPU may
    still return +0 for a constant output at run time, so this checks the parsed module.)"""
    b = xs.XlaBuilder("negzero")
    comp = b.build(ops.Tuple(b, [ops.Constant(b, np.float32(-0.0)), ops.Constant(b, np.array([-0.0, 2], np.float64))]))
    parsed = _mlir.hlo_module_to_text(_mlir.hlo_module_from_text(comp.as_hlo_text()))
    assert "f32[] constant(-0)" in parsed and "constant({-0, 2})" in parsed
    converted = _mlir.hlo_module_to_text(_mlir.hlo_module_from_text(comp._converted_hlo_text()))
    assert "f32[] constant(0)" in converted  # the converter's text loses the sign


def test_splat_constant_is_scalar_and_broadcast() -> None:
    b = xs.XlaBuilder("splat")
    x = p(b, 0, np.float32, (2, 3))
    comp = b.build(ops.Add(x, 2.5))
    text = comp.as_hlo_text()
    assert re.search(r"%constant\.\d+ = f32\[\] constant\(2\.5\)\n  %broadcast\.\d+ = f32\[2,3\]\{1,0\} broadcast\(",
                     text)
    direct(comp, data(np.float32, (2, 3)))


def test_large_constants_elided_like_xla() -> None:
    b = xs.XlaBuilder("big")
    comp = b.build(ops.Tuple(b, [ops.Constant(b, np.arange(10, dtype=np.float32)),
                                 ops.Constant(b, np.arange(11, dtype=np.float32))]))
    short = comp.as_hlo_text(print_large_constants=False)
    assert short == comp._direct_hlo_text(True, False)
    assert "constant({0, 1, 2, 3, 4, 5, 6, 7, 8, 9})" in short and "f32[11]{0} constant({...})" in short
    conv = comp._converted_hlo_text(print_large_constants=False)
    assert "f32[11]{0} constant({...})" in conv and "constant({0, 1, 2, 3, 4, 5, 6, 7, 8, 9})" in conv


# -- data movement, dot, reduce, calls -------------------------------------------------------------

def test_shape_ops() -> None:
    b = xs.XlaBuilder("shaping")
    x = p(b, 0, np.float32, (2, 3, 4))
    v = p(b, 1, np.int32, (4,))
    outs = [
        ops.Reshape(x, new_sizes=(6, 4)), ops.Transpose(x, (2, 0, 1)), ops.Slice(x, (0, 1, 0), (2, 3, 4), (1, 1, 2)),
        ops.SliceInDim(x, 1, 4, 2, 2), ops.ConcatInDim(b, [x, x], 1),
        ops.Iota(b, xs.Shape.array_shape(np.int32, (3, 5)), 1),
        ops.BroadcastInDim(v, (3, 4), (1,)), ops.Broadcast(v, (2,)), ops.Collapse(x, (0, 1)),
        ops.Transpose(ops.Transpose(x, (1, 0, 2)), (1, 0, 2)),
    ]
    direct(b.build(ops.Tuple(b, outs)), data(np.float32, (2, 3, 4)), data(np.int32, (4,)))


def test_pad_reverse_dynamic_slices_reduce_precision() -> None:
    b = xs.XlaBuilder("moves")
    x = p(b, 0, np.float32, (3, 4))
    i, j = p(b, 1, np.int32, ()), p(b, 2, np.int32, ())
    zero = ops.Constant(b, np.float32(0))
    outs = [
        ops.Pad(x, zero, [(1, 2, 0), (0, 0, 1)]), ops.Pad(x, zero, [(-1, 1, 1), (2, -2, 0)]),
        ops.Rev(x, (0, 1)), ops.DynamicSlice(x, [i, j], (2, 2)),
        ops.DynamicUpdateSlice(x, ops.Constant(b, np.ones((2, 2), np.float32)), [i, j]),
        ops.ReducePrecision(x, 5, 10),
    ]
    comp = b.build(ops.Tuple(b, outs))
    text = comp.as_hlo_text()
    assert "padding=1_2_0x0_0_1" in text and "padding=-1_1_1x2_-2_0" in text  # as XLA writes them
    assert "dynamic_slice_sizes={2,2}" in text and "exponent_bits=5, mantissa_bits=10" in text
    xd = data(np.float32, (3, 4))
    for iv, jv in ((0, 0), (1, 3), (-5, 9)):  # start indices are clamped
        direct(comp, xd, np.int32(iv), np.int32(jv))


def test_sort_single_multi_and_stable() -> None:
    b = xs.XlaBuilder("sorts")
    k = p(b, 0, np.float32, (2, 5))
    v = p(b, 1, np.int32, (2, 5))
    s1 = ops.Sort(b, k, dimension=1)
    s2 = ops.Sort(b, [k, v], dimension=0, is_stable=True)
    comp = b.build(ops.Tuple(b, [s1, ops.GetTupleElement(s2, 0), ops.GetTupleElement(s2, 1)]))
    text = comp.as_hlo_text()
    assert "dimensions={1}, to_apply=" in text and "dimensions={0}, is_stable=true, to_apply=" in text
    kd = np.array([[3, 1, 2, 1, 0], [1, 1, 1, 0, 2]], np.float32)
    vd = np.arange(10, dtype=np.int32).reshape(2, 5)
    direct(comp, kd, vd)
    got = run(comp, kd, vd)
    np.testing.assert_array_equal(got[0], np.sort(kd, axis=1))
    np.testing.assert_array_equal(got[2], np.take_along_axis(vd, np.argsort(kd, axis=0, kind="stable"), 0))


def test_dot_general_forms() -> None:
    b = xs.XlaBuilder("dots")
    x, y = p(b, 0, np.float32, (2, 3, 4)), p(b, 1, np.float32, (2, 4, 5))
    m, n = p(b, 2, np.float32, (3, 4)), p(b, 3, np.float32, (4,))
    dn = xs.DotDimensionNumbers(lhs_contracting_dimensions=[2], rhs_contracting_dimensions=[1],
                                lhs_batch_dimensions=[0], rhs_batch_dimensions=[0])
    outs = [
        ops.DotGeneral(x, y, dn), ops.Dot(m, n), ops.Dot(m, ops.Transpose(m, (1, 0))),
        ops.Dot(m, n, precision_config=xs.PrecisionConfig(["HIGHEST", "DEFAULT"])),
        ops.Dot(m, n, preferred_element_type=np.float64),
    ]
    comp = b.build(ops.Tuple(b, outs))
    text = comp.as_hlo_text()
    assert "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}" in text
    assert "operand_precision={highest,default}" in text
    direct(comp, data(np.float32, (2, 3, 4)), data(np.float32, (2, 4, 5)), data(np.float32, (3, 4)),
           data(np.float32, (4,)))


def test_gather_and_scatter_of_points_print_empty_lists() -> None:
    """HLO's parser wants offset_dims/update_window_dims & co. even when empty (StableHLO omits them)."""
    b = xs.XlaBuilder("points")
    src, idx, upd = p(b, 0, np.float32, (4, 3)), p(b, 1, np.int32, (5, 2)), p(b, 2, np.float32, (5,))
    g = ops.Gather(src, idx, xs.GatherDimensionNumbers(collapsed_slice_dims=[0, 1], start_index_map=[0, 1],
                                                       index_vector_dim=1), (1, 1))
    sc = ops.Scatter(src, idx, upd, lambda a, c: ops.Max(a, c),
                     xs.ScatterDimensionNumbers(inserted_window_dims=[0, 1], scatter_dims_to_operand_dims=[0, 1],
                                                index_vector_dim=1))
    comp = b.build(ops.Tuple(b, [g, sc]))
    text = comp.as_hlo_text()
    assert "offset_dims={}, collapsed_slice_dims={0,1}" in text
    assert "update_window_dims={}, inserted_window_dims={0,1}" in text
    args = [data(np.float32, (4, 3)), np.array([[0, 0], [3, 2], [1, 1], [3, 2], [2, 0]], np.int32),
            data(np.float32, (5,))]
    direct(comp, *args)
    got = run(comp, *args)
    np.testing.assert_array_equal(got[0], args[0][args[1][:, 0], args[1][:, 1]])
    want = args[0].copy()
    np.maximum.at(want, (args[1][:, 0], args[1][:, 1]), args[2])
    np.testing.assert_array_equal(got[1], want)


def test_fft_linalg_rng_and_barrier() -> None:
    b = xs.XlaBuilder("misc")
    x = p(b, 0, np.complex64, (2, 4))
    r = p(b, 1, np.float32, (2, 8))
    a, rhs = p(b, 2, np.float32, (3, 3)), p(b, 3, np.float32, (3, 2))
    state = p(b, 4, np.uint64, (2,))
    rng = ops.RngBitGenerator("THREE_FRY", state, xs.Shape.array_shape(np.uint32, (3,)))
    barrier = ops.OptimizationBarrier(ops.Tuple(b, [a, rhs]))
    outs = [
        ops.Fft(x, "IFFT", [4]), ops.Fft(r, "RFFT", [8]), ops.Cholesky(a, lower=True),
        ops.TriangularSolve(a, rhs, left_side=True, lower=True, unit_diagonal=False, transpose_a="NO_TRANSPOSE"),
        ops.GetTupleElement(rng, 0), ops.GetTupleElement(rng, 1), ops.GetTupleElement(barrier, 1),
    ]
    comp = b.build(ops.Tuple(b, outs))
    text = comp.as_hlo_text()
    assert "fft_type=IFFT, fft_length={4}" in text and "algorithm=rng_three_fry" in text and " opt-barrier(" in text
    m = RNG.standard_normal((3, 3)).astype(np.float32)
    spd = (m @ m.T + 3 * np.eye(3)).astype(np.float32)
    args = [data(np.complex64, (2, 4)), data(np.float32, (2, 8)), spd, data(np.float32, (3, 2)),
            np.array([1, 2], np.uint64)]
    direct(comp, *args)
    got = run(xs.XlaComputation.from_hlo_text(text), *args)
    np.testing.assert_allclose(got[0], np.fft.ifft(args[0], axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], np.fft.rfft(args[1], axis=1), rtol=1e-5, atol=1e-5)
    low = np.linalg.cholesky(spd.astype(np.float64))
    np.testing.assert_allclose(np.tril(got[2]), low, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[3], np.linalg.solve(np.tril(spd.astype(np.float64)), args[3]), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(got[6], args[3])


def test_convolutions_with_the_same_attributes_and_other_kernels() -> None:
    """The window size comes from the kernel's shape, not the attribute text (a cache keyed on the
    text alone printed the first kernel's size for both)."""
    b = xs.XlaBuilder("two_convs")
    x = p(b, 0, np.float32, (1, 1, 5, 5))
    k2, k3 = p(b, 1, np.float32, (1, 1, 2, 2)), p(b, 2, np.float32, (1, 1, 3, 3))
    comp = b.build(ops.Tuple(b, [ops.ConvGeneralDilated(x, k2, (1, 1), "VALID"),
                                 ops.ConvGeneralDilated(x, k3, (1, 1), "VALID")]))
    text = comp.as_hlo_text()
    assert "window={size=2x2}" in text and "window={size=3x3}" in text
    direct(comp, data(np.float32, (1, 1, 5, 5)), data(np.float32, (1, 1, 2, 2)), data(np.float32, (1, 1, 3, 3)))


def _four_replicas(comp: xs.XlaComputation, per_replica: list[list[Any]]) -> list[list[np.ndarray[Any, Any]]]:
    dev = xs.client("cpu", num_devices=4).devices()[0]
    exe = xs.compile(comp, dev, options=xs.CompileOptions(num_replicas=4))
    return [[np.asarray(o) for o in (r if isinstance(r, tuple) else (r,))] for r in exe.execute_replicated(per_replica)]


def test_collectives_on_four_replicas() -> None:
    b = xs.XlaBuilder("collectives")
    x = p(b, 0, np.float32, (4, 2))
    outs = [
        ops.AllReduce(x, ops.Add), ops.AllReduce(x, ops.Max, [[0, 2], [1, 3]], channel_id=3),
        ops.AllGather(x, 1, 2, [[0, 1], [2, 3]]), ops.ReduceScatter(x, ops.Add, 0, 4),
        ops.AllToAll(x, 0, 0, 2, [[3, 1], [0, 2]]), ops.CollectivePermute(x, [(0, 1), (1, 2), (2, 3)]),
        ops.ReplicaId(b), ops.PartitionId(b), ops.CrossReplicaSum(x),
    ]
    comp = b.build(ops.Tuple(b, outs))
    text = comp.as_hlo_text()
    assert text == comp._direct_hlo_text(True, True)
    assert "replica_groups={{0,2},{1,3}}, channel_id=3, to_apply=" in text
    assert "source_target_pairs={{0,1},{1,2},{2,3}}" in text and " replica-id()" in text
    per_replica = [[data(np.float32, (4, 2))] for _ in range(4)]
    want = _four_replicas(comp, per_replica)
    got = _four_replicas(xs.XlaComputation.from_hlo_text(text), per_replica)
    for r in range(4):
        assert_same_outputs(got[r], want[r], f"replica {r}")
    np.testing.assert_allclose(want[1][0], sum(a[0] for a in per_replica), rtol=1e-6)
    assert int(want[2][6]) == 2


def _adder(dt: Any) -> xs.XlaComputation:
    b = xs.XlaBuilder("add")
    return b.build(ops.Add(p(b, 0, dt, ()), p(b, 1, dt, ())))


def test_reduce_single_and_variadic() -> None:
    b = xs.XlaBuilder("reduces")
    x = p(b, 0, np.float32, (3, 4))
    idx = ops.Iota(b, xs.Shape.array_shape(np.int32, (3, 4)), 1)

    def argmax(a: xs.XlaOp, i: xs.XlaOp, c: xs.XlaOp, j: xs.XlaOp) -> xs.XlaOp:
        keep = ops.Ge(a, c)
        return ops.Tuple(a.builder, [ops.Select(keep, a, c), ops.Select(keep, i, j)])

    s = ops.Reduce(b, x, ops.Constant(b, np.float32(0)), _adder(np.float32), [1])
    am = ops.Reduce(b, [x, idx], [ops.Constant(b, np.float32(-np.inf)), ops.Constant(b, np.int32(0))], argmax, [1])
    outs = [s, ops.GetTupleElement(am, 0), ops.GetTupleElement(am, 1),
            ops.Reduce(b, x, ops.Constant(b, np.float32(0)), _adder(np.float32), [0, 1])]
    comp = b.build(ops.Tuple(b, outs))
    text = comp.as_hlo_text()
    assert text.count("%region_") == 6  # three reducers: a header and a to_apply each
    xd = data(np.float32, (3, 4))
    direct(comp, xd)
    got = run(comp, xd)
    np.testing.assert_allclose(got[0], xd.sum(1), rtol=1e-6)
    np.testing.assert_array_equal(got[2], xd.argmax(1))


def test_call_is_inlined_and_tuples_are_free() -> None:
    inner = xs.XlaBuilder("inner")
    a, c = p(inner, 0, np.float32, (2,)), p(inner, 1, np.float32, (2,))
    fn = inner.build(ops.Tuple(inner, [ops.Add(a, c), ops.Mul(a, c)]))
    b = xs.XlaBuilder("outer")
    x, y = p(b, 0, np.float32, (2,)), p(b, 1, np.float32, (2,))
    r1 = ops.Call(b, fn, [x, y])
    r2 = ops.Call(b, fn, [ops.GetTupleElement(r1, 0), y])
    t = ops.Tuple(b, [r2, x])
    comp = b.build(ops.Tuple(b, [ops.GetTupleElement(ops.GetTupleElement(t, 0), 1), ops.GetTupleElement(t, 1)]))
    text = comp.as_hlo_text()
    assert text.count(" add(") == 2 and "call(" not in text and "get-tuple-element" not in text
    direct(comp, data(np.float32, (2,)), data(np.float32, (2,)))


def test_one_element_tuple_and_parameter_roots() -> None:
    b = xs.XlaBuilder("roots")
    x = p(b, 0, np.float32, (2,), "x")
    comp = b.build(ops.Tuple(b, [ops.Neg(x)]))
    assert "ENTRY %main.1 (x.1: f32[2]) -> f32[2] {" in comp.as_hlo_text()
    direct(comp, data(np.float32, (2,)))
    b2 = xs.XlaBuilder("identity")
    y = p(b2, 0, np.int32, (3,))
    comp2 = b2.build(y)
    assert "ROOT %p0.1 = s32[3]{0} parameter(0)" in comp2.as_hlo_text()
    direct(comp2, data(np.int32, (3,)))
    b3 = xs.XlaBuilder("unused")
    p(b3, 0, np.float32, (2,))
    z = p(b3, 1, np.float32, (2,))
    direct(b3.build(ops.Tuple(b3, [z, z])), data(np.float32, (2,)), data(np.float32, (2,)))


# -- names and metadata ----------------------------------------------------------------------------

def _xla_metadata(text: str) -> list[str]:
    """The metadata XLA reads from ``text`` (parsed and printed back by XLA), one per instruction."""
    printed = _mlir.hlo_module_to_text(_mlir.hlo_module_from_text(text))
    return sorted(re.findall(r"metadata=\{[^}]*\}", printed))


def test_metadata_and_odd_names_match_the_converter() -> None:
    b = xs.XlaBuilder("my comp-1.x/ü")
    x = p(b, 0, np.float32, (2,), 'we"ird name/1')
    y = p(b, 1, np.float32, (2,), "")
    z = p(b, 2, np.float32, (2,), "3d.tensor")
    with b.op_metadata(op_name='jit(f)/q"u\\ote\nline'):
        s = ops.Sub(x, y)
    with b.op_metadata(op_name="fixed", source_file="/no/such/file.py", source_line=42):
        m = ops.Mul(s, z)
    comp = b.build(ops.Tuple(b, [ops.Add(m, x), s]))
    text = comp.as_hlo_text()
    assert text == comp._direct_hlo_text(True, True)
    assert _xla_metadata(text) == _xla_metadata(comp._converted_hlo_text())
    assert 'op_name="fixed" source_file="/no/such/file.py" source_line=42' in text
    direct(comp, *(data(np.float32, (2,)) for _ in range(3)))
    plain = comp.as_hlo_text(print_metadata=False)
    assert "metadata" not in plain and plain.replace(" ", "") != text.replace(" ", "")


def test_exact_text_of_a_small_graph() -> None:
    b = xs.XlaBuilder("small")
    x = p(b, 0, np.float32, (2, 3), "x")
    y = ops.Mul(ops.Add(x, x), x)
    line = sys._getframe().f_lineno - 1  # the line above, where both ops were built
    text = b.build(y).as_hlo_text()
    md = f'metadata={{source_file="{__file__}" source_line={line} source_end_line={line}}}'
    assert text == (
        "HloModule small, entry_computation_layout={(f32[2,3]{1,0})->f32[2,3]{1,0}}\n\n"
        "ENTRY %main.1 (x.1: f32[2,3]) -> f32[2,3] {\n"
        '  %x.1 = f32[2,3]{1,0} parameter(0), metadata={op_name="x"}\n'
        f"  %add.1 = f32[2,3]{{1,0}} add(%x.1, %x.1), {md}\n"
        f"  ROOT %multiply.1 = f32[2,3]{{1,0}} multiply(%add.1, %x.1), {md}\n"
        "}\n\n"
    )


# -- the fast path is taken; the rest falls back ---------------------------------------------------

def test_direct_path_does_not_call_the_converter(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: Any, **k: Any) -> Any:
        raise AssertionError("the converter was called")

    monkeypatch.setattr(_mlir, "parsed_module_to_hlo", boom)
    monkeypatch.setattr(_mlir, "parse_module", boom)
    b = xs.XlaBuilder("chain")
    x = p(b, 0, np.float32, (128,))
    y = x
    for i in range(100):
        y = ops.Add(y, x) if i % 2 == 0 else ops.Mul(y, x)
    comp = b.build(y)
    text = comp.as_hlo_text()
    assert text.count(" add(") == 50 and text.count(" multiply(") == 50
    assert comp.as_hlo_text() is text  # cached per option pair


def test_while_with_tuple_and_array_carries() -> None:
    st = xs.Shape.tuple_shape([xs.Shape.array_shape(np.int32, ()), xs.Shape.array_shape(np.float32, (2,))])
    cb = xs.XlaBuilder("cond")
    cond = cb.build(ops.Lt(ops.GetTupleElement(ops.Parameter(cb, 0, st), 0), ops.Constant(cb, np.int32(5))))
    bb = xs.XlaBuilder("body")
    s = ops.Parameter(bb, 0, st)
    i, v = ops.GetTupleElement(s, 0), ops.GetTupleElement(s, 1)
    body = bb.build(ops.Tuple(bb, [ops.Add(i, ops.Constant(bb, np.int32(1))),
                                   ops.Mul(v, ops.Constant(bb, np.float32(1.5)))]))
    b = xs.XlaBuilder("loops")
    x = p(b, 0, np.float32, (2,))
    w = ops.While(cond, body, ops.Tuple(b, [ops.Constant(b, np.int32(0)), x]))
    w2 = ops.While(lambda c: ops.Lt(c, ops.Constant(c.builder, np.int32(10))),
                   lambda c: ops.Mul(c, ops.Constant(c.builder, np.int32(2))), ops.Constant(b, np.int32(1)))
    comp = b.build(ops.Tuple(b, [ops.GetTupleElement(w, 1), ops.GetTupleElement(w, 0), w2]))
    text = comp.as_hlo_text()
    assert text.count(" while(") == 2 and "parameter(0)\n  %get-tuple-element" in text
    xd = data(np.float32, (2,))
    direct(comp, xd)
    got = run(comp, xd)
    np.testing.assert_allclose(got[0], xd * np.float32(1.5) ** 5, rtol=1e-6)
    assert got[1] == 5 and got[2] == 16


def test_conditional_both_forms() -> None:
    b = xs.XlaBuilder("branches")
    x = p(b, 0, np.float32, (2,))
    flag, idx = p(b, 1, np.bool_, ()), p(b, 2, np.int32, ())
    pair = ops.Tuple(b, [x, ops.Neg(x)])
    c1 = ops.Conditional(flag, x, lambda a: ops.Neg(a), pair, lambda t: ops.Add(ops.GetTupleElement(t, 0),
                                                                                    ops.GetTupleElement(t, 1)))
    c2 = ops.Conditional(idx, [lambda a: ops.Tuple(a.builder, [ops.Exp(a), a]), lambda a: ops.Tuple(a.builder, [a, a])],
                         [x, x])
    comp = b.build(ops.Tuple(b, [c1, ops.GetTupleElement(c2, 0), ops.GetTupleElement(c2, 1)]))
    text = comp.as_hlo_text()
    assert "true_computation=" in text and "branch_computations={" in text
    xd = data(np.float32, (2,))
    for f in (True, False):
        for i in (-1, 0, 1, 5):  # out of range runs the last branch
            direct(comp, xd, np.bool_(f), np.int32(i))


def test_convolution_reduce_window_gather_scatter() -> None:
    b = xs.XlaBuilder("windows")
    x = p(b, 0, np.float32, (1, 2, 5, 5))
    k = p(b, 1, np.float32, (4, 1, 3, 3))
    conv = ops.ConvGeneralDilated(x, k, (2, 1), [(1, 0), (0, 2)], lhs_dilation=(1, 2), rhs_dilation=(2, 1),
                                  feature_group_count=2)
    rw = ops.ReduceWindowWithGeneralPadding(x, ops.Constant(b, np.float32(-np.inf)), lambda a, c: ops.Max(a, c),
                                            (1, 1, 2, 3), (1, 1, 2, 1), (1, 1, 1, 1), (1, 1, 1, 2),
                                            [(0, 0), (0, 0), (1, 0), (0, 1)])
    src, idx, upd = p(b, 2, np.float32, (5, 3)), p(b, 3, np.int32, (2, 1)), p(b, 4, np.float32, (2, 3))
    g = ops.Gather(src, idx, xs.GatherDimensionNumbers(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                                                       index_vector_dim=1), (1, 3), indices_are_sorted=True)
    sc = ops.Scatter(src, idx, upd, lambda a, c: ops.Add(a, c),
                     xs.ScatterDimensionNumbers(update_window_dims=[1], inserted_window_dims=[0],
                                                scatter_dims_to_operand_dims=[0], index_vector_dim=1))
    comp = b.build(ops.Tuple(b, [conv, rw, g, sc]))
    text = comp.as_hlo_text()
    assert ("window={size=3x3 stride=2x1 pad=1_0x0_2 lhs_dilate=1x2 rhs_dilate=2x1}, dim_labels=bf01_oi01->bf01, "
            "feature_group_count=2") in text
    assert "window={size=1x1x2x3 stride=1x1x2x1 pad=0_0x0_0x1_0x0_1 rhs_dilate=1x1x1x2}, to_apply=" in text
    assert ("offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, "
            "slice_sizes={1,3}") in text
    args = [data(np.float32, (1, 2, 5, 5)), data(np.float32, (4, 1, 3, 3)), data(np.float32, (5, 3)),
            np.array([[1], [1]], np.int32), data(np.float32, (2, 3))]
    direct(comp, *args)
    got = run(comp, *args)
    want_scatter = args[2].copy()
    np.add.at(want_scatter, [1, 1], args[4])
    np.testing.assert_allclose(got[3], want_scatter, rtol=1e-6)


def test_unsupported_graphs_fall_back_to_the_converter() -> None:
    b = xs.XlaBuilder("erf")
    x = p(b, 0, np.float32, (4,))
    erf = b.build(ops.Erf(x))  # a CHLO op: XLA's converter expands it
    assert erf._direct_hlo_text(True, True) is None
    assert erf.as_hlo_text() == erf._converted_hlo_text() and "erf(" in erf.as_hlo_text()
    b2 = xs.XlaBuilder("sharded")
    y = p(b2, 0, np.float32, (2,))
    b2.set_sharding(xs.OpSharding.replicate() if hasattr(xs.OpSharding, "replicate") else xs.OpSharding())
    z = ops.Neg(y)
    b2.clear_sharding()
    sharded = b2.build(z)
    assert sharded._direct_hlo_text(True, True) is None and "sharding=" in sharded.as_hlo_text()


def test_loaded_computations_keep_their_hlo() -> None:
    b = xs.XlaBuilder("lgamma")
    comp = b.build(ops.Lgamma(p(b, 0, np.float32, (4,))))  # CHLO: expanded by XLA's converter
    loaded = xs.XlaComputation.from_hlo_text(comp.as_hlo_text())
    assert loaded.as_hlo_text() == comp.as_hlo_text()


def test_direct_text_loads_back_to_the_same_values() -> None:
    b = xs.XlaBuilder("roundtrip")
    x = p(b, 0, np.float32, (4,))
    y = ops.Tanh(ops.Sub(ops.Mul(x, 3.0), ops.Constant(b, np.arange(4, dtype=np.float32))))
    comp = b.build(y)
    xd = data(np.float32, (4,))
    got = run(xs.XlaComputation.from_hlo_text(comp.as_hlo_text()), xd)
    assert got[0].tobytes() == run(comp, xd)[0].tobytes()  # the same program: the same bits
    # numpy's tanh: XLA's is an approximation within ~1e-7 absolute (relative error grows near tanh's zero)
    np.testing.assert_allclose(got[0], np.tanh(xd * 3 - np.arange(4, dtype=np.float32)), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["bf16", "true", "ENTRY", "f32", "token", "3d", "a.b/c d"])
def test_names_that_are_hlo_words_still_parse(name: str) -> None:
    """XLA's converter writes ``HloModule true`` (which its parser rejects); names that are HLO
    words get a trailing ``_``."""
    b = xs.XlaBuilder(name)
    x = p(b, 0, np.float32, (2,), name)
    with b.op_metadata(op_name=f"scope/{name}"):
        y = ops.Neg(x)
    comp = b.build(y)
    assert comp.as_hlo_text().startswith("HloModule ")
    direct(comp, data(np.float32, (2,)))
    b2 = xs.XlaBuilder(name)
    conv = b2.build(ops.Erf(p(b2, 0, np.float32, (2,), name)))  # through XLA's converter
    assert conv._direct_hlo_text(True, True) is None
    xs.XlaComputation.from_hlo_text(conv.as_hlo_text())


def test_parameter_sharding_is_kept() -> None:
    """A Parameter built under ``set_sharding`` carries it (it used to be dropped)."""
    b = xs.XlaBuilder("sharded_param")
    tiled = xs.OpSharding(type=xs.OpSharding.Type.OTHER, tile_assignment_dimensions=[2, 1],
                          tile_assignment_devices=[0, 1])
    b.set_sharding(tiled)
    x = p(b, 0, np.float32, (4, 2), "x")
    b.clear_sharding()
    comp = b.build(ops.Neg(x))
    assert comp._direct_hlo_text(True, True) is None  # shardings go through XLA's converter
    assert "parameter(0), sharding={devices=[2,1]0,1}" in comp.as_hlo_text()
    xd = data(np.float32, (4, 2))
    np.testing.assert_array_equal(run(comp, xd)[0], -xd)


@pytest.mark.parametrize("name", ["Model/__call__", "__init__", "ééé", "日本語", "..", "a/b/"])
def test_op_names_xla_would_reject_as_instruction_names(name: str) -> None:
    """XLA's parser rejects instruction names starting with "__" (as "_" + "_..." from non-ASCII)."""
    b = xs.XlaBuilder("names")
    x = p(b, 0, np.float32, (2,), name.rsplit("/", 1)[-1] or "p")
    with b.op_metadata(op_name=name):
        y = ops.Add(x, x)
    direct(b.build(y), data(np.float32, (2,)))


def test_metadata_strings_are_escaped_like_xla() -> None:
    b = xs.XlaBuilder("escapes")
    x = p(b, 0, np.float32, (2,), "x")
    with b.op_metadata(op_name="cr\r tab\t q' dq\" bs\\ del\x7f é"):
        y = ops.Neg(x)
    comp = b.build(y)
    ours = re.findall(r"metadata=\{op_name=\"(?:[^\"\\]|\\.)*\"", comp.as_hlo_text())
    xla = re.findall(r"metadata=\{op_name=\"(?:[^\"\\]|\\.)*\"", comp._converted_hlo_text())
    assert ours == xla and len(ours) == 2
    assert "\\r" in ours[1] and "\\303\\251" in ours[1] and "\\177" in ours[1] and "\\'" in ours[1]
