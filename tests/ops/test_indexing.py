"""Gather, Scatter, DynamicSlice and DynamicUpdateSlice against numpy (fancy indexing, np.take,
np.add.at) and loop-based references written from the StableHLO specification; case C-07; errors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import xlasdk as xs
from tests.helpers import raises, run, shape, skip_where_device_defines_otherwise
from xlasdk import ops
from xlasdk.errors import DTypeError, ShapeError
from xlasdk.ops.indexing import scatter_shape

Arr = np.ndarray[Any, Any]


# -- references ----------------------------------------------------------------------------------


def _index_vector(indices: Arr, ivd: int, batch_index: Sequence[int]) -> list[int]:
    if ivd == indices.ndim:
        return [int(indices[tuple(batch_index)])]
    pos: list[Any] = list(batch_index[:ivd]) + [slice(None)] + list(batch_index[ivd:])
    return [int(v) for v in indices[tuple(pos)]]


def ref_gather(operand: Arr, indices: Arr, dn: xs.GatherDimensionNumbers, slice_sizes: Sequence[int]) -> Arr:
    """Gather by the StableHLO specification, one result element at a time."""
    ivd = dn.index_vector_dim
    batch_shape = [s for i, s in enumerate(indices.shape) if i != ivd]
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    kept = [d for d in range(operand.ndim) if d not in dropped]
    rank = len(batch_shape) + len(dn.offset_dims)
    out_shape, bi, oi = [], iter(batch_shape), iter(slice_sizes[d] for d in kept)
    for r in range(rank):
        out_shape.append(next(oi) if r in dn.offset_dims else next(bi))
    out = np.zeros(out_shape, dtype=operand.dtype)
    for ri in np.ndindex(*out_shape):
        batch_index = [ri[r] for r in range(rank) if r not in dn.offset_dims]
        offset_index = [ri[r] for r in dn.offset_dims]
        start = _index_vector(indices, ivd, batch_index)
        full = [0] * operand.ndim
        for k, d in enumerate(dn.start_index_map):
            full[d] = min(max(start[k], 0), operand.shape[d] - slice_sizes[d])
        for d_op, d_idx in zip(dn.operand_batching_dims, dn.start_indices_batching_dims, strict=True):
            full[d_op] += batch_index[d_idx - (1 if d_idx > ivd else 0)]
        for d, o in zip(kept, offset_index, strict=True):
            full[d] += o
        out[ri] = operand[tuple(full)]
    return out


def ref_scatter(
    operand: Arr, indices: Arr, updates: Arr, fn: Callable[[Any, Any], Any], dn: xs.ScatterDimensionNumbers
) -> Arr:
    """Scatter by the StableHLO specification (out-of-bounds elements skipped), in update order."""
    out: Arr = operand.copy()
    ivd = dn.index_vector_dim
    dropped = set(dn.inserted_window_dims) | set(dn.input_batching_dims)
    kept = [d for d in range(operand.ndim) if d not in dropped]
    for ui in np.ndindex(*updates.shape):
        scatter_index = [ui[d] for d in range(updates.ndim) if d not in dn.update_window_dims]
        window_index = [ui[d] for d in dn.update_window_dims]
        start = _index_vector(indices, ivd, scatter_index)
        full = [0] * operand.ndim
        for k, d in enumerate(dn.scatter_dims_to_operand_dims):
            full[d] = start[k]
        for d_op, d_idx in zip(dn.input_batching_dims, dn.scatter_indices_batching_dims, strict=True):
            full[d_op] += scatter_index[d_idx - (1 if d_idx > ivd else 0)]
        for d, w in zip(kept, window_index, strict=True):
            full[d] += w
        if all(0 <= f < n for f, n in zip(full, operand.shape, strict=True)):
            out[tuple(full)] = fn(out[tuple(full)], updates[ui])
    return out


def add(a: Any, b: Any) -> Any:
    return a + b


def test_references_agree_with_numpy() -> None:
    # The loop references themselves, against numpy fancy indexing and np.add.at.
    rng = np.random.default_rng(0)
    x = rng.integers(-50, 50, (5, 4))
    idx = np.array([3, 0, 4, 4])
    dn = xs.GatherDimensionNumbers(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1)
    np.testing.assert_array_equal(ref_gather(x, idx, dn, (1, 4)), x[idx])
    sdn = xs.ScatterDimensionNumbers(
        update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1
    )
    upd = rng.integers(-9, 9, (4, 4))
    expect = x.copy()
    np.add.at(expect, idx, upd)
    np.testing.assert_array_equal(ref_scatter(x, idx, upd, add, sdn), expect)


# -- Gather ---------------------------------------------------------------------------------------

TAKE_DN = xs.GatherDimensionNumbers(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1)


def _gather(x: Arr, idx: Arr, dn: xs.GatherDimensionNumbers, sizes: Sequence[int], **kw: Any) -> tuple[xs.XlaOp, Arr]:
    """Gather ``x`` at ``idx`` (both parameters), returning the op and its value."""
    b = xs.XlaBuilder("gather")
    px, pi = ops.Parameter(b, 0, shape(x.dtype, x.shape)), ops.Parameter(b, 1, shape(idx.dtype, idx.shape))
    g = ops.Gather(px, pi, dn, sizes, **kw)
    (out,) = run(b.build(g), x, idx)
    return g, out


@pytest.mark.parametrize(
    ("dtype", "idx_dtype"),
    [
        (np.float32, np.int32), (np.float64, np.int64), (np.int8, np.uint32), (np.uint16, np.int8),
        (np.int64, np.uint8), (np.bool_, np.int16), (np.complex64, np.uint64),
    ],
)
def test_gather_rows_like_take(dtype: Any, idx_dtype: Any) -> None:
    if dtype == np.float64:
        skip_where_device_defines_otherwise("tpu-f64-emulated")
    # x[idx] along axis 0; starts outside [0, N-1] are clamped into range (np.take mode="clip").
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((5, 3)) * 10).astype(dtype)
    idx = np.array([4, 0, 2, 2, 1, 9] + ([-3] if np.issubdtype(idx_dtype, np.signedinteger) else [200]), idx_dtype)
    b = xs.XlaBuilder("take")
    g = ops.Gather(
        ops.Parameter(b, 0, shape(dtype, x.shape)), ops.Parameter(b, 1, shape(idx_dtype, idx.shape)), TAKE_DN, [1, 3]
    )
    assert g.shape == shape(dtype, (7, 3))
    (out,) = run(b.build(g), x, idx)
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, np.take(x, idx.astype(np.int64), axis=0, mode="clip"))


def test_gather_bfloat16_constant_operand() -> None:
    x = np.arange(12, dtype=np.float32).reshape(4, 3).astype(ml_dtypes.bfloat16)
    b = xs.XlaBuilder("bf16")
    g = ops.Gather(ops.Constant(b, x), ops.Constant(b, np.array([3, 1], np.int32)), TAKE_DN, (1, 3))
    assert g.dtype == ml_dtypes.bfloat16
    (out,) = run(b.build(ops.ConvertElementType(g, np.float32)))  # the test runner returns builtin dtypes
    np.testing.assert_array_equal(out, x[[3, 1]].astype(np.float32))


def test_gather_points_index_vector_dim_first() -> None:
    # index_vector_dim = 0: start_indices[:, j] is the j-th (row, col) pair -> x[rows, cols].
    rng = np.random.default_rng(2)
    x = rng.integers(-100, 100, (4, 6)).astype(np.int32)
    idx = np.array([[0, 3, 1, 3, 2], [5, 0, 2, 5, 1]], np.int32)
    dn = xs.GatherDimensionNumbers(
        offset_dims=[], collapsed_slice_dims=[0, 1], start_index_map=[0, 1], index_vector_dim=0
    )
    g, out = _gather(x, idx, dn, [1, 1])
    np.testing.assert_array_equal(out, x[idx[0], idx[1]])
    np.testing.assert_array_equal(out, ref_gather(x, idx, dn, (1, 1)))


def test_gather_windows_are_clamped_and_start_index_map_permuted() -> None:
    # 2x3 windows; start_index_map = [1, 0]: component 0 of each vector is the column start.
    x = np.arange(30, dtype=np.float32).reshape(5, 6)
    idx = np.array([[0, 0], [4, 3], [5, 9], [-2, -7], [1, 2]], np.int32)  # (col, row) pairs
    dn = xs.GatherDimensionNumbers(offset_dims=[1, 2], start_index_map=[1, 0], index_vector_dim=1)
    g, out = _gather(x, idx, dn, [2, 3])
    assert g.dims == (5, 2, 3)
    expect = []
    for col, row in idx:
        r0, c0 = min(max(row, 0), 5 - 2), min(max(col, 0), 6 - 3)
        expect.append(x[r0 : r0 + 2, c0 : c0 + 3])
    np.testing.assert_array_equal(out, np.stack(expect))
    np.testing.assert_array_equal(out, ref_gather(x, idx, dn, (2, 3)))


def test_gather_operand_batching_dims() -> None:
    # result[b, k, :] = x[b, idx[b, k], :] (take_along_axis with a batch dimension).
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 5, 2)).astype(np.float32)
    idx = np.array([[4, 0, 1, 1], [2, 2, 3, 0], [0, 4, 4, 4]], np.int64)
    dn = xs.GatherDimensionNumbers(
        offset_dims=[2], collapsed_slice_dims=[1], start_index_map=[1], index_vector_dim=2,
        operand_batching_dims=[0], start_indices_batching_dims=[0],
    )
    g, out = _gather(x, idx, dn, [1, 1, 2])
    assert g.dims == (3, 4, 2)
    np.testing.assert_array_equal(out, np.take_along_axis(x, idx[:, :, None], axis=1))
    np.testing.assert_array_equal(out, ref_gather(x, idx, dn, (1, 1, 2)))


def test_gather_batching_dims_not_leading_with_offset_dims_between() -> None:
    # Operand (5, 3) with batch dim 1; indices (2, 3, 1) with batch dim 1 and the vector in dim 2.
    rng = np.random.default_rng(4)
    x = rng.integers(0, 1000, (5, 3)).astype(np.int32)
    idx = rng.integers(-2, 7, (2, 3, 1)).astype(np.int32)
    dn = xs.GatherDimensionNumbers(
        offset_dims=[1], start_index_map=[0], index_vector_dim=2,
        operand_batching_dims=[1], start_indices_batching_dims=[1],
    )
    g, out = _gather(x, idx, dn, [2, 1])
    assert g.dims == (2, 2, 3)
    np.testing.assert_array_equal(out, ref_gather(x, idx, dn, (2, 1)))
    for i in range(2):
        for j in range(3):
            s = min(max(int(idx[i, j, 0]), 0), 5 - 2)
            np.testing.assert_array_equal(out[i, :, j], x[s : s + 2, j])


def test_gather_general_random_configurations() -> None:
    # index_vector_dim in the middle, offset_dims interleaved with batch dims, mixed collapse.
    rng = np.random.default_rng(5)
    x = rng.integers(-1000, 1000, (4, 5, 6)).astype(np.int32)
    idx = rng.integers(-3, 8, (3, 2, 2)).astype(np.int32)  # vectors along dim 1
    dn = xs.GatherDimensionNumbers(
        offset_dims=[0, 3], collapsed_slice_dims=[2], start_index_map=[2, 0], index_vector_dim=1
    )
    g, out = _gather(x, idx, dn, (3, 2, 1))
    assert g.dims == (3, 3, 2, 2)
    np.testing.assert_array_equal(out, ref_gather(x, idx, dn, (3, 2, 1)))


def test_gather_empty_index_vectors_take_the_origin_slice() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    dn = xs.GatherDimensionNumbers(offset_dims=[1, 2], index_vector_dim=1)
    _, out = _gather(x, np.zeros((4, 0), np.int32), dn, [1, 2])
    np.testing.assert_array_equal(out, np.broadcast_to(x[:1, :2], (4, 1, 2)))


def test_gather_accepts_proto_style_and_mapping_dimension_numbers() -> None:
    dn = xs.GatherDimensionNumbers()
    dn.offset_dims.append(1)
    dn.collapsed_slice_dims.append(0)
    dn.start_index_map.append(0)
    dn.index_vector_dim = 1
    b = xs.XlaBuilder("proto")
    x = ops.Constant(b, np.array([[1, 2], [3, 4], [5, 6]], np.int32))
    i = ops.Constant(b, np.array([2, 0], np.int32))
    g1 = ops.Gather(x, i, dn, [1, 2])
    mapping = {"offset_dims": [1], "collapsed_slice_dims": [0], "start_index_map": [0], "index_vector_dim": 1}
    g2 = ops.Gather(x, i, mapping, [1, 2])
    g3 = ops.Gather(x, ops.Constant(b, np.array([0, 0, 2], np.int32)), dn, [1, 2], indices_are_sorted=True)
    comp = b.build(ops.Tuple(b, [g1, g2, g3]))
    assert comp.as_stablehlo_text().count("indices_are_sorted = true") == 1
    out1, out2, out3 = run(comp)
    np.testing.assert_array_equal(out1, [[5, 6], [1, 2]])
    np.testing.assert_array_equal(out2, [[5, 6], [1, 2]])
    np.testing.assert_array_equal(out3, [[1, 2], [1, 2], [5, 6]])


# -- Scatter --------------------------------------------------------------------------------------


def _scatter(
    operand: Arr, indices: Arr, updates: Arr, fn: Any, dn: xs.ScatterDimensionNumbers, **kw: Any
) -> tuple[xs.XlaOp, Arr]:
    b = xs.XlaBuilder("scatter")
    s = ops.Scatter(
        ops.Parameter(b, 0, shape(operand.dtype, operand.shape)),
        ops.Parameter(b, 1, shape(indices.dtype, indices.shape)),
        ops.Parameter(b, 2, shape(updates.dtype, updates.shape)),
        fn,
        dn,
        **kw,
    )
    (out,) = run(b.build(s), operand, indices, updates)
    return s, out


C07_EMPTY = xs.ScatterDimensionNumbers(update_window_dims=[1], index_vector_dim=1)
C07_ZEROS = xs.ScatterDimensionNumbers(inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=2)


def test_C07_scatter_every_update_hits_the_same_element() -> None:
    upd = np.array([[1], [2], [4]], np.int32)
    _, out = _scatter(np.array([10], np.int32), np.zeros((3, 0), np.int32), upd, lambda a, b: a + b, C07_EMPTY)
    np.testing.assert_array_equal(out, [17])
    upd = np.array([[3], [5], [7]], np.int32)
    _, out = _scatter(np.array([2], np.int32), np.zeros((3, 0), np.int32), upd, lambda a, b: a * b, C07_EMPTY)
    np.testing.assert_array_equal(out, [210])
    # The same with explicit zero indices s32[3,1] (scalar indices: index_vector_dim = 2) and an
    # inserted window dimension; and as index vectors of one component (index_vector_dim = 1).
    upd = np.array([[1], [2], [4]], np.int32)
    idx = np.zeros((3, 1), np.int32)
    _, out = _scatter(np.array([10], np.int32), idx, upd, lambda a, b: a + b, C07_ZEROS)
    np.testing.assert_array_equal(out, [17])
    dn = xs.ScatterDimensionNumbers(inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1)
    _, out = _scatter(np.array([10], np.int32), idx, upd[:, 0], lambda a, b: a + b, dn)
    np.testing.assert_array_equal(out, [17])


def test_C07_scatter_empty_index_vectors_in_the_middle_and_with_window() -> None:
    # indices (2, 0, 3): vectors along dim 1 (empty); 6 updates, each a whole (2, 3) window.
    rng = np.random.default_rng(7)
    x = rng.integers(-20, 20, (2, 3)).astype(np.int64)
    upd = rng.integers(-20, 20, (2, 3, 2, 3)).astype(np.int64)
    dn = xs.ScatterDimensionNumbers(update_window_dims=[2, 3], index_vector_dim=1)
    _, out = _scatter(x, np.zeros((2, 0, 3), np.int64), upd, lambda a, b: a + b, dn)
    np.testing.assert_array_equal(out, x + upd.sum(axis=(0, 1)))
    # A scalar operand: indices (3, 0), updates (3,).
    dn0 = xs.ScatterDimensionNumbers(index_vector_dim=1)
    s, out = _scatter(np.array(1.5, np.float32), np.zeros((3, 0), np.uint32), np.array([1, 2, 4], np.float32),
                      lambda a, b: a + b, dn0)
    assert s.dims == ()
    np.testing.assert_array_equal(out, np.float32(8.5))


def test_C07_scatter_empty_index_vectors_with_batching_dims() -> None:
    # Operand (3, 2) with batch dim 0; indices (3, 4, 0): 4 updates per batch, all at the origin.
    x = np.zeros((3, 2), np.int32)
    upd = np.arange(24, dtype=np.int32).reshape(3, 4, 2)
    dn = xs.ScatterDimensionNumbers(
        update_window_dims=[2], index_vector_dim=2, input_batching_dims=[0], scatter_indices_batching_dims=[0]
    )
    _, out = _scatter(x, np.zeros((3, 4, 0), np.int32), upd, lambda a, b: a + b, dn)
    np.testing.assert_array_equal(out, upd.sum(axis=1))


def test_C07_scatter_out_of_bounds_updates_are_dropped() -> None:
    dn = xs.ScatterDimensionNumbers(inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1)
    zeros = np.zeros(5, np.float32)
    upd = np.array([1, 2, 3], np.float32)
    _, out = _scatter(zeros, np.array([[1], [7], [-1]], np.int32), upd, lambda a, b: a + b, dn)
    np.testing.assert_array_equal(out, [0, 1, 0, 0, 0])
    _, out = _scatter(zeros, np.array([[1], [1], [4]], np.int32), upd, lambda a, b: a + b, dn)
    np.testing.assert_array_equal(out, [0, 3, 0, 0, 3])


@pytest.mark.parametrize(
    ("dtype", "idx_dtype"),
    [
        (np.float32, np.int32), (np.float64, np.int64), (np.int32, np.uint32), (np.uint8, np.int8),
        (np.complex64, np.uint16),
    ],
)
def test_scatter_add_like_np_add_at(dtype: Any, idx_dtype: Any) -> None:
    # Rows of updates added at (repeated) row indices; values small integers so sums are exact.
    rng = np.random.default_rng(8)
    x = rng.integers(0, 10, (6, 3)).astype(dtype)
    idx = np.array([5, 0, 5, 2, 2, 2, 0], idx_dtype)
    upd = rng.integers(0, 10, (7, 3)).astype(dtype)
    dn = xs.ScatterDimensionNumbers(
        update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1
    )
    s, out = _scatter(x, idx, upd, lambda a, b: a + b, dn)
    assert s.shape == shape(dtype, (6, 3))
    expect = x.copy()
    np.add.at(expect, idx.astype(np.int64), upd)
    np.testing.assert_array_equal(out, expect)


def test_scatter_points_index_vector_dim_first_with_max() -> None:
    # index_vector_dim = 0: idx[:, k] is a (row, col) point; max-combine.
    rng = np.random.default_rng(9)
    x = rng.integers(-50, 50, (4, 5)).astype(np.int32)
    idx = np.array([[0, 3, 3, 1, 0], [4, 2, 2, 0, 4]], np.int32)
    upd = rng.integers(-60, 60, (5,)).astype(np.int32)
    dn = xs.ScatterDimensionNumbers(
        inserted_window_dims=[0, 1], scatter_dims_to_operand_dims=[0, 1], index_vector_dim=0
    )
    _, out = _scatter(x, idx, upd, ops.Max, dn)
    expect = x.copy()
    np.maximum.at(expect, (idx[0], idx[1]), upd)
    np.testing.assert_array_equal(out, expect)


def test_scatter_windows_and_permuted_dims_against_reference() -> None:
    # Update windows of (2, 3) into (5, 6), scatter_dims_to_operand_dims = [1, 0] (col, row).
    rng = np.random.default_rng(10)
    x = rng.integers(-9, 9, (5, 6)).astype(np.int32)
    idx = np.array([[0, 0], [3, 3], [1, 2], [3, 3]], np.int32)
    upd = rng.integers(-9, 9, (4, 2, 3)).astype(np.int32)
    dn = xs.ScatterDimensionNumbers(update_window_dims=[1, 2], scatter_dims_to_operand_dims=[1, 0], index_vector_dim=1)
    _, out = _scatter(x, idx, upd, lambda a, b: a + b, dn)
    expect = x.copy()
    for (col, row), u in zip(idx, upd, strict=True):
        expect[row : row + 2, col : col + 3] += u
    np.testing.assert_array_equal(out, expect)
    np.testing.assert_array_equal(out, ref_scatter(x, idx, upd, add, dn))


def test_scatter_general_layout_against_reference() -> None:
    # Window dims not trailing in updates, index_vector_dim in the middle of the indices.
    rng = np.random.default_rng(11)
    x = rng.integers(-9, 9, (4, 3, 5)).astype(np.int64)
    idx = rng.integers(0, 3, (2, 2, 3)).astype(np.int64)  # vectors along dim 1: (d2, d0) starts
    upd = rng.integers(-9, 9, (2, 3, 2, 3)).astype(np.int64)  # window dims 1 (d1) and 2 (d2)
    dn = xs.ScatterDimensionNumbers(
        update_window_dims=[1, 2], inserted_window_dims=[0], scatter_dims_to_operand_dims=[2, 0], index_vector_dim=1
    )
    _, out = _scatter(x, idx, upd, lambda a, b: a + b, dn)
    np.testing.assert_array_equal(out, ref_scatter(x, idx, upd, add, dn))


def test_scatter_input_batching_dims() -> None:
    # Per batch b: np.add.at(x[b], idx[b], upd[b]).
    rng = np.random.default_rng(12)
    x = rng.integers(0, 9, (3, 5)).astype(np.float32)
    idx = rng.integers(0, 5, (3, 6)).astype(np.int32)
    upd = rng.integers(0, 9, (3, 6)).astype(np.float32)
    dn = xs.ScatterDimensionNumbers(
        inserted_window_dims=[1], scatter_dims_to_operand_dims=[1], index_vector_dim=2,
        input_batching_dims=[0], scatter_indices_batching_dims=[0],
    )
    _, out = _scatter(x, idx, upd, lambda a, b: a + b, dn)
    expect = x.copy()
    for bi in range(3):
        np.add.at(expect[bi], idx[bi], upd[bi])
    np.testing.assert_array_equal(out, expect)
    np.testing.assert_array_equal(out, ref_scatter(x, idx, upd, add, dn))


def test_scatter_with_xla_computation_and_replace_with_unique_indices() -> None:
    sub = xs.XlaBuilder("mul")
    a = ops.Parameter(sub, 0, shape(np.float32, ()))
    c = ops.Parameter(sub, 1, shape(np.float32, ()))
    mul = sub.build(ops.Mul(a, c))
    dn = xs.ScatterDimensionNumbers(inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1)
    x = np.array([1, 2, 3, 4], np.float32)
    _, out = _scatter(x, np.array([3, 1, 3], np.int32), np.array([2, 5, 0.5], np.float32), mul, dn)
    np.testing.assert_array_equal(out, [1, 10, 3, 4])
    s, out = _scatter(x, np.array([0, 2], np.int32), np.array([-1, -2], np.float32), lambda old, new: new, dn,
                      indices_are_sorted=True, unique_indices=True)
    np.testing.assert_array_equal(out, [-1, 2, -2, 4])
    text = s.builder.build(s).as_stablehlo_text()
    assert "indices_are_sorted = true" in text and "unique_indices = true" in text


# -- DynamicSlice / DynamicUpdateSlice ------------------------------------------------------------

STARTS = [(0, 0), (2, 3), (-1, -5), (3, 10), (100, 1), (-(2**31), 2**31 - 1)]


def _clamp(s: int, d: int, n: int) -> int:
    return min(max(s, 0), d - n)


@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64, np.uint32, np.int8, np.uint8])
def test_dynamic_slice_and_update_clamp_starts(idx_dtype: Any) -> None:
    if idx_dtype == np.int64:
        skip_where_device_defines_otherwise("tpu-s64-dynamic-slice-starts")
    info = np.iinfo(idx_dtype)
    starts = [tuple(int(min(max(v, info.min), info.max)) for v in p) for p in STARTS]
    if idx_dtype in (np.uint32,):
        starts.append((2**32 - 1, 2**31))  # large unsigned values compare as unsigned: clamp high
    if idx_dtype is np.int64:
        starts.append((2**40, -(2**40)))
    x = np.arange(42, dtype=np.float32).reshape(6, 7)
    upd = -np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    b = xs.XlaBuilder("dyn")
    px = ops.Parameter(b, 0, shape(np.float32, x.shape))
    pu = ops.Parameter(b, 1, shape(np.float32, upd.shape))
    outs, args = [], [x, upd]
    for k, (i, j) in enumerate(starts):
        pi = ops.Parameter(b, 2 + 2 * k, shape(idx_dtype, ()))
        pj = ops.Parameter(b, 3 + 2 * k, shape(idx_dtype, ()))
        outs += [ops.DynamicSlice(px, [pi, pj], [2, 3]), ops.DynamicUpdateSlice(px, pu, (pi, pj))]
        args += [np.array(i, idx_dtype), np.array(j, idx_dtype)]
    assert outs[0].shape == shape(np.float32, (2, 3)) and outs[1].shape == shape(np.float32, (6, 7))
    results = run(b.build(ops.Tuple(b, outs)), *args)
    for k, (i, j) in enumerate(starts):
        r0, c0 = _clamp(i, 6, 2), _clamp(j, 7, 3)
        np.testing.assert_array_equal(results[2 * k], x[r0 : r0 + 2, c0 : c0 + 3], err_msg=str((i, j)))
        expect = x.copy()
        expect[r0 : r0 + 2, c0 : c0 + 3] = upd
        np.testing.assert_array_equal(results[2 * k + 1], expect, err_msg=str((i, j)))


def test_dynamic_slice_vector_and_int_starts_and_dtypes() -> None:
    x = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    b = xs.XlaBuilder("dyn2")
    px = ops.Parameter(b, 0, shape(np.int16, x.shape))
    vec = ops.Parameter(b, 1, shape(np.int64, (3,)))
    j = ops.Parameter(b, 2, shape(np.uint32, ()))
    d1 = ops.DynamicSlice(px, vec, (1, 2, 2))
    d2 = ops.DynamicSlice(px, [1, j, 9], (1, 3, 2))  # ints become u32 constants
    d3 = ops.DynamicUpdateSlice(px, ops.Constant(b, np.full((2, 1, 1), 7, np.int16)), [0, j, 0])
    d4 = ops.DynamicSlice(px, [0, 0, 0], (0, 3, 4))
    bools = ops.Constant(b, np.array([True, False, True, True]))
    d5 = ops.DynamicUpdateSlice(bools, ops.Constant(b, np.array([False, False])), [ops.Constant(b, np.int8(1))])
    o1, o2, o3, o4, o5 = run(
        b.build(ops.Tuple(b, [d1, d2, d3, d4, d5])), x, np.array([1, 1, 3], np.int64), np.array(2, np.uint32)
    )
    np.testing.assert_array_equal(o1, x[1:2, 1:3, 2:4])
    np.testing.assert_array_equal(o2, x[1:2, 0:3, 2:4])
    expect = x.copy()
    expect[:, 2, 0] = 7
    np.testing.assert_array_equal(o3, expect)
    assert o4.shape == (0, 3, 4)
    np.testing.assert_array_equal(o5, [True, False, False, True])


# -- errors ---------------------------------------------------------------------------------------


def _params(*shapes: xs.Shape) -> list[xs.XlaOp]:
    b = xs.XlaBuilder("err")
    return [ops.Parameter(b, i, s) for i, s in enumerate(shapes)]


def test_gather_errors() -> None:
    x, i, f, i2 = _params(
        shape(np.float32, (5, 3)), shape(np.int32, (4,)), shape(np.float32, (4,)), shape(np.int32, (4, 2))
    )
    with raises(DTypeError, "Gather", "'start_indices'", "integer"):
        ops.Gather(x, f, TAKE_DN, [1, 3])
    with raises(ShapeError, "Gather", "slice_sizes[1] = 4", "operand f32[5,3]"):
        ops.Gather(x, i, TAKE_DN, [1, 4])
    with raises(ShapeError, "Gather", "slice_sizes has 3 entries"):
        ops.Gather(x, i, TAKE_DN, [1, 3, 1])
    with raises(ShapeError, "Gather", "slice_sizes[0] = 2", "collapsed_slice_dims"):
        ops.Gather(x, i, TAKE_DN, [2, 3])
    with raises(ShapeError, "Gather", "slice_sizes[0] = 0 must be 1", "collapsed_slice_dims"):
        ops.Gather(x, i, TAKE_DN, [0, 3])
    with raises(ShapeError, "Gather", "slice_sizes[0] = -1"):
        ops.Gather(x, i, TAKE_DN, [-1, 3])
    with raises(ShapeError, "Gather", "start_index_map", "2 components"):
        ops.Gather(x, i2, TAKE_DN, [1, 3])
    dn = xs.GatherDimensionNumbers(offset_dims=[1], collapsed_slice_dims=[2], start_index_map=[0], index_vector_dim=1)
    with raises(ShapeError, "Gather", "collapsed_slice_dims [2]", "out of range", "operand f32[5,3]"):
        ops.Gather(x, i, dn, [1, 3])
    dn = xs.GatherDimensionNumbers(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=3)
    with raises(ShapeError, "Gather", "index_vector_dim = 3", "'start_indices'"):
        ops.Gather(x, i, dn, [1, 3])
    dn = xs.GatherDimensionNumbers(offset_dims=[3], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1)
    with raises(ShapeError, "Gather", "offset_dims [3]", "result"):
        ops.Gather(x, i, dn, [1, 3])
    dn = xs.GatherDimensionNumbers(
        offset_dims=[1, 2], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1
    )
    with raises(ShapeError, "Gather", "has rank 2", "give 3"):
        ops.Gather(x, i, dn, [1, 3])
    dn = xs.GatherDimensionNumbers(
        collapsed_slice_dims=[1], start_index_map=[1], index_vector_dim=1,
        operand_batching_dims=[0], start_indices_batching_dims=[0],
    )
    with raises(ShapeError, "Gather", "batching dimensions differ", "dimension 0 has 5", "has 4"):
        ops.Gather(x, i, dn, [1, 1])
    with raises(ShapeError, "Gather", "slice_sizes[0] = 2 must be 1", "operand_batching_dims"):
        ops.Gather(x, i, dn, [2, 1])
    with raises(ShapeError, "Gather", "dimension_numbers", "repeated"):
        ops.Gather(x, i, {"offset_dims": [1, 1], "collapsed_slice_dims": [0], "start_index_map": [0]}, [1, 3])
    with raises(ShapeError, "Gather", "unknown fields", "bogus"):
        ops.Gather(x, i, {"bogus": 1}, [1, 3])
    with raises(DTypeError, "Gather", "dimension_numbers must be a GatherDimensionNumbers"):
        ops.Gather(x, i, [1, 0, 0], [1, 3])  # type: ignore[arg-type]
    with raises(DTypeError, "Gather", "indices_are_sorted must be a bool"):
        ops.Gather(x, i, TAKE_DN, [1, 3], indices_are_sorted="yes")  # type: ignore[arg-type]
    with raises(DTypeError, "Gather", "'operand'", "XlaOp"):
        ops.Gather(np.zeros((5, 3)), i, TAKE_DN, [1, 3])  # type: ignore[arg-type]
    (other,) = _params(shape(np.int32, (4,)))
    with raises(ShapeError, "Gather", "'start_indices' belongs to builder"):
        ops.Gather(x, other, TAKE_DN, [1, 3])


SCATTER_DN = xs.ScatterDimensionNumbers(
    update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1
)


def test_scatter_errors() -> None:
    x, i, u, f, u_bad, u_i = _params(
        shape(np.float32, (5, 3)), shape(np.int32, (4,)), shape(np.float32, (4, 3)), shape(np.float32, (4,)),
        shape(np.float32, (4, 4)), shape(np.int32, (4, 3)),
    )

    def plus(a: xs.XlaOp, b: xs.XlaOp) -> xs.XlaOp:
        return a + b

    with raises(DTypeError, "Scatter", "'scatter_indices'", "integer"):
        ops.Scatter(x, f, u, plus, SCATTER_DN)
    with raises(DTypeError, "Scatter", "'updates'", "s32[4,3]", "f32"):
        ops.Scatter(x, i, u_i, plus, SCATTER_DN)
    with raises(ShapeError, "Scatter", "'updates' f32[4,4]", "window dimension 1 has size 4", "bound 3"):
        ops.Scatter(x, i, u_bad, plus, SCATTER_DN)
    with raises(ShapeError, "Scatter", "'updates' f32[4]", "rank 1, expected 2"):
        ops.Scatter(x, i, f, plus, SCATTER_DN)
    (u5,) = [p for p in _params(shape(np.float32, (5, 3)))]
    with raises(ShapeError, "Scatter", "builder"):
        ops.Scatter(x, i, u5, plus, SCATTER_DN)
    x2, i2, u2 = _params(shape(np.float32, (5, 3)), shape(np.int32, (4,)), shape(np.float32, (6, 3)))
    with raises(ShapeError, "Scatter", "scatter dimension 0 has size 6, expected 4"):
        ops.Scatter(x2, i2, u2, plus, SCATTER_DN)
    dn = xs.ScatterDimensionNumbers(
        update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[2], index_vector_dim=1
    )
    with raises(ShapeError, "Scatter", "scatter_dims_to_operand_dims [2]", "out of range"):
        ops.Scatter(x, i, u, plus, dn)
    dn = xs.ScatterDimensionNumbers(
        update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=2
    )
    with raises(ShapeError, "Scatter", "index_vector_dim = 2", "'scatter_indices'"):
        ops.Scatter(x, i, u, plus, dn)
    dn = xs.ScatterDimensionNumbers(
        update_window_dims=[5], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1
    )
    with raises(ShapeError, "Scatter", "update_window_dims [5]", "'updates'"):
        ops.Scatter(x, i, u, plus, dn)
    dn = xs.ScatterDimensionNumbers(
        update_window_dims=[1], scatter_dims_to_operand_dims=[0], index_vector_dim=1
    )
    with raises(ShapeError, "Scatter", "has rank 2", "give 1"):
        ops.Scatter(x, i, u, plus, dn)
    with raises(ShapeError, "Scatter", "dimension_numbers", "sorted"):
        ops.Scatter(x, i, u, plus, {"update_window_dims": [1], "inserted_window_dims": [1, 0],
                                    "scatter_dims_to_operand_dims": [0], "index_vector_dim": 1})
    with raises(DTypeError, "Scatter", "dimension_numbers must be a ScatterDimensionNumbers"):
        ops.Scatter(x, i, u, plus, TAKE_DN)  # type: ignore[arg-type]
    with raises(DTypeError, "Scatter", "unique_indices must be a bool"):
        ops.Scatter(x, i, u, plus, SCATTER_DN, unique_indices=1)  # type: ignore[arg-type]


def test_scatter_update_computation_errors() -> None:
    x, i, u = _params(shape(np.float32, (5, 3)), shape(np.int32, (4,)), shape(np.float32, (4, 3)))
    with raises(ShapeError, "Scatter", "update_computation", "takes 3 arguments but 2"):
        ops.Scatter(x, i, u, lambda a, b, c: a, SCATTER_DN)
    with raises(ShapeError, "Scatter", "update_computation", "must return one scalar f32[]"):
        ops.Scatter(x, i, u, lambda a, b: (a, b), SCATTER_DN)
    with raises(DTypeError, "Scatter", "update_computation returns s32[]", "f32[]"):
        ops.Scatter(x, i, u, lambda a, b: ops.ConvertElementType(a, np.int32), SCATTER_DN)
    with raises(DTypeError, "Scatter", "update_computation must be an XlaComputation or a callable"):
        ops.Scatter(x, i, u, "add", SCATTER_DN)
    sub = xs.XlaBuilder("int_add")
    s32 = shape(np.int32, ())
    int_add = sub.build(ops.Add(ops.Parameter(sub, 0, s32), ops.Parameter(sub, 1, s32)))
    with raises(ShapeError, "Scatter", "update_computation 'int_add' takes (s32[], s32[])", "(f32[], f32[])"):
        ops.Scatter(x, i, u, int_add, SCATTER_DN)
    sub = xs.XlaBuilder("vec")
    vec = sub.build(ops.Parameter(sub, 0, shape(np.float32, (3,))) + ops.Parameter(sub, 1, shape(np.float32, (3,))))
    with raises(ShapeError, "Scatter", "update_computation 'vec'"):
        ops.Scatter(x, i, u, vec, SCATTER_DN)


def test_dynamic_slice_errors() -> None:
    x, i, j, k64, f, v = _params(
        shape(np.float32, (4, 5)), shape(np.int32, ()), shape(np.int32, ()), shape(np.int64, ()),
        shape(np.float32, ()), shape(np.int32, (3,)),
    )
    with raises(ShapeError, "DynamicSlice", "start_indices has 1 entries, expected 2"):
        ops.DynamicSlice(x, [i], [1, 1])
    with raises(ShapeError, "DynamicSlice", "slice_sizes has 3 entries"):
        ops.DynamicSlice(x, [i, j], [1, 1, 1])
    with raises(ShapeError, "DynamicSlice", "slice_sizes[1] = 6", "f32[4,5]"):
        ops.DynamicSlice(x, [i, j], [1, 6])
    with raises(ShapeError, "DynamicSlice", "slice_sizes[0] = -1"):
        ops.DynamicSlice(x, [i, j], [-1, 2])
    with raises(DTypeError, "DynamicSlice", "'start_indices[1]'", "integer", "f32[]"):
        ops.DynamicSlice(x, [i, f], [1, 1])
    with raises(DTypeError, "DynamicSlice", "same element type", "s64[]"):
        ops.DynamicSlice(x, [i, k64], [1, 1])
    with raises(ShapeError, "DynamicSlice", "'start_indices[0]' must be a scalar", "s32[3]"):
        ops.DynamicSlice(x, [v, j], [1, 1])
    with raises(ShapeError, "DynamicSlice", "'start_indices' s32[3]", "vector of 2"):
        ops.DynamicSlice(x, v, [1, 1])
    with raises(DTypeError, "DynamicSlice", "'start_indices[0]'", "float"):
        ops.DynamicSlice(x, [1.5, j], [1, 1])  # type: ignore[list-item]
    with raises(ShapeError, "DynamicSlice", "start_indices[0] = -1", "uint32"):
        (u,) = _params(shape(np.uint32, ()))
        ops.DynamicSlice(ops.Broadcast(u, [3, 3]), [-1, u], [1, 1])
    with raises(DTypeError, "DynamicSlice", "start_indices must be a sequence"):
        ops.DynamicSlice(x, 3, [1, 1])  # type: ignore[arg-type]
    (other,) = _params(shape(np.int32, ()))
    with raises(ShapeError, "DynamicSlice", "'start_indices[0]' belongs to builder"):
        ops.DynamicSlice(x, [other, j], [1, 1])


def test_dynamic_update_slice_errors() -> None:
    x, i, j, u_big, u_rank, u_int, f = _params(
        shape(np.float32, (4, 5)), shape(np.int32, ()), shape(np.int32, ()), shape(np.float32, (2, 6)),
        shape(np.float32, (2,)), shape(np.int32, (2, 2)), shape(np.float32, ()),
    )
    with raises(ShapeError, "DynamicUpdateSlice", "'update' f32[2,6]", "dimension 1 has size 6", "(5)"):
        ops.DynamicUpdateSlice(x, u_big, [i, j])
    with raises(ShapeError, "DynamicUpdateSlice", "'update' f32[2] has rank 1, expected 2"):
        ops.DynamicUpdateSlice(x, u_rank, [i, j])
    with raises(DTypeError, "DynamicUpdateSlice", "'update' is s32[2,2]", "f32"):
        ops.DynamicUpdateSlice(x, u_int, [i, j])
    with raises(DTypeError, "DynamicUpdateSlice", "'start_indices[0]'", "integer"):
        ops.DynamicUpdateSlice(x, ops.Slice(x, [0, 0], [1, 1]), [f, j])
    with raises(ShapeError, "DynamicUpdateSlice", "start_indices has 3 entries"):
        ops.DynamicUpdateSlice(x, ops.Slice(x, [0, 0], [1, 1]), [i, j, i])


# -- the pure shape rule of Scatter, without a builder ----------------------------------------------


def test_scatter_rule() -> None:
    dn = xs.ScatterDimensionNumbers(
        update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1
    )
    x, idx = shape(np.float32, (5, 3)), shape(np.int32, (2, 1))
    assert scatter_shape("Scatter", x, idx, shape(np.float32, (2, 3)), dn) == x
    assert scatter_shape("Scatter", x, idx, shape(np.float32, (2, 2)), dn) == x  # a smaller window
    with raises(ShapeError, "Scatter:", "operand 'updates' f32[2] has rank 1, expected 2"):
        scatter_shape("Scatter", x, idx, shape(np.float32, (2,)), dn)
    with raises(ShapeError, "window dimension 1 has size 4, larger than the operand's window bound 3"):
        scatter_shape("Scatter", x, idx, shape(np.float32, (2, 4)), dn)
    with raises(ShapeError, "scatter dimension 0 has size 3, expected 2"):
        scatter_shape("Scatter", x, idx, shape(np.float32, (3, 3)), dn)
