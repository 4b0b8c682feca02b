"""Rev, SliceInDim, Pad and Collapse against numpy (np.flip, slicing, np.pad, reshape) and a
loop-based Pad reference; case C-13; errors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import raises, run, shape, skip_where_device_defines_otherwise
from xlasdk import ops
from xlasdk.errors import DTypeError, ShapeError

Arr = np.ndarray[Any, Any]


def ref_pad(x: Arr, value: Any, config: Sequence[tuple[int, int, int]]) -> Arr:
    """Result element j of a dimension is x[(j - lo) / (interior + 1)] when that is a whole in-range number."""
    out_shape = [lo + hi + n + max(n - 1, 0) * it for n, (lo, hi, it) in zip(x.shape, config, strict=True)]
    out = np.full(out_shape, value, dtype=x.dtype)
    sources = []
    for m, n, (lo, _, it) in zip(out_shape, x.shape, config, strict=True):
        src = []
        for j in range(m):
            q = j - lo
            src.append(q // (it + 1) if q >= 0 and q % (it + 1) == 0 and q // (it + 1) < n else -1)
        sources.append(src)
    for o in np.ndindex(*out_shape):
        s = tuple(src[k] for src, k in zip(sources, o, strict=True))
        if all(v >= 0 for v in s):
            out[o] = x[s]
    return out


def test_ref_pad_agrees_with_np_pad() -> None:
    x = np.arange(12).reshape(3, 4)
    expect = np.pad(x, [(1, 2), (0, 3)], constant_values=-1)
    np.testing.assert_array_equal(ref_pad(x, -1, [(1, 2, 0), (0, 3, 0)]), expect)
    np.testing.assert_array_equal(ref_pad(x, -1, [(-1, 0, 0), (0, -2, 0)]), x[1:, :2])
    np.testing.assert_array_equal(ref_pad(np.array([1, 2, 3]), 0, [(0, 0, 2)]), [1, 0, 0, 2, 0, 0, 3])


# -- Pad ------------------------------------------------------------------------------------------


def test_C13_pad_negative_edges_and_interior() -> None:
    b = xs.XlaBuilder("c13")
    x5 = ops.Parameter(b, 0, shape(np.int32, (5,)))
    x3 = ops.Parameter(b, 1, shape(np.float32, (3,)))
    x22 = ops.Parameter(b, 2, shape(np.int32, (2, 2)))
    zero_i, zero_f = ops.Constant(b, np.int32(0)), ops.Constant(b, np.float32(0))
    pads = [
        ops.Pad(x5, zero_i, [(-1, -1, 1)]),
        ops.Pad(x3, ops.Constant(b, np.float32(-9)), [(-2, 1, 0)]),
        ops.Pad(x3, zero_f, xs.make_padding_config([(1, -2, 2)])),
        ops.Pad(x22, ops.Constant(b, np.int32(9)), [(1, 0, 1), (-1, 1, 0)]),
        ops.Pad(x3, zero_f, [(-3, 0, 0)]),
    ]
    assert [p.dims for p in pads] == [(7,), (2,), (6,), (4, 2), (0,)]
    outs = run(
        b.build(ops.Tuple(b, pads)),
        np.array([1, 2, 3, 4, 5], np.int32), np.array([1, 2, 3], np.float32), np.array([[1, 2], [3, 4]], np.int32),
    )
    np.testing.assert_array_equal(outs[0], [0, 2, 0, 3, 0, 4, 0])
    np.testing.assert_array_equal(outs[1], [3, -9])
    np.testing.assert_array_equal(outs[2], [0, 1, 0, 0, 2, 0])
    np.testing.assert_array_equal(outs[3], [[9, 9], [2, 9], [9, 9], [4, 9]])
    assert outs[3].dtype == np.int32
    assert outs[4].shape == (0,)


def test_C13_pad_errors_raised_by_the_pad_call() -> None:
    b = xs.XlaBuilder("c13err")
    x = ops.Parameter(b, 0, shape(np.int32, (3,)))
    v = ops.Constant(b, np.int32(0))
    with raises(ShapeError, "Pad", "padding_config", "interior_padding must be >= 0, got -1"):
        ops.Pad(x, v, [(0, 0, -1)])
    cfg = xs.make_padding_config([(0, 0, 0)])
    cfg.dimensions[0].interior_padding = -1  # edited in place, proto style
    with raises(ShapeError, "Pad", "interior_padding must be >= 0"):
        ops.Pad(x, v, cfg)
    with raises(ShapeError, "Pad", "dimension 0", "(lo -4, hi 0, interior 0)", "negative size -1"):
        ops.Pad(x, v, [(-4, 0, 0)])


def test_pad_cuts_into_the_far_padding() -> None:
    # A negative edge larger than the data removes padding of the other end too.
    b = xs.XlaBuilder("far")
    x = ops.Parameter(b, 0, shape(np.int32, (3,)))
    v = ops.Constant(b, np.int32(-9))
    configs = [(-4, 2, 0), (2, -4, 0), (-6, 2, 2), (0, -5, 2), (-5, 3, 1), (3, -5, 1)]
    outs = run(b.build(ops.Tuple(b, [ops.Pad(x, v, [c]) for c in configs])), np.array([1, 2, 3], np.int32))
    for c, out in zip(configs, outs, strict=True):
        np.testing.assert_array_equal(out, ref_pad(np.array([1, 2, 3], np.int32), -9, [c]), err_msg=str(c))
    np.testing.assert_array_equal(outs[2], [3, -9, -9])
    np.testing.assert_array_equal(outs[3], [1, -9])


PAD_CONFIGS: list[list[tuple[int, int, int]]] = [
    [(1, 2, 0), (0, 3, 1), (2, 0, 0)],
    [(-1, 2, 1), (2, -3, 0), (0, 0, 3)],
    [(0, 0, 0), (-2, -2, 2), (-1, 1, 1)],
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint16, np.int64, np.bool_, np.complex64])
def test_pad_against_reference(dtype: Any) -> None:
    if dtype is np.float64:
        skip_where_device_defines_otherwise("tpu-f64-emulated")
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 4, 2)) * 5).astype(dtype)
    value = np.array(1 if dtype is np.bool_ else 7, dtype)
    if dtype is np.bool_:
        x = np.zeros((3, 4, 2), np.bool_)
        x[::2, 1::2] = True
    b = xs.XlaBuilder("pad")
    px = ops.Parameter(b, 0, shape(dtype, x.shape))
    pv = ops.Parameter(b, 1, shape(dtype, ()))
    outs = run(b.build(ops.Tuple(b, [ops.Pad(px, pv, c) for c in PAD_CONFIGS])), x, value)
    for c, out in zip(PAD_CONFIGS, outs, strict=True):
        assert out.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(out, ref_pad(x, value, c), err_msg=str(c))


def test_pad_bfloat16_and_pairs_and_padding_config_objects() -> None:
    x = (np.arange(6, dtype=np.float32).reshape(2, 3) + 0.5).astype(ml_dtypes.bfloat16)
    b = xs.XlaBuilder("bf16")
    c = ops.Constant(b, x)
    v = ops.Constant(b, ml_dtypes.bfloat16(-1.5))
    cfg = xs.PaddingConfig()
    for lo, hi, it in [(1, 0, 0), (0, 2, 1)]:
        dim = xs.PaddingConfigDimension()
        dim.edge_padding_low, dim.edge_padding_high, dim.interior_padding = lo, hi, it
        cfg.dimensions.append(dim)
    p1 = ops.Pad(c, v, cfg)
    p2 = ops.Pad(c, v, [(1, 0), (0, 2)])  # (lo, hi) pairs
    assert p1.dtype == ml_dtypes.bfloat16 and p1.dims == (3, 7)
    o1, o2 = run(b.build(ops.Tuple(b, [ops.ConvertElementType(p, np.float32) for p in (p1, p2)])))
    xf = x.astype(np.float32)
    np.testing.assert_array_equal(o1, ref_pad(xf, -1.5, [(1, 0, 0), (0, 2, 1)]))
    np.testing.assert_array_equal(o2, np.pad(xf, [(1, 0), (0, 2)], constant_values=-1.5))


def test_pad_errors() -> None:
    b = xs.XlaBuilder("err")
    x = ops.Parameter(b, 0, shape(np.float32, (2, 3)))
    v = ops.Constant(b, np.float32(0))
    with raises(ShapeError, "Pad", "'padding_value' must be a scalar", "f32[2]"):
        ops.Pad(x, ops.Constant(b, np.zeros(2, np.float32)), [(0, 0), (0, 0)])
    with raises(DTypeError, "Pad", "'padding_value' is s32[]", "f32[] like operand f32[2,3]"):
        ops.Pad(x, ops.Constant(b, np.int32(0)), [(0, 0), (0, 0)])
    with raises(ShapeError, "Pad", "padding_config has 1 dimensions, expected 2"):
        ops.Pad(x, v, [(0, 0, 0)])
    with raises(ShapeError, "Pad", "padding_config[1] must be (lo, hi) or (lo, hi, interior)"):
        ops.Pad(x, v, [(0, 0), (1, 2, 3, 4)])
    with raises(ShapeError, "Pad", "padding_config[0][1] must be an int", "float"):
        ops.Pad(x, v, [(0, 1.5), (0, 0)])  # type: ignore[list-item]
    with raises(ShapeError, "Pad", "dimension 1", "negative size"):
        ops.Pad(x, v, [(0, 0), (-2, -2, 0)])
    with raises(DTypeError, "Pad", "'padding_value'", "XlaOp"):
        ops.Pad(x, 0.0, [(0, 0), (0, 0)])  # type: ignore[arg-type]
    other = xs.XlaBuilder("other")
    with raises(ShapeError, "Pad", "'padding_value' belongs to builder 'other'"):
        ops.Pad(x, ops.Constant(other, np.float32(0)), [(0, 0), (0, 0)])


# -- Rev ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.uint64, np.bool_, np.complex128])
def test_rev_like_np_flip(dtype: Any) -> None:
    x = (np.arange(24).reshape(2, 3, 4) % 5).astype(dtype)
    b = xs.XlaBuilder("rev")
    p = ops.Parameter(b, 0, shape(dtype, x.shape))
    cases: list[tuple[int, ...]] = [(0,), (2,), (0, 2), (2, 1, 0), ()]
    outs = run(b.build(ops.Tuple(b, [ops.Rev(p, list(d)) for d in cases])), x)
    for d, out in zip(cases, outs, strict=True):
        assert out.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(out, np.flip(x, d) if d else x, err_msg=str(d))


def test_rev_errors() -> None:
    b = xs.XlaBuilder("err")
    x = ops.Parameter(b, 0, shape(np.float32, (2, 3)))
    with raises(ShapeError, "Rev", "dimensions [0, 0]", "distinct"):
        ops.Rev(x, [0, 0])
    with raises(ShapeError, "Rev", "dimensions [2]", "[0, 2)", "f32[2,3]"):
        ops.Rev(x, [2])
    with raises(ShapeError, "Rev", "dimensions [-1]"):
        ops.Rev(x, [-1])
    with raises(ShapeError, "Rev", "dimensions must be a sequence of ints"):
        ops.Rev(x, [0.5])  # type: ignore[list-item]
    with raises(DTypeError, "Rev", "'operand'", "XlaOp"):
        ops.Rev(np.zeros(3), [0])  # type: ignore[arg-type]


# -- SliceInDim -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.bool_])
def test_slice_in_dim_like_numpy(dtype: Any) -> None:
    x = (np.arange(60).reshape(3, 4, 5) % 7).astype(dtype)
    b = xs.XlaBuilder("sid")
    p = ops.Parameter(b, 0, shape(dtype, x.shape))
    cases = [(0, 2, 1, 0), (1, 4, 2, 1), (0, 5, 3, 2), (2, 2, 1, 2), (4, 5, 7, 2)]
    outs = run(b.build(ops.Tuple(b, [ops.SliceInDim(p, *c) for c in cases])), x)
    for (start, limit, stride, dim), out in zip(cases, outs, strict=True):
        idx: list[Any] = [slice(None)] * 3
        idx[dim] = slice(start, limit, stride)
        np.testing.assert_array_equal(out, x[tuple(idx)], err_msg=str((start, limit, stride, dim)))


def test_slice_in_dim_errors() -> None:
    b = xs.XlaBuilder("err")
    x = ops.Parameter(b, 0, shape(np.float32, (4, 6)))
    with raises(ShapeError, "SliceInDim", "dimno 2 out of range", "f32[4,6]"):
        ops.SliceInDim(x, 0, 1, 1, 2)
    with raises(ShapeError, "SliceInDim", "dimno -1 out of range"):
        ops.SliceInDim(x, 0, 1, 1, -1)
    with raises(ShapeError, "SliceInDim", "dimension 1", "limit (7) <= size (6)"):
        ops.SliceInDim(x, 0, 7, 1, 1)
    with raises(ShapeError, "SliceInDim", "start (3) <= limit (2)"):
        ops.SliceInDim(x, 3, 2, 1, 0)
    with raises(ShapeError, "SliceInDim", "0 <= start (-1)"):
        ops.SliceInDim(x, -1, 2, 1, 0)
    with raises(ShapeError, "SliceInDim", "strides[0] = 0", ">= 1"):
        ops.SliceInDim(x, 0, 2, 0, 0)
    with raises(ShapeError, "SliceInDim", "stride must be an int", "float"):
        ops.SliceInDim(x, 0, 2, 1.0, 0)  # type: ignore[arg-type]
    with raises(ShapeError, "SliceInDim", "dimno must be an int", "bool"):
        ops.SliceInDim(x, 0, 2, 1, True)


# -- Collapse -------------------------------------------------------------------------------------


def test_collapse_like_reshape() -> None:
    x = np.arange(120, dtype=np.int32).reshape(2, 3, 4, 5)
    b = xs.XlaBuilder("collapse")
    p = ops.Parameter(b, 0, shape(np.int32, x.shape))
    cases: list[list[int]] = [[0, 1], [1, 2, 3], [0, 1, 2, 3], [2, 3]]
    res = [ops.Collapse(p, c) for c in cases]
    assert [r.dims for r in res] == [(6, 4, 5), (2, 60), (120,), (2, 3, 20)]
    assert ops.Collapse(p, [1]) is p and ops.Collapse(p, []) is p  # nothing to merge: the operand
    outs = run(b.build(ops.Tuple(b, res)), x)
    for r, out in zip(res, outs, strict=True):
        np.testing.assert_array_equal(out, x.reshape(r.dims))
    e = ops.Collapse(ops.Parameter(b, 1, shape(np.float32, (3, 0, 2))), [0, 1])
    assert e.dims == (0, 2)


def test_collapse_errors() -> None:
    b = xs.XlaBuilder("err")
    x = ops.Parameter(b, 0, shape(np.float32, (2, 3, 4)))
    with raises(ShapeError, "Collapse", "dimensions [0, 2]", "consecutive"):
        ops.Collapse(x, [0, 2])
    with raises(ShapeError, "Collapse", "dimensions [2, 1]", "consecutive and ascending"):
        ops.Collapse(x, [2, 1])
    with raises(ShapeError, "Collapse", "dimensions [2, 3]", "out of range", "f32[2,3,4]"):
        ops.Collapse(x, [2, 3])
    with raises(ShapeError, "Collapse", "dimensions must be a sequence of ints"):
        ops.Collapse(x, ["a"])  # type: ignore[list-item]
